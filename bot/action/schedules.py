"""The Action's schedules: on `schedule` and `workflow_dispatch`, run the repository's due
schedules with the server's code (`bot.schedules.runs.run_schedule`: an issue, its plan, never
an approval).

The Action keeps no table: a schedule is due when its latest slot is at most `LOOK_BACK` old and
GitHub holds neither that slot's issue (open or closed) nor its "still waiting" line. The
workflow's own cron (the template's: every 10 minutes) decides how soon after its slot a run
opens; GitHub's scheduled workflows can be late at busy times, which `LOOK_BACK` covers.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from bot.action.services import InlineJobs
from bot.config.schedules import Resolved, resolve
from bot.handlers.session import open_session
from bot.runtime.services import Services
from bot.schedules.runs import Due, run_schedule

log = logging.getLogger(__name__)
LOOK_BACK = timedelta(hours=1)
"""How late after its slot a workflow run still fires a schedule (a later one waits for the next slot)."""


def latest_slot(resolved: Resolved, now: datetime, *, look_back: timedelta = LOOK_BACK) -> datetime | None:
    """The last time the schedule was due at or before `now`, if it is within `look_back`."""
    at = resolved.next_after(now - look_back)
    if at > now:
        return None
    while (later := resolved.next_after(at)) <= now:
        at = later
    return at


async def run_due_schedules(services: Services, jobs: InlineJobs, *, repo: str, delivery_id: str) -> set[int]:
    """Run every schedule of `repo` that is due now; the issues they opened or added a line to."""
    session = await open_session(services, repo=repo, issue=0, installation_id=None)
    config = await session.load_config()
    if config is None:
        problems = session.config_error.problems if session.config_error else []
        log.warning("schedules not run: the config is invalid: %s", "; ".join(problems))
        return set()
    now, touched = services.clock(), set()
    for schedule in config.schedules:
        if not schedule.enabled:
            continue
        resolved = resolve(repo, schedule)
        slot = latest_slot(resolved, now)
        if slot is None:
            continue
        due = Due(
            repo=repo, name=schedule.name, installation_id=None, slot=slot, next_at=resolved.next_after(now)
        )
        outcome, issue = await run_schedule(services, due, stateless=True)
        log.info(
            "schedule %s due %s: %s%s",
            schedule.name,
            slot.isoformat(),
            outcome,
            f" #{issue}" if issue else "",
        )
        await jobs.drain(delivery_id=delivery_id)
        if issue is not None:
            touched.add(issue)
    return touched
