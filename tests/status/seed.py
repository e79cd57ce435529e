"""Plans, jobs and deliveries written straight into the database, for the status page's tests
and `bench/status.py` (written once, STYLE §5)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.db.models import Delivery, Job, PlanRecord
from bot.db.queue import job_row
from bot.plan import PRD, Story
from bot.plan.state import Approval, BatchState, PlanState, PlanStatus, StoryStatus, new_plan

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def three_story_prd(title: str = "Greetings") -> PRD:
    """Two independent stories, then one that needs both (two batches)."""
    return PRD(
        title=title,
        summary="Two files, then one that needs both.",
        stories=[
            Story(id="STORY-001", title="Hello file", acceptance_criteria=["story-001.txt says done"]),
            Story(id="STORY-002", title="World file", acceptance_criteria=["story-002.txt says done"]),
            Story(
                id="STORY-003",
                title="Both",
                depends_on=["STORY-001", "STORY-002"],
                acceptance_criteria=["story-003.txt says done", "the README lists both"],
            ),
        ],
    )


def running_plan(
    repo: str = "octo-org/shop", issue: int = 12, *, title: str = "Greetings", at: datetime = NOW
) -> PlanState:
    """An approved plan in its first batch: STORY-001 passed, STORY-002 running, PR #7 on batch 1."""
    state = new_plan(repo=repo, issue=issue, prd=three_story_prd(title), at=at - timedelta(hours=2))
    approval = Approval(
        user="maintainer", at=at - timedelta(hours=1), via="reaction", plan_hash=state.plan_hash, revision=1
    )
    stories = dict(state.stories)
    stories["STORY-001"] = stories["STORY-001"].model_copy(
        update={
            "status": StoryStatus.PASSED,
            "attempts": 2,
            "agent": "builtin",
            "model": "claude-sonnet-5-5",
            "tokens": 12_500,
            "cost_usd": 0.42,
            "gates": {"tests": "success", "lint": "success"},
            "check_runs": {"tests": 9001, "lint": 9002},
        }
    )
    stories["STORY-002"] = stories["STORY-002"].model_copy(
        update={
            "status": StoryStatus.RUNNING,
            "attempts": 1,
            "agent": "builtin",
            "model": "claude-sonnet-5-5",
        }
    )
    batches = [
        BatchState(number=1, pr_number=7, pr_url=f"https://github.com/{repo}/pull/7"),
        BatchState(number=2),
    ]
    return state.model_copy(
        update={
            "status": PlanStatus.RUNNING,
            "approvals": [approval],
            "approved_scope": [s.id for s in state.prd.stories],
            "stories": stories,
            "batches": batches,
            "planning_cost_usd": 0.08,
            "updated_at": at,
            "version": 5,
        }
    )


def plan_values(
    state: PlanState, *, installation_id: int | None = 777, at: datetime | None = None
) -> dict[str, Any]:
    """A `plans` row's columns for `state`."""
    return {
        "repo": state.repo,
        "issue_number": state.issue,
        "status": state.status.value,
        "installation_id": installation_id,
        "plan_comment_id": 1000 + state.issue,
        "reactions_etag": None,
        "state": state.model_dump(mode="json"),
        "updated_at": at or state.updated_at or NOW,
        "version": state.version,
    }


def plan_record(state: PlanState, **kwargs: Any) -> PlanRecord:
    """An in-memory `PlanRecord` (no session) for the pure functions."""
    return PlanRecord(**plan_values(state, **kwargs))


def job(
    *, id: int = 1, kind: str = "webhook", status: str = "queued", at: datetime = NOW, **changes: Any
) -> Job:
    """An in-memory `Job` row."""
    row = job_row(kind=kind, group_key=changes.pop("group_key", "octo-org/shop#12"), payload={}, now=at)
    row.update(status=status, **changes)
    return Job(id=id, **row)


def delivery(
    id: str, *, event: str = "issues", action: str | None = "labeled", at: datetime = NOW, **changes: Any
) -> Delivery:
    """An in-memory `Delivery` row."""
    values = {
        "event": event,
        "action": action,
        "target": "octo-org/shop#12",
        "outcome": "accepted",
        "received_at": at,
    }
    values.update(changes)
    return Delivery(id=id, **values)


def write_plan_sqlite(path: str, state: PlanState, *, at: datetime | None = None) -> None:
    """Upsert a plan row with the stdlib's sqlite3 (a test changing what a running server reads)."""
    import json

    values = plan_values(state, at=at)
    values["state"] = json.dumps(values["state"])
    values["updated_at"] = (
        values["updated_at"].astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
    )
    columns = ", ".join(values)
    marks = ", ".join(f":{k}" for k in values)
    with sqlite3.connect(path, timeout=30) as conn:
        conn.execute(f"INSERT OR REPLACE INTO plans ({columns}) VALUES ({marks})", values)  # noqa: S608
