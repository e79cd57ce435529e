"""Sample plans in every state, with fixed times, and the snapshot helper for rendering tests."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.plan import PRD, Level, Priority, Story, StoryType, Strategy
from bot.plan.approval import add_approval, scope_for
from bot.plan.state import (
    Approval,
    BatchState,
    PlanState,
    PlanStatus,
    StoryStatus,
    new_plan,
    revise,
    transition,
    update_story,
)

SNAPSHOTS = Path(__file__).parent / "snapshots"
T0 = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)


def assert_snapshot(name: str, text: str) -> None:
    """Compare `text` with snapshots/<name>; UPDATE_SNAPSHOTS=1 rewrites the file instead."""
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no snapshot {path.name}: run the tests with UPDATE_SNAPSHOTS=1 and review it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{path.name} differs from the rendering; UPDATE_SNAPSHOTS=1 rewrites it"


def at(minutes: int) -> datetime:
    """T0 plus some minutes."""
    return T0 + timedelta(minutes=minutes)


def sample_prd(*, extra: bool = False) -> PRD:
    """A small, realistic plan: four stories in three batches (five with `extra`)."""
    stories = [
        Story(
            id="STORY-001",
            title="Add a token-bucket limiter",
            description="Create `RateLimiter` with a token bucket per client key.\n\nIt must be thread-safe.",
            type=StoryType.FEATURE,
            priority=Priority.HIGH,
            acceptance_criteria=[
                "limiter.allow('k') returns False after 10 calls within 1 s",
                "a bucket refills 10 tokens per second (checked with a fake clock)",
            ],
            files=["app/limiter.py", "tests/test_limiter.py"],
            verification="pytest -q tests/test_limiter.py",
        ),
        Story(
            id="STORY-002",
            title="Read limits from settings",
            description="Add `RATE_LIMIT_PER_SECOND` (default 10) to the settings model.",
            type=StoryType.FEATURE,
            acceptance_criteria=["Settings().rate_limit_per_second == 10 when the variable is unset"],
            files=["app/settings.py"],
        ),
        Story(
            id="STORY-003",
            title="Return 429 with Retry-After from the API middleware",
            description="Wire the limiter into the ASGI middleware; ask @octocat about headers.",
            type=StoryType.FEATURE,
            priority=Priority.HIGH,
            depends_on=["STORY-001", "STORY-002"],
            acceptance_criteria=[
                "the 11th request within 1 s gets status 429",
                "the 429 response has a Retry-After header of 1",
            ],
            verification="pytest -q tests/test_api.py -k rate",
        ),
        Story(
            id="STORY-004",
            title="Document the limits in docs/limits.md",
            type=StoryType.DOCS,
            priority=Priority.LOW,
            depends_on=["STORY-003"],
            acceptance_criteria=["docs/limits.md names RATE_LIMIT_PER_SECOND and its default of 10"],
            files=["docs/limits.md"],
        ),
    ]
    if extra:
        stories.append(
            Story(
                id="STORY-005",
                title="Log rejected requests at INFO",
                type=StoryType.FEATURE,
                priority=Priority.LOW,
                depends_on=["STORY-003"],
                acceptance_criteria=["a rejected request logs one INFO line with the client key"],
            )
        )
    return PRD(
        title="Add rate limiting to the public API",
        summary="Protect the public API from bursts: a per-client token bucket, configurable limits, "
        "429 responses with `Retry-After`, and documentation.",
        strategy=Strategy.HYBRID,
        complexity=Level.MEDIUM,
        risk=Level.LOW,
        stories=stories,
    )


def awaiting_state() -> PlanState:
    """Revision 2 awaiting approval, with perspectives, a changelog, a warning and a stale approval."""
    state = new_plan(repo="acme/api", issue=42, prd=sample_prd(), at=T0, required_approvals=2)
    state, _ = add_approval(
        state, Approval(user="alice", at=at(5), via="reaction", plan_hash=state.plan_hash)
    )
    state = revise(
        state,
        sample_prd(extra=True),
        at=at(20),
        changelog=["added STORY-005: Log rejected requests at INFO"],
    )
    return state.model_copy(
        update={
            "planning_tokens": 48_210,
            "planning_cost_usd": 0.2134,
            "warnings": ["STORY-004 has no verification command"],
            "perspectives": {
                "security": "- Key the buckets on the **authenticated** client, not the IP.\n"
                "- Never log API keys; `<script>` in a key must stay text.",
                "architecture": "Keep the limiter behind a small protocol:\n\n"
                "```python\nclass Limiter(Protocol):\n"
                "    def allow(self, key: str) -> bool: ...\n```",
            },
        }
    )


def approved_state() -> PlanState:
    """Revision 1 approved by two people, one of them for batch 1 only."""
    state = new_plan(repo="acme/api", issue=42, prd=sample_prd(), at=T0, required_approvals=2)
    state = state.model_copy(update={"planning_tokens": 31_000, "planning_cost_usd": 0.1421})
    batch_1 = scope_for(state, batch=1)
    state, _ = add_approval(
        state, Approval(user="alice", at=at(5), via="command", plan_hash=state.plan_hash, scope=batch_1)
    )
    state, _ = add_approval(state, Approval(user="bob", at=at(9), via="reaction", plan_hash=state.plan_hash))
    return state


def running_state() -> PlanState:
    """Running: batch 1 passed and published, STORY-003 on its second attempt."""
    state = transition(approved_state(), PlanStatus.RUNNING, at=at(10))
    state = update_story(
        state, "STORY-001", status=StoryStatus.PASSED, attempts=1, tokens=120_400, cost_usd=0.61
    )
    state = update_story(
        state, "STORY-002", status=StoryStatus.PASSED, attempts=1, tokens=40_100, cost_usd=0.2
    )
    state = update_story(
        state, "STORY-003", status=StoryStatus.RUNNING, attempts=2, tokens=95_000, cost_usd=0.48
    )
    batches = list(state.batches)
    batches[0] = BatchState(
        number=1,
        branch="plan-cascade/42/batch-1",
        pr_number=101,
        pr_url="https://github.com/acme/api/pull/101",
        merged=True,
    )
    return state.model_copy(update={"batches": batches, "updated_at": at(55)})


def failed_state() -> PlanState:
    """Failed: STORY-003 failed its gates three times, STORY-004 was skipped."""
    state = update_story(
        running_state(),
        "STORY-003",
        status=StoryStatus.FAILED,
        attempts=3,
        reason="gate `test` failed: tests/test_api.py::test_429 expected 429, got 200 (@bob's fixture?)",
    )
    state = update_story(
        state, "STORY-004", status=StoryStatus.SKIPPED, reason="depends on STORY-003, which failed"
    )
    return transition(state, PlanStatus.FAILED, at=at(80), note="STORY-003 failed after 3 attempts")


_WORDS = (
    "limiter bucket token client request header middleware settings cache queue retry backoff worker "
    "session schema migration index column table query handler router endpoint payload response status "
    "timeout deadline budget metric counter gauge histogram export import parser encoder decoder stream "
    "buffer socket thread process signal config default override fallback window burst refill capacity "
    "latency throughput tenant account invoice ledger balance report summary audit event webhook delivery "
    "signature secret rotate expire refresh verify validate normalise serialise paginate filter sort merge "
    "split batch chunk shard replica leader follower election snapshot restore archive prune compact vacuum "
    "trace span sample alert notify escalate acknowledge resolve incident runbook dashboard panel widget"
).split()


def big_prd(count: int, *, seed: int = 7) -> PRD:
    """A plan of `count` stories: titles ~60, descriptions ~250, 3 criteria of ~90 characters each."""
    rng = random.Random(seed)

    def words(length: int) -> str:
        out: list[str] = []
        while sum(len(w) + 1 for w in out) < length:
            out.append(rng.choice(_WORDS))
        return " ".join(out)[:length].strip()

    stories = []
    for number in range(1, count + 1):
        earlier = list(range(max(1, number - 30), number))
        deps = sorted(rng.sample(earlier, min(len(earlier), rng.randint(0, 2))))
        stories.append(
            Story(
                id=f"STORY-{number:03d}",
                title=words(60).capitalize(),
                description=words(250),
                type=rng.choice(list(StoryType)),
                priority=rng.choice(list(Priority)),
                depends_on=[f"STORY-{d:03d}" for d in deps],
                acceptance_criteria=[words(90) for _ in range(3)],
                files=[f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"],
                verification=f"pytest -q tests/test_{rng.choice(_WORDS)}.py",
            )
        )
    return PRD(title="Rebuild the billing pipeline", summary=words(400), stories=stories)
