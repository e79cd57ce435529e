"""At start-up, no check run of ours is left running that no live job owns.

A process killed mid-gate (a crash, a deploy, an OOM) leaves its gate's check run
`in_progress` forever: GitHub shows a spinner on the commit, and a branch protection that
requires the check never passes. When a process starts, it looks at the plans cached in
the database that ran lately, and on their story and batch branches completes each check
run of ours still queued or in progress (`neutral`, one line saying why), unless a job of
that plan is running right now in a live process: its holder is a live process of this host
(a sibling worker sharing the data dir, even one whose lease lapsed), or a process of another
host whose lease runs. A job whose holder is a dead process of this host counts as stopped
even while its lease runs: its check runs are what that process left.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from bot.db.leases import aware
from bot.db.models import Job, PlanRecord
from bot.errors import GitHubError
from bot.github.models import CheckRun
from bot.orchestration.scheduler import batch_branch, story_branch
from bot.plan.state import PlanState
from bot.plan.state import PlanStatus as S
from bot.procinfo import alive_here, on_this_host
from bot.runtime.services import Services

log = logging.getLogger(__name__)

RECENT = timedelta(days=3)
"""Plans changed this recently are looked at (older runs were swept by earlier starts)."""
SWEPT = {S.APPROVED, S.RUNNING, S.PAUSED, S.FAILED, S.CANCELLED, S.COMPLETED}
STALE_OUTPUT = {
    "title": "Stopped: the process running this gate ended",
    "summary": "The Plan Cascade process that ran this gate stopped before it finished (a restart or "
    "a crash). A resumed run reports the gate again in a new check run.",
}


def plan_refs(state: PlanState) -> list[str]:
    """The branches (and batch heads) a plan's check runs sit on."""
    prefix = f"plan-cascade/{state.issue}"
    refs = [s.branch or story_branch(prefix, sid) for sid, s in state.stories.items()]
    for k, batch in enumerate(state.batches, start=1):
        refs += [batch.branch or batch_branch(prefix, k)] + ([batch.head_sha] if batch.head_sha else [])
    return list(dict.fromkeys(refs))


def stale(runs: Sequence[CheckRun], *, slug: str | None, before: datetime) -> list[CheckRun]:
    """Our runs (by App, else by name) started before `before` and not completed."""
    ours = [
        r for r in runs if r.name.startswith("plan-cascade") and (slug is None or r.app_slug in (None, slug))
    ]
    return [r for r in ours if r.status != "completed" and (r.started_at is None or r.started_at < before)]


def plan_of(group_key: str) -> str:
    """`owner/repo#n` of a job group (`owner/repo#n`, `owner/repo#n/run`, `…/ci-timer`)."""
    found = re.match(r"^(.+?#\d+)", group_key)
    return found.group(1) if found else group_key


def held(job: Job, *, now: datetime) -> bool:
    """Whether a live process runs the (running) job: on this host its holder's process tells,
    elsewhere its lease."""
    if on_this_host(job.locked_by):
        return alive_here(job.locked_by)
    return job.lease_until is not None and aware(job.lease_until) > now


async def plans_to_sweep(services: Services) -> list[tuple[PlanRecord, PlanState]]:
    """Recently changed plans with no job running in a live process."""
    assert services.db is not None
    now = services.clock()
    async with services.db.read() as db:
        records = (
            await db.execute(select(PlanRecord).where(PlanRecord.updated_at >= now - RECENT))
        ).scalars()
        live = {
            plan_of(job.group_key)
            for job in (await db.execute(select(Job).where(Job.status == "running"))).scalars()
            if held(job, now=now)
        }
    chosen = []
    for record in records:
        if record.status not in SWEPT or f"{record.repo}#{record.issue_number}" in live:
            continue
        try:
            chosen.append((record, PlanState.model_validate(record.state)))
        except ValueError:
            log.warning("cached plan %s#%s does not load: not swept", record.repo, record.issue_number)
    return chosen


async def sweep_stale_checks(services: Services, *, before: datetime) -> int:
    """Complete our stale check runs on recent plans (started before `before`, when this process
    started: a job it resumes meanwhile makes new ones); how many were completed."""
    if services.db is None or services.github_for is None:
        return 0
    closed = 0
    for record, state in await plans_to_sweep(services):
        try:
            port: Any = await services.github_for(record.installation_id, record.repo)
            slug = await port.get_app_slug()
            for ref in plan_refs(state):
                runs = await port.list_check_runs_for_ref(record.repo, ref)
                for run in stale(runs, slug=slug, before=before):
                    await port.update_check_run(
                        record.repo, run.id, conclusion="neutral", output=STALE_OUTPUT
                    )
                    log.info("completed stale check run %s (%s) on %s", run.id, run.name, ref)
                    closed += 1
        except GitHubError as exc:
            log.warning(
                "could not sweep the check runs of %s#%s: %s", record.repo, record.issue_number, exc.message
            )
    return closed


async def stale_check_sweeper(services: Services, stop: asyncio.Event) -> None:
    """Once, at start-up."""
    try:
        closed = await sweep_stale_checks(services, before=services.clock() - timedelta(seconds=1))
    except Exception:
        log.exception("sweeping stale check runs failed")
        return
    if closed:
        log.info("completed %d check runs left running by a process that stopped", closed)
