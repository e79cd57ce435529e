"""At start-up, check runs of ours that a stopped process left running are completed."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app.stale_checks import sweep_stale_checks
from bot.db.models import Job, PlanRecord
from bot.testing.fake_github_model import FakeCheckRun
from tests.harness import REPO, Harness, commented
from tests.processes import dead_identity, identity_of
from tests.test_publishing import PRD

OLD = "2026-01-01T00:00:00Z"


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        harness.fake.add_issue(REPO, title="Greetings", body=PRD)
        await harness.deliver("issue_comment", commented(number=1, body="/plan-cascade plan"))
        await harness.drain()
        async with harness.runtime.db.write() as db:  # the plan was running when its process died
            record = await db.get(PlanRecord, (REPO, 1))
            assert record is not None
            record.status = "running"
        yield harness


def _run(h: Harness, name: str, sha: str, **fields: object) -> FakeCheckRun:
    run = FakeCheckRun(len(h.fake.repo(REPO).check_runs) + 5000, name, sha, status="in_progress")
    for key, value in fields.items():
        setattr(run, key, value)
    h.fake.repo(REPO).check_runs[run.id] = run
    return run


async def test_runs_a_dead_process_left_running_are_completed(h: Harness) -> None:
    story = h.fake.add_branch(REPO, "plan-cascade/1/story-001")
    batch = h.fake.add_branch(REPO, "plan-cascade/1/batch-1")
    left = _run(h, "plan-cascade / STORY-001 / files", story, started_at=OLD)
    left_on_batch = _run(h, "plan-cascade / batch-1 / files", batch, started_at=OLD, status="queued")
    theirs = _run(h, "CI / test", story, started_at=OLD, app_slug="github-actions")
    resumed = _run(h, "plan-cascade / STORY-001 / files", story)  # started by this process: live
    closed = await sweep_stale_checks(h.services, before=datetime.now(UTC) - timedelta(minutes=1))
    assert closed == 2
    assert (left.status, left.conclusion) == ("completed", "neutral")
    assert left.output["title"].startswith("Stopped")
    assert (left_on_batch.status, left_on_batch.conclusion) == ("completed", "neutral")
    assert theirs.status == "in_progress" and resumed.status == "in_progress"


async def test_a_plan_whose_job_runs_elsewhere_is_left_alone(h: Harness) -> None:
    story = h.fake.add_branch(REPO, "plan-cascade/1/story-001")
    left = _run(h, "plan-cascade / STORY-001 / files", story, started_at=OLD)
    queue = h.runtime.queue
    await queue.enqueue(kind="execute_plan", group_key=f"{REPO}#1/run", payload={})
    job = await queue.claim("another-process")
    assert job is not None
    assert await sweep_stale_checks(h.services, before=datetime.now(UTC)) == 0
    assert left.status == "in_progress"


async def _held_by(h: Harness, holder: str, *, lease_until: datetime) -> None:
    queue = h.runtime.queue
    await queue.enqueue(kind="execute_plan", group_key=f"{REPO}#1/run", payload={})
    job = await queue.claim(holder)
    assert job is not None
    async with h.runtime.db.write() as db:
        row = await db.get(Job, job.id)
        assert row is not None
        row.lease_until = lease_until


async def test_a_live_sibling_on_this_host_keeps_its_runs_even_past_its_lease(h: Harness) -> None:
    """Another worker sharing this host (and data dir) runs the plan: its gate's check run is its own,
    even when its lease lapsed (a long pause of its loop): only a dead process's runs are closed."""
    story = h.fake.add_branch(REPO, "plan-cascade/1/story-001")
    running = _run(h, "plan-cascade / STORY-001 / files", story, started_at=OLD)
    sibling = subprocess.Popen(["sleep", "600"])
    try:
        await _held_by(
            h, f"{identity_of(sibling.pid)}:abc123", lease_until=datetime.now(UTC) - timedelta(seconds=5)
        )
        assert await sweep_stale_checks(h.services, before=datetime.now(UTC)) == 0
        assert running.status == "in_progress"
    finally:
        sibling.kill()
        sibling.wait()


async def test_a_dead_process_of_this_host_leaves_its_runs_behind_even_within_its_lease(h: Harness) -> None:
    """The worker running the plan was killed a moment ago: its lease still runs, its runs are stale."""
    story = h.fake.add_branch(REPO, "plan-cascade/1/story-001")
    left = _run(h, "plan-cascade / STORY-001 / files", story, started_at=OLD)
    await _held_by(h, f"{dead_identity()}:abc123", lease_until=datetime.now(UTC) + timedelta(minutes=50))
    assert await sweep_stale_checks(h.services, before=datetime.now(UTC)) == 1
    assert (left.status, left.conclusion) == ("completed", "neutral")
