"""Comment commands are parsed strictly; anything else is not for us."""

from __future__ import annotations

import pytest

from bot.runtime.commands import parse_command


@pytest.mark.parametrize(
    ("body", "name", "text", "batch", "stories"),
    [
        ("/plan-cascade plan", "plan", "", None, []),
        ("/plan-cascade plan keep it small\nand fast", "plan", "keep it small\nand fast", None, []),
        ("/plan-cascade approve", "approve", "", None, []),
        ("/plan-cascade approve batch 2", "approve", "batch 2", 2, []),
        (
            "/plan-cascade approve story-001, STORY-002",
            "approve",
            "story-001, STORY-002",
            None,
            ["STORY-001", "STORY-002"],
        ),
        ("/plan-cascade revise split STORY-002", "revise", "split STORY-002", None, []),
        ("/plan-cascade retry STORY-003", "retry", "STORY-003", None, ["STORY-003"]),
        (
            "/plan-cascade skip STORY-003 STORY-004",
            "skip",
            "STORY-003 STORY-004",
            None,
            ["STORY-003", "STORY-004"],
        ),
        ("/plan-cascade cancel", "cancel", "", None, []),
        ("/Plan-Cascade STATUS", "status", "", None, []),
        ("/plan-cascade", "help", "", None, []),
        ("\n\n/plan-cascade help\n", "help", "", None, []),
        ("@plan-cascade-bot approve", "approve", "", None, []),
        ("/plan-cascade fix rename the flag", "fix", "rename the flag", None, []),
    ],
)
def test_commands(body, name, text, batch, stories) -> None:
    cmd = parse_command(body, app_slug="plan-cascade-bot")
    assert cmd is not None and cmd.valid, cmd
    assert (cmd.name, cmd.text, cmd.batch, cmd.stories) == (name, text, batch, stories)


def test_plan_comment_with_a_prd_block_keeps_the_block() -> None:
    body = "/plan-cascade plan\n```prd\nversion: 1\n```\n"
    cmd = parse_command(body)
    assert cmd.name == "plan" and "```prd" in cmd.text


@pytest.mark.parametrize(
    "body",
    [
        "please /plan-cascade plan",
        "> /plan-cascade approve\nthanks",
        "/plan-cascadeplan",
        "",
        None,
        "@someone-else approve",
    ],
)
def test_not_for_us(body) -> None:
    assert parse_command(body, app_slug="plan-cascade-bot") is None


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("/plan-cascade deploy now", "unknown command `deploy`"),
        ("/plan-cascade approve batch two", "approve batch N"),
        ("/plan-cascade approve everything", "story ids"),
        ("/plan-cascade retry story 3", "needs story ids"),
        ("/plan-cascade skip", "needs story ids"),
        ("/plan-cascade skip story 3", "needs story ids"),
        ("/plan-cascade revise", "needs feedback"),
    ],
)
def test_malformed_commands_say_why(body, problem) -> None:
    cmd = parse_command(body)
    assert cmd is not None and not cmd.valid and problem in cmd.problem
