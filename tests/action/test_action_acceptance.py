"""The Action reviews each batch against its acceptance criteria like the App does: its model
(an Anthropic-shaped fake over loopback HTTP, through the Action's own provider code) reads the
batch head read-only, the PR body's boxes follow the verdicts, and the verdicts are a review."""

from __future__ import annotations

from pathlib import Path

from bot.action.runner import run_action
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from bot.testing.fake_llm import FakeAnthropic
from tests.action.action_support import ActionWorld, comment_event, labeled_event
from tests.harness import REPO
from tests.model_server import serve_anthropic


def _verdict(sid: str, verdict: str, evidence: str) -> dict[str, object]:
    return {"story_id": sid, "criterion": 1, "verdict": verdict, "evidence": evidence}


SCRIPT = [
    ("read", {"path": "story-002.txt"}),
    (
        "submit",
        {
            "summary": "Batch 1.",
            "verdicts": [
                _verdict("STORY-001", "met", "says done"),
                _verdict("STORY-002", "met", "says done"),
            ],
        },
    ),
    ("submit", {"verdicts": [_verdict("STORY-003", "not_met", "REASON-A: it says done, not hello")]}),
]


def test_the_action_reviews_each_batch_and_drafts_the_one_that_falls_short(tmp_path: Path) -> None:
    world = ActionWorld(tmp_path)
    model = FakeAnthropic(SCRIPT)
    with serve_anthropic(model) as url:
        llm = {"ANTHROPIC_API_KEY": "sk-ant-action-key", "PLAN_CASCADE_LLM_BASE_URL": url}
        assert (
            run_action(world.env("issues", labeled_event(world), **llm), transport=world.fake.transport())
            == 0
        )
        approve = world.env("issue_comment", comment_event(world, "/plan-cascade approve"), **llm)
        assert run_action(approve, transport=world.fake.transport()) == 0
    (comment,) = world.plan_comments()
    state = decode_state(comment.body)
    assert state.status == PlanStatus.COMPLETED, state.note
    first, second = sorted(world.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    assert not first.draft and "- [x] story-001.txt" in world.fake.repo(REPO).issues[first.number].body
    assert second.draft, "a criterion not met after one send-back keeps the PR a draft"
    # Sent back once, its agent wrote the same file: the head did not change, the verdict stands.
    assert "REASON-A" in world.fake.repo(REPO).issues[second.number].body
    assert state.stories["STORY-003"].review_rounds == 1
    assert sorted(r.pull_number for r in world.fake.repo(REPO).reviews) == [first.number, second.number]
    assert len(model.requests) == 3 and "done" in str(model.requests[1]["messages"][-1])
    assert state.review_cost_usd > 0 and "sk-ant-action-key" not in str(model.requests)
