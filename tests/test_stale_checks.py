"""At start-up, check runs of ours that a stopped process left running are completed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.db.models import PlanRecord
from bot.handlers.stale_checks import sweep_stale_checks
from bot.testing.fake_github_model import FakeCheckRun
from tests.harness import REPO, Harness, commented
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
