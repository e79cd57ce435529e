"""Scheduled plans: `schedules:` in a repository's config open an issue on time and plan it.

- A repository's schedules are read into the `schedules` table (`bot.db.schedules`) by
  `bot.schedules.sync`; a run also re-reads the config, so a removed schedule never runs
  again.
- Every `PLAN_CASCADE_SCHEDULE_POLL_SECONDS` each process queues a look for due schedules, one job
  group for all (the queue runs one look at a time, across processes); the look fires what is
  due, each slot once, and queues its run.
- A run opens an issue (the App's: title with the date, the task, a marker naming the schedule
  and the slot) and queues its planning, as if a writer had labelled it. It never approves.
  When the last run's issue is still open and its plan not approved, it adds one line there
  instead: at most one open issue per schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime

from bot.config.repo import CONFIG_PATH, RepoConfig
from bot.config.schedules import Schedule
from bot.db import schedules as table
from bot.db.queue import ClaimedJob
from bot.errors import PlanCascadeError
from bot.handlers.planning import plan_issue
from bot.handlers.session import Session, open_session, session_for_job
from bot.plan.scheduled import ScheduledBy
from bot.plan.state import PlanStatus
from bot.redaction import redact
from bot.rendering.schedules import (
    issue_body,
    issue_title,
    parse_schedule_marker,
    skip_marker,
    skipped_line,
    superseded_line,
)
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds
from bot.schedules.sync import RESYNC_EVERY, RESYNC_PLANNED_EVERY, queue_syncs

kinds = JobKinds()
log = logging.getLogger(__name__)

LOOK_JOB = "schedule_look"
RUN_JOB = "schedule_run"
PLAN_JOB = "plan_scheduled"
LOOK_GROUP = "schedules"
WAITING = (PlanStatus.DRAFT, PlanStatus.AWAITING_APPROVAL)


@dataclass(frozen=True)
class Due:
    """One run of one schedule: the slot it was due, and the one after it."""

    repo: str
    name: str
    installation_id: int | None
    slot: datetime
    next_at: datetime | None


# ----- firing --------------------------------------------------------------------------------------
@kinds.register(LOOK_JOB)
async def run_look(job: ClaimedJob, services: Services) -> None:
    """Fire what is due: each slot's run queued once, each schedule's next time moved on."""
    assert services.db is not None
    fired = await table.fire_due(services.db, now=services.clock(), kind=RUN_JOB)
    for one in fired:
        log.info("schedule %s of %s due %s: run queued", one.name, one.repo, one.slot.isoformat())
    wake = services.extras.get("wake")
    if fired and wake is not None:
        wake.set()


@kinds.register(RUN_JOB)
async def run_due(job: ClaimedJob, services: Services) -> None:
    """One run of one schedule (the table's record of it, and the metric, beside it)."""
    data = job.payload
    due = Due(
        repo=data["repo"],
        name=data["name"],
        installation_id=data.get("installation_id"),
        slot=datetime.fromisoformat(data["slot"]),
        next_at=datetime.fromisoformat(data["next_at"]) if data.get("next_at") else None,
    )
    assert services.db is not None
    try:
        outcome, issue = await run_schedule(services, due)
    except Exception as exc:
        final = isinstance(exc, PlanCascadeError) and not exc.retryable
        if final or job.attempts >= job.max_attempts:  # the queue tries no more: say so on the page
            await _count(services, due, "failed", error=redact(str(exc))[:500])
        raise
    if outcome == "removed":
        await table.forget(services.db, repo=due.repo, name=due.name)
    elif outcome == "done":
        return
    elif outcome == "invalid":
        await _count(services, due, "failed", error=f"{CONFIG_PATH} is invalid: nothing was opened")
    else:
        await _count(services, due, outcome, issue=issue)


async def _count(
    services: Services, due: Due, outcome: str, *, issue: int | None = None, error: str | None = None
) -> None:
    assert services.db is not None
    await table.record(
        services.db,
        repo=due.repo,
        name=due.name,
        slot=due.slot,
        outcome=outcome,
        issue=issue,
        error=error,
        now=services.clock(),
    )
    if services.metrics is not None:
        services.metrics.schedule_runs.labels(outcome).inc()


async def run_schedule(services: Services, due: Due, *, stateless: bool = False) -> tuple[str, int | None]:
    """Open the run's issue and queue its planning, or add a line to the last run's issue that
    still waits. (outcome, issue): `opened`, `skipped`, `removed` (no longer in the config),
    `invalid` (the config cannot be read: reported, nothing opened), `done` (nothing to do: the
    schedule is disabled, or this slot's issue or line exists, as the Action's runs, which keep
    no table, see the same slot again).

    `stateless` (the Action): GitHub alone says whether the slot ran, its closed issues too."""
    session = await open_session(services, repo=due.repo, issue=0, installation_id=due.installation_id)
    config = await session.load_config()
    if config is None:
        assert session.config_error is not None
        log.warning(
            "schedule %s of %s not run: %s", due.name, due.repo, "; ".join(session.config_error.problems)
        )
        return "invalid", None
    schedule = next((s for s in config.schedules if s.name == due.name), None)
    if schedule is None:
        log.info("schedule %s of %s is no longer in %s: stopped", due.name, due.repo, CONFIG_PATH)
        return "removed", None
    if not schedule.enabled:
        log.info("schedule %s of %s is disabled: not run", due.name, due.repo)
        return "done", None
    runs = await _runs(session, config, due.name, state="all" if stateless else "open")
    slot = due.slot.isoformat()
    mine = next((issue for issue in runs if issue[1] == slot), None)  # an earlier attempt's (or run's)
    waiting = [n for n, s, is_open in runs if is_open and s != slot and await _still_waiting(session, n)]
    if mine is None and waiting and not schedule.close_older:
        if stateless and await _skipped_before(session, waiting[0], due):
            return "done", waiting[0]
        line = skipped_line(name=due.name, slot=due.slot, next_at=due.next_at, zone=schedule.timezone)
        await session.port.create_issue_comment(due.repo, waiting[0], body=line)
        log.info("schedule %s of %s: #%s still waits, run skipped", due.name, due.repo, waiting[0])
        return "skipped", waiting[0]
    number = mine[0] if mine is not None else await _open_issue(session, config, schedule, due)
    if schedule.close_older:
        for older in waiting:
            await session.port.create_issue_comment(due.repo, older, body=superseded_line(due.name, number))
            await session.port.close_issue(due.repo, older)
            log.info("schedule %s of %s: #%s closed for #%s", due.name, due.repo, older, number)
    if mine is None or mine[2]:
        await _queue_planning(services, due, schedule, number)
    return ("done" if stateless and mine is not None else "opened"), number


async def _runs(
    session: Session, config: RepoConfig, name: str, *, state: str
) -> list[tuple[int, str, bool]]:
    """(issue, slot, open) of this schedule's issues that the bot opened, newest first."""
    issues = await session.port.list_issues(session.repo, labels=[config.trigger_label], state=state)
    found = []
    for issue in issues:
        marker = parse_schedule_marker(issue.body)
        if marker is not None and marker[0] == name and issue.user_login == session.bot_login:
            found.append((issue.number, marker[1], issue.state == "open"))
    return found


async def _skipped_before(session: Session, number: int, due: Due) -> bool:
    """Whether the bot already added this slot's line to `number`."""
    marker = skip_marker(due.name, due.slot)
    comments = await session.port.list_issue_comments(session.repo, number)
    return any(c.user_login == session.bot_login and marker in (c.body or "") for c in comments)


async def _still_waiting(session: Session, number: int) -> bool:
    """Whether an open run's plan is not approved yet (or not made: planning failed, or waits)."""
    loaded = await session.store.load(session.port, session.repo, number, bot_login=session.bot_login)
    return loaded is None or loaded.state.status in WAITING


async def _open_issue(session: Session, config: RepoConfig, schedule: Schedule, due: Due) -> int:
    labels = list(dict.fromkeys([config.trigger_label, *schedule.labels]))
    issue = await session.port.create_issue(
        due.repo,
        title=issue_title(schedule.title, due.slot, schedule.timezone),
        body=issue_body(task=schedule.task, name=due.name, slot=due.slot, zone=schedule.timezone),
        labels=labels,
    )
    log.info("schedule %s of %s opened #%s", due.name, due.repo, issue.number)
    return issue.number


async def _queue_planning(services: Services, due: Due, schedule: Schedule, issue: int) -> None:
    assert services.enqueue is not None
    scheduled = ScheduledBy(name=due.name, slot=due.slot, next_at=due.next_at, timezone=schedule.timezone)
    payload = {
        "repo": due.repo,
        "issue": issue,
        "installation_id": due.installation_id,
        "scheduled": scheduled.model_dump(mode="json"),
    }
    await services.enqueue(PLAN_JOB, f"{due.repo}#{issue}", payload)


@kinds.register(PLAN_JOB)
async def run_plan(job: ClaimedJob, services: Services) -> None:
    """Plan a scheduled issue as if a writer had labelled it (its label was added by the bot, which
    sends no event we act on). Nothing approves it."""
    session = await session_for_job(services, job)
    if session is None:
        return
    if await session.load_plan() is not None:
        return  # planned already (a retried job)
    scheduled = ScheduledBy.model_validate(job.payload["scheduled"])
    await plan_issue(session, actor=f"schedule {scheduled.name}", text="", scheduled=scheduled)


# ----- the poll ------------------------------------------------------------------------------------
async def schedule_loop(services: Services, stop: asyncio.Event) -> None:
    """Queue a look for due schedules every `PLAN_CASCADE_SCHEDULE_POLL_SECONDS` (the queue runs
    one at a time, whichever process queued it), and the re-reads of `queue_syncs` every
    `RESYNC_EVERY` (at start and every `RESYNC_PLANNED_EVERY`: every repository it has planned in)."""
    queue, interval = services.queue, services.settings.schedule_poll_seconds
    if queue is None or services.db is None:
        return
    last_sync: datetime | None = None
    last_everywhere: datetime | None = None
    while not stop.is_set():
        try:
            await queue.enqueue(kind=LOOK_JOB, group_key=LOOK_GROUP, payload={}, unique=True)
            now = services.clock()
            if last_sync is None or now - last_sync >= RESYNC_EVERY:
                everywhere = last_everywhere is None or now - last_everywhere >= RESYNC_PLANNED_EVERY
                await queue_syncs(services, everywhere=everywhere)
                last_sync, last_everywhere = now, now if everywhere else last_everywhere
            wake = services.extras.get("wake")
            if wake is not None:
                wake.set()
        except Exception:
            log.exception("queueing the look for due schedules failed; trying again")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)
