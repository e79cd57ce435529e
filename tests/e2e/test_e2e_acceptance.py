"""End to end: the acceptance review through the real server, its model an Anthropic-shaped
fake over HTTP (the server's own provider code, prices and all), GitHub the fake over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.testing.fake_llm import FakeAnthropic
from tests.e2e.world import REPO, World, make_world
from tests.model_server import serve_anthropic

pytestmark = pytest.mark.e2e


def _verdict(sid: str, verdict: str, evidence: str) -> dict[str, object]:
    path = f"{sid.lower()}.txt"
    return {
        "story_id": sid,
        "criterion": 1,
        "verdict": verdict,
        "evidence": evidence,
        "path": path,
        "line": 1,
    }


SCRIPT = [
    ("read", {"path": "story-001.txt"}),
    (
        "submit",
        {
            "summary": "Both files are there.",
            "verdicts": [
                _verdict("STORY-001", "met", "says done"),
                _verdict("STORY-002", "met", "says done"),
            ],
        },
    ),
    ("submit", {"verdicts": [_verdict("STORY-003", "met", "says done")]}),
]


@pytest.fixture
def model() -> Iterator[tuple[FakeAnthropic, str]]:
    fake = FakeAnthropic(SCRIPT)
    with serve_anthropic(fake) as url:
        yield fake, url


@pytest.fixture
def world(tmp_path: Path, model: tuple[FakeAnthropic, str]) -> Iterator[World]:
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-key", "PLAN_CASCADE_LLM_BASE_URL": model[1]}
    yield from make_world(tmp_path, extra_env=env)


def test_every_batch_is_reviewed_against_its_criteria(world: World, model: tuple[FakeAnthropic, str]) -> None:
    fake_model, _ = model
    world.run_greetings()
    _, state = world.plan()
    pulls = sorted(world.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    assert len(pulls) == 2 and not any(p.draft for p in pulls)
    for pull in pulls:
        body = world.fake.repo(REPO).issues[pull.number].body
        assert "- [x] story-00" in body and "- [ ]" not in body
    reviews = world.fake.repo(REPO).reviews
    assert sorted((r.pull_number, r.state) for r in reviews) == [(p.number, "COMMENTED") for p in pulls]
    cited = sorted((c.path, c.line) for c in world.fake.repo(REPO).review_comments)
    assert cited == [("story-001.txt", 1), ("story-002.txt", 1), ("story-003.txt", 1)]
    # The reviewer read the file at the batch head, and what it cost is in the plan's budget.
    assert "done" in str(fake_model.requests[1]["messages"][-1])
    assert len(fake_model.requests) == 3
    assert state.review_tokens > 0 and state.review_cost_usd > 0
    assert "sk-ant-test-key" not in str(fake_model.requests)
