"""Batch pull request titles, and what their bodies and check runs say the egress proxy refused."""

from __future__ import annotations

from bot.gates.report import GateResult, check_output
from bot.plan import Strategy
from bot.plan.blocked import BlockedRequest
from bot.plan.state import StoryStatus, update_story
from bot.rendering.pr_body import pr_body, pr_title
from tests.rendering.samples import approved_state, running_state


def test_a_hybrid_plan_numbers_its_batch_prs() -> None:
    state = approved_state()
    first = state.batches_ids()[0]
    title = pr_title(state, 1, first)
    assert title.startswith(f"[Plan Cascade] #{state.issue} batch 1/{len(state.batches_ids())}: ")


def test_a_direct_plan_has_one_pr_without_batch_numbers() -> None:
    state = approved_state()
    story = state.prd.stories[0].model_copy(update={"depends_on": []})
    prd = state.prd.model_copy(update={"strategy": Strategy.DIRECT, "stories": [story]})
    direct = state.model_copy(update={"prd": prd})
    assert pr_title(direct, 1, [story.id]) == f"[Plan Cascade] #{state.issue}: {story.title}"


def test_the_pr_body_lists_what_the_egress_proxy_refused_each_story_of_the_batch() -> None:
    state = running_state()
    refused = [
        BlockedRequest(host="elsewhere.example", port=443, count=3, by="agent", reason="unlisted"),
        BlockedRequest(host="pypi.org", port=443, count=1, by="agent", reason="narrowed"),
    ]
    state = update_story(state, "STORY-001", blocked=refused)
    inward = BlockedRequest(host="mirror.corp", port=443, count=2, by="setup", reason="inward")
    state = update_story(
        state, "STORY-002", status=StoryStatus.FAILED, reason="gates failed", blocked=[inward]
    )
    body = pr_body(state, 1, ["STORY-001"], plan_url="https://x/1", integration={})
    section = body.split("## Network requests blocked", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| STORY")]
    assert rows == [
        "| STORY-001 | agent | `elsewhere.example:443` | 3 | `PLAN_CASCADE_AGENT_EGRESS` "
        "(the operator's setting) |",
        "| STORY-001 | agent | `pypi.org:443` | 1 | `agent.egress` in `.github/plan-cascade.yml` "
        "(the operator's list has it) |",
        "| STORY-002 | setup | `mirror.corp:443` | 2 | its address with the port in "
        "`PLAN_CASCADE_SETUP_EGRESS` (it resolves to a non-public address) |",
    ], "the failed story's too: it may be why it failed"
    assert "Network requests blocked" not in pr_body(
        running_state(), 1, ["STORY-001"], plan_url="u", integration={}
    )


def test_a_check_run_shows_the_refusals_above_the_output() -> None:
    result = GateResult(
        name="test",
        command="pytest",
        exit_code=0,
        output="1 passed",
        duration_s=1.0,
        blocked=[BlockedRequest(host="*", port=0, count=7, by="agent", reason="unlisted")],
    )
    summary = check_output(result)["summary"]
    assert summary.index("### Network: 7 request(s) blocked") < summary.index("### Output")
    assert "| agent | `other hosts` | 7 |" in summary
