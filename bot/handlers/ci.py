"""The repository's own CI on batch pull requests: watched, re-run when flaky, fixed when broken.

What drives the loop is this repository's own CI for the batch branch, nothing else: a fork's
pull request can have exactly the batch's public head commit, and its runs (no secrets, so they
fail) and whatever they print would otherwise reach the agent. `workflow_run.completed` of a
run whose commit came from this repository (`head_repository`), started by a push or a pull
request (`event`) on a batch branch; `check_suite.completed` of another App (GitHub Actions'
suites come as workflow runs) for a batch branch that a pull request of this repository has as
its head; and `status` events on a batch branch queue one `ci_watch` job for the plan. The job
reads the head's checks itself: GitHub Actions' only as jobs of this repository's own runs for
the batch branch and head (found through the Actions API, never through a check's
`details_url`, which a workflow can set), other Apps' check runs and commit statuses as they are.

When they are done and some failed: an infrastructure failure re-runs the workflow's failed
jobs once; a code failure goes to the agent on the batch branch (the `ci` phase) with what the
checks printed, sanitised and fenced as untrusted data, and the stories it concerns, at most
`ci.max_fix_attempts` times within the plan's budget; then the PR becomes a draft with the
reason. One sticky comment on the PR says it all. A push by someone else, a review requesting
changes or a cancelled plan stops the loop.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from typing import Any

from bot.db.queue import ClaimedJob
from bot.errors import GitHubError
from bot.gates.ci import (
    ACTIONS_APP,
    CI_MARKER,
    TRUSTED_EVENTS,
    CICheck,
    check_text,
    ci_comment,
    classify,
    counted,
    fix_feedback,
    log_tail,
    stories_named,
    trusted_run,
)
from bot.github.models_actions import WorkflowJob
from bot.handlers.plan_io import update_plan
from bot.handlers.review_fix import apply_review_fix
from bot.handlers.session import Session, session_for_job
from bot.orchestration.scheduler import batch_branch
from bot.plan.state import BatchState, PlanState, PlanStatus, totals, with_batch
from bot.publishing.rollup import write_rollup
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds
from bot.store.plans import LoadedPlan, same_login

router = Router()
kinds = JobKinds()
log = logging.getLogger(__name__)
CI_JOB = "ci_watch"
_BRANCH = re.compile(r"^plan-cascade/(\d+)/batch-(\d+)$")


async def _queue(event: Event, services: Services, branches: list[str], sha: str) -> None:
    if event.repo is None or services.enqueue is None or not sha:
        return
    for branch in branches:
        match = _BRANCH.match(branch or "")
        if match:
            issue, batch = int(match.group(1)), int(match.group(2))
            payload = {"repo": event.repo, "issue": issue, "batch": batch, "head_sha": sha}
            payload["installation_id"] = event.installation_id
            await services.enqueue(CI_JOB, f"{event.repo}#{issue}/run", payload)


def _heads_a_pull_request_here(pulls: Any, branch: str) -> bool:
    """Whether a pull request of this repository has `branch` as its head (forks' are never
    listed in a suite's or run's `pull_requests`)."""
    for pr in pulls if isinstance(pulls, list) else []:
        head, base = (pr or {}).get("head") or {}, (pr or {}).get("base") or {}
        head_repo, base_repo = (head.get("repo") or {}).get("id"), (base.get("repo") or {}).get("id")
        if head.get("ref") == branch and head_repo is not None and head_repo == base_repo:
            return True
    return False


@router.register("check_suite", "completed")
async def on_check_suite_completed(event: Event, services: Services) -> None:
    """Another App's checks finished on a batch branch (ours are gates, already handled;
    GitHub Actions' arrive as `workflow_run`, which says where the commit came from)."""
    suite = event.payload.get("check_suite") or {}
    app = (suite.get("app") or {}).get("slug")
    ours = services.bot_login.removesuffix("[bot]") if services.bot_login else None
    if (ours is not None and app == ours) or app == ACTIONS_APP:
        return
    branch = suite.get("head_branch") or ""
    if not _heads_a_pull_request_here(suite.get("pull_requests"), branch):
        return
    await _queue(event, services, [branch], suite.get("head_sha") or "")


@router.register("workflow_run", "completed")
async def on_workflow_run_completed(event: Event, services: Services) -> None:
    """A run of this repository's own workflows finished on a batch branch."""
    run = event.payload.get("workflow_run") or {}
    head_repo = (run.get("head_repository") or {}).get("full_name") or ""
    if event.repo is None or head_repo.lower() != event.repo.lower():
        log.info("workflow run %s ignored: its commit came from %s", run.get("id"), head_repo or "?")
        return
    if run.get("event") not in TRUSTED_EVENTS:
        return
    await _queue(event, services, [run.get("head_branch") or ""], run.get("head_sha") or "")


@router.register("status")
async def on_status(event: Event, services: Services) -> None:
    """A legacy commit status changed on a commit of a batch branch (the job reads it as data)."""
    if event.payload.get("state") == "pending":
        return
    branches = [b.get("name") or "" for b in event.payload.get("branches") or []]
    await _queue(event, services, branches, event.payload.get("sha") or "")


@kinds.register(CI_JOB, holds_worker=True)
async def run_ci_job(job: ClaimedJob, services: Services) -> None:
    """Judge the CI of one batch head and act on it."""
    data = job.payload
    session = await session_for_job(services, job)
    if session is None or session.config is None or not session.config.ci.watch:
        return
    loaded = await session.load_plan()
    batch = int(data["batch"])
    if loaded is None or batch > len(loaded.state.batches):
        return
    record = loaded.state.batches[batch - 1]
    if record.pr_number is None or record.head_sha != data["head_sha"] or record.merged:
        return  # not published, an older head's result, or done
    if loaded.state.status == PlanStatus.CANCELLED:
        return await _stop(session, loaded, batch, [], "the plan was cancelled")
    if record.hands_off or record.ci_stopped:
        return
    pr = await session.port.get_pull_request(session.repo, record.pr_number)
    if pr.state != "open":
        return
    if pr.head_sha != record.head_sha:
        return await _stop(session, loaded, batch, [], "someone else pushed to the branch")
    try:
        checks = await _checks(session, record)
    except GitHubError as exc:  # the App lacks Checks or Actions: read, most likely: say so, once
        why = f"cannot read the checks ({exc.message}); the App needs Checks: read and Actions: read"
        return await _stop(session, loaded, batch, [], why)
    if not checks:
        return
    pending = [c for c in checks if c.pending]
    if pending:
        minutes = session.config.ci.pending_minutes
        if data.get("timer"):
            names = ", ".join(f"`{c.name}`" for c in pending)
            note = f"{names} still pending after {minutes} minutes: reported, not waited on in silence"
            change = functools.partial(_record, batch=batch, action=note)
            loaded = await update_plan(session, loaded, change)
            return await _say(session, loaded, batch, checks, f"Still pending after {minutes} minutes.")
        if record.ci_timer != record.head_sha and services.queue is not None:
            payload = {**data, "timer": True}
            # Its own group: a delayed job would hold up the plan's other jobs behind it.
            await services.queue.enqueue(
                kind=CI_JOB,
                group_key=f"{job.group_key}/ci-timer",
                payload=payload,
                delay_seconds=minutes * 60,
            )
            loaded = await update_plan(session, loaded, functools.partial(_timer, batch=batch))
        return await _say(session, loaded, batch, checks, "Waiting for the checks still running.")
    if data.get("timer"):
        return  # the checks finished: their own events act on them, in the plan's group
    failed = [c for c in checks if c.failed]
    if not failed:
        return await _say(session, loaded, batch, checks, "CI passed.")
    await _on_failure(session, loaded, batch, checks, failed)


async def _checks(session: Session, record: BatchState) -> list[CICheck]:
    """The head's checks that count: jobs of this repository's own workflow runs for the batch
    branch, other Apps' check runs and commit statuses; their text sanitised."""
    head = record.head_sha or ""
    jobs = await _own_jobs(session, record)
    found: list[CICheck] = []
    runs = await session.port.list_check_runs_for_ref(session.repo, head)
    ours = session.app_slug
    for r in sorted(runs, key=lambda r: r.id):
        if r.app_slug is None or (ours is not None and r.app_slug == ours):
            continue
        run_id = job_id = None
        if r.app_slug == ACTIONS_APP:
            job = jobs.get(r.id)
            if job is None:  # a fork's run on the same commit, another branch's, or a workflow's own check
                continue
            run_id, job_id = job.run_id, job.id
        state = r.conclusion if r.status == "completed" and r.conclusion else r.status
        found.append(
            CICheck(check_text(r.name), state, "check_run", run_id, job_id, check_text(r.title, r.summary))
        )
    try:
        for s in await session.port.list_commit_statuses(session.repo, head):
            found.append(CICheck(check_text(s.context), s.state, "status", text=check_text(s.description)))
    except GitHubError as exc:  # Commit statuses: read is missing: go on with the check runs
        log.warning("could not read commit statuses: %s", exc.message)
    assert session.config is not None
    return counted(found, session.config.ci.checks)


async def _own_jobs(session: Session, record: BatchState) -> dict[int, WorkflowJob]:
    """Check run id → job, for the jobs of this repository's own runs for the batch branch and head."""
    branch = record.branch or batch_branch(f"plan-cascade/{session.issue}", record.number)
    head = record.head_sha or ""
    jobs: dict[int, WorkflowJob] = {}
    for run in await session.port.list_workflow_runs(session.repo, head_sha=head, branch=branch):
        if trusted_run(run, repo=session.repo, branch=branch, head=head):
            for job in await session.port.list_run_jobs(session.repo, run.id):
                jobs[job.check_run_id] = job
    return jobs


async def _on_failure(
    session: Session, loaded: LoadedPlan, batch: int, checks: list[CICheck], failed: list[CICheck]
) -> None:
    assert session.config is not None
    record = loaded.state.batches[batch - 1]
    judged: list[tuple[CICheck, str, str, str]] = []  # check, kind, why, log tail
    for check in failed:
        log_text = ""
        if check.job_id is not None:
            try:
                log_text = await session.port.job_log(session.repo, check.job_id)
            except GitHubError as exc:
                log.warning("could not read the log of %s: %s", check.name, exc.message)
        kind, why = classify(check, log_text)
        judged.append((check, kind, why, log_tail(log_text) if log_text else ""))
    code = [j for j in judged if j[1] == "code"]
    if not code:
        runs = sorted({c.run_id for c, *_ in judged if c.run_id is not None} - set(record.ci_reruns))
        if not runs:
            return await _give_up(
                session, loaded, batch, checks, "the infrastructure failure came back after a re-run"
            )
        for run_id in runs:
            try:
                await session.port.rerun_failed_jobs(session.repo, run_id)
            except GitHubError as exc:
                why = f"could not re-run run {run_id} ({exc.message}); it needs Actions: read and write"
                return await _give_up(session, loaded, batch, checks, why)
        whys = ", ".join(sorted({why for _, _, why, _ in judged}))
        note = f"re-ran the failed jobs of workflow run {', '.join(map(str, runs))} ({whys})"
        change = functools.partial(_record, batch=batch, action=note, reruns=runs)
        loaded = await update_plan(session, loaded, change)
        return await _say(
            session, loaded, batch, checks, "Re-running failed jobs: an infrastructure failure."
        )
    limit = session.config.ci.max_fix_attempts
    names = ", ".join(f"`{c.name}`" for c, *_ in code)
    if record.ci_fixes >= limit:
        return await _give_up(
            session, loaded, batch, checks, f"{names} still fail after {limit} fix attempt(s)"
        )
    _, cost = totals(loaded.state)
    if cost > session.config.limits.max_cost_usd:
        return await _give_up(session, loaded, batch, checks, "the plan's budget is spent")
    ids = loaded.state.batches_ids()[batch - 1]
    text = "\n".join(f"{c.text}\n{tail}" for c, _, _, tail in code)
    concerned = stories_named(loaded.state.prd, ids, text)
    feedback, output = fix_feedback(loaded.state.prd, concerned, [(c, tail) for c, _, _, tail in code])
    files = [f for sid in concerned for f in loaded.state.prd.story(sid).files]
    loaded = await update_plan(session, loaded, functools.partial(_record, batch=batch, fixes=1))
    head, said = await apply_review_fix(
        session,
        batch=batch,
        pr_number=record.pr_number or 0,
        feedback=feedback,
        review_id=None,
        announce=False,
        files=files,
        ci_output=output,
        ci_loop=True,
    )
    fresh = await session.load_plan() or loaded
    action = f"sent {names} ({', '.join(concerned)}) to the agent: {said}"
    fresh = await update_plan(session, fresh, functools.partial(_record, batch=batch, action=action))
    if head is None:
        return await _give_up(session, fresh, batch, checks, f"the agent could not fix {names}: {said}")
    await _say(session, fresh, batch, checks, f"Fixed in {head[:12]}; CI runs again on it.")


def _timer(state: PlanState, *, batch: int) -> PlanState:
    record = state.batches[batch - 1]
    return with_batch(state, record.model_copy(update={"ci_timer": record.head_sha}))


def _record(
    state: PlanState,
    *,
    batch: int,
    action: str | None = None,
    reruns: list[int] | None = None,
    fixes: int = 0,
    stopped: str | None = None,
    comment: int | None = None,
) -> PlanState:
    record = state.batches[batch - 1]
    update: dict[str, object] = {"ci_fixes": record.ci_fixes + fixes}
    if action:
        update["ci_actions"] = [*record.ci_actions, action][-20:]
    if reruns:
        update["ci_reruns"] = [*record.ci_reruns, *reruns]
    if stopped:
        update["ci_stopped"] = stopped
    if comment is not None:
        update["ci_comment"] = comment
    return with_batch(state, record.model_copy(update=update))


async def _give_up(session: Session, loaded: LoadedPlan, batch: int, checks: list[CICheck], why: str) -> None:
    """The PR becomes a draft with the reason, and the roll-up check says CI failed."""
    record = loaded.state.batches[batch - 1]
    pr = await session.port.get_pull_request(session.repo, record.pr_number or 0)
    note = f"gave up: {why}; the pull request is a draft until someone looks"
    if not pr.draft:
        try:
            await session.port.convert_to_draft(session.repo, pr.node_id)
        except GitHubError as exc:
            note = f"gave up: {why} (could not make the PR a draft: {exc.message})"
    await _rollup_failed(session, record, why)
    loaded = await update_plan(
        session, loaded, functools.partial(_record, batch=batch, action=note, stopped=why)
    )
    await _say(session, loaded, batch, checks, f"CI failed: {why}.")


async def _rollup_failed(session: Session, record: BatchState, why: str) -> None:
    output = {"title": f"Batch {record.number}: CI failed", "summary": why}
    await write_rollup(
        session.port,
        session.repo,
        head=record.head_sha or "",
        batch=record.number,
        conclusion="failure",
        output=output,
    )


async def _stop(session: Session, loaded: LoadedPlan, batch: int, checks: list[CICheck], why: str) -> None:
    if loaded.state.batches[batch - 1].ci_stopped:
        return
    change = functools.partial(_record, batch=batch, action=f"stopped: {why}", stopped=why)
    loaded = await update_plan(session, loaded, change)
    await _say(session, loaded, batch, checks, f"Stopped watching CI: {why}.")


async def _say(session: Session, loaded: LoadedPlan, batch: int, checks: list[CICheck], note: str) -> None:
    """Write the one CI comment of the PR (created once, then edited)."""
    record = loaded.state.batches[batch - 1]
    body = ci_comment(batch, record.head_sha or "", checks, record.ci_actions, note=note)
    marker = CI_MARKER.format(batch=batch)
    comment_id = record.ci_comment
    if comment_id is None:
        for c in await session.port.list_issue_comments(session.repo, record.pr_number or 0):
            if c.body.rstrip().endswith(marker) and same_login(c.user_login, session.bot_login):
                comment_id = c.id
    if comment_id is not None:
        await session.port.update_issue_comment(session.repo, comment_id, body=body)
        return
    created = await session.port.create_issue_comment(session.repo, record.pr_number or 0, body=body)
    change: Callable[[PlanState], PlanState] = functools.partial(_record, batch=batch, comment=created.id)
    await update_plan(session, loaded, change)
