"""`check_run.rerequested`: a maintainer clicked "Re-run" on a gate's check run.

The gate's check run carries `<issue>:<scope>:<gate>:<attempt>` as its `external_id`, so
the bot finds the plan, checks out the very commit in a throwaway worktree, runs that one
gate again and reports it as a new check run with the same name.
"""

from __future__ import annotations

import asyncio
import logging
import re

from bot.db.queue import ClaimedJob
from bot.gates.run import run_gate
from bot.handlers.execution import build_run
from bot.handlers.session import session_for_event, session_for_job
from bot.orchestration.setup import SETUP_GATE, gate_confinement, prepare, report_setup, tool_env
from bot.orchestration.story import gate_specs
from bot.publishing.github import GitHubReporter
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds
from bot.sandbox.removal import discard
from bot.workspace.worktree import Worktree, add_worktree, remove_worktree

router = Router()
kinds = JobKinds()
log = logging.getLogger(__name__)
RERUN_JOB = "rerun_gate"
_EXTERNAL_ID = re.compile(r"^(\d+):([A-Za-z0-9-]+):([a-z0-9][a-z0-9_-]*):(\d+)$")


def parse_gate_external_id(value: str | None) -> tuple[int, str, str] | None:
    """(issue, scope, gate) of a gate check run, or None for anything else."""
    match = _EXTERNAL_ID.match(value or "")
    return (int(match.group(1)), match.group(2), match.group(3)) if match else None


@router.register("check_run", "rerequested")
async def on_check_run_rerequested(event: Event, services: Services) -> None:
    """Queue a re-run of the gate behind the check run (in the plan's execution group)."""
    check = event.envelope.check_run
    if check is None or event.repo is None:
        return
    parsed = parse_gate_external_id(check.external_id)
    if parsed is None or services.enqueue is None:
        return
    issue, scope, gate = parsed
    sender = event.envelope.sender
    session = await session_for_event(services, event, issue=issue)
    if await session.load_config() is None:
        return
    # A re-run starts the repository's code again: the same approval rule as `approve`.
    verdict = await session.may_start(sender.login, user_type=sender.type)
    if not verdict.allowed:
        await session.refuse(sender.login or "someone", verdict)
        return
    await services.enqueue(
        RERUN_JOB,
        f"{event.repo}#{issue}/run",
        {
            "repo": event.repo,
            "issue": issue,
            "scope": scope,
            "gate": gate,
            "head_sha": check.head_sha,
            "installation_id": event.installation_id,
        },
    )


@kinds.register(RERUN_JOB, holds_worker=True)
async def run_rerun_job(job: ClaimedJob, services: Services) -> None:
    """Run one gate again on the commit its check run was about."""
    data = job.payload
    session = await session_for_job(services, job)
    if session is None:
        return
    loaded = await session.load_plan()
    if loaded is None:
        return
    comment = await session.port.get_issue_comment(session.repo, loaded.comment_id)
    run = await build_run(session, loaded.state, loaded.comment_id, comment.html_url)
    scope, name, sha = data["scope"], data["gate"], data["head_sha"]
    ids = {s.id for s in loaded.state.prd.stories}
    story = loaded.state.prd.story(scope) if scope in ids else loaded.state.prd.stories[0]
    await run.mirror.fetch()  # clones a missing mirror
    branch = f"{run.branch_prefix}/rerun-{scope.lower()}-{name}"
    path = run.work_root / f"rerun-{scope.lower()}-{name}"
    home = run.work_root / f".home-rerun-{scope.lower()}"
    home.mkdir(parents=True, exist_ok=True)
    worktree = await add_worktree(run.mirror, branch=branch, base_ref=sha, path=path, reset=True)
    try:
        specs = await asyncio.to_thread(gate_specs, run, story, worktree.path)  # lists the worktree
        specs = [s for s in specs if s.name == name]
        if not specs and name != SETUP_GATE:
            log.info("gate %s is no longer configured: nothing to re-run", name)
            return
        setup = await prepare(run, worktree, home)  # the gate needs its environment first
        if setup is not None and (name == SETUP_GATE or not setup.passed):
            await report_setup(run, setup, scope=scope, head=sha)
            return
        if not specs:
            return
        spec = specs[0]
        handle = await run.reporter.gate_started(scope=scope, gate=spec, head_sha=sha, attempt=1)
        result, annotations = await run_gate(
            spec,
            cwd=worktree.path,
            env=tool_env(run, worktree, home),
            default_timeout=run.config.gates.timeout_seconds,
            attempt=1,
            confinement=await gate_confinement(run, worktree, home),
        )
        await run.reporter.gate_finished(
            handle, scope=scope, gate=spec, result=result, annotations=annotations, head_sha=sha
        )
    finally:
        if isinstance(run.reporter, GitHubReporter):  # a gate that raised or was cancelled
            stopped = "the re-run stopped before it finished"
            await run.reporter.close_open_runs(conclusion="neutral", reason=stopped)
        await remove_worktree(Worktree(path=path, branch=branch, mirror=run.mirror))
        await discard(home)
