"""Hostile configuration and PRD text always ends in one comment that fits GitHub's limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.load import load_repo_config
from bot.errors import RepoConfigError
from tests.harness import REPO, Harness, labeled

DEEP = "agent: " + "[" * 1000 + "]" * 1000  # 2 KB
MANY = "\n".join(f"unknown_key_{n}: 1" for n in range(3000))
COMMENT_LIMIT = 65_536


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        harness.fake.set_permission(REPO, "maint", "maintain")
        yield harness


@pytest.mark.parametrize(("text", "said"), [(DEEP, "nested more than 32 levels"), (MANY, "more problems")])
async def test_a_hostile_config_gets_one_comment_that_fits(h: Harness, text: str, said: str) -> None:
    h.fake.set_file(REPO, ".github/plan-cascade.yml", text)
    h.fake.add_issue(REPO, title="t", body="x")
    await h.deliver("issues", labeled(number=1, sender="maint"))
    assert await h.drain() == ["done"]  # the job neither crashed nor died
    (reply,) = h.comments(1)
    assert said in reply and len(reply) < COMMENT_LIMIT and not h.plan_comments(1)


@pytest.mark.parametrize(
    "prd",
    [
        "```prd\nversion: 1\nstories: " + "[" * 1000 + "]" * 1000 + "\n```",
        "```prd\nversion: 1\ntitle: t\nsummary: s\nstories:\n"
        + "".join(f"  - id: bad id {'x' * 300} {n}\n    title: t\n" for n in range(3000))
        + "```",
    ],
    ids=["deep", "thousands of problems"],
)
async def test_a_hostile_prd_block_gets_one_comment_that_fits(h: Harness, prd: str) -> None:
    h.fake.add_issue(REPO, title="t", body=prd)
    await h.deliver("issues", labeled(number=1, sender="maint"))
    assert await h.drain() == ["done"]
    (reply,) = h.comments(1)
    assert len(reply) < COMMENT_LIMIT and not h.plan_comments(1)


def test_the_config_problem_names_the_line() -> None:
    with pytest.raises(RepoConfigError) as caught:
        load_repo_config("llm:\n  model: x\nagent:\n  limits: " + "[" * 40 + "]" * 40)
    assert "line 4" in caught.value.problems[0]
