"""The batch pull requests after review: merges, retargets, restacks and `rebase`.

- A merged batch PR counts (`merge_problem`) only when it is the PR the plan recorded, from
  this repository, merged at (or after) the recorded head, and only as *delivered* when it
  went into the plan's base branch (`bot.plan.stack`); merged into any other branch, it is
  said on the PR and on the issue and the plan keeps waiting. A delivered batch: the next
  batch's PR targets the base branch at once, the following batches are rebuilt when the
  merge rewrote history (squash, rebase), `stacking: sequential` starts the next batch, and
  the summary is posted when every batch is delivered.
- `pull_request.edited` with a new base (GitHub retargets a PR when the merged branch below
  it is deleted): the batch below is looked at, in case its `closed` delivery is not in yet.
- A push to the base branch, with `execution.auto_rebase`: open batch PRs that no longer
  merge cleanly are rebuilt on it, once per base commit.
- `/plan-cascade rebase` on the issue (every open batch) or on a batch PR (it and those above).
- Job `restack`, in the plan's job group: `bot.publishing.stack.StackKeeper` does the work.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import replace
from typing import Any

from bot.db.queue import ClaimedJob
from bot.errors import GitHubError
from bot.github.models import PullRequest
from bot.handlers.approval import start_execution
from bot.handlers.epic import child_moved, on_child_merged
from bot.handlers.execution import NoSave, build_run, still_wanted
from bot.handlers.plan_io import update_plan
from bot.handlers.session import Session, open_session, session_for_event, session_for_job
from bot.plan.stack import (
    all_delivered,
    expected_base,
    is_open,
    lowest_open,
    merge_problem,
    record_merge,
    stranded,
)
from bot.plan.state import PlanState, PlanStatus, transition, with_batch
from bot.publishing.stack import Reason, StackKeeper
from bot.rendering import messages
from bot.rendering import stack as say
from bot.rendering.pr_body import parse_batch_marker
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds
from bot.store.plans import LoadedPlan

router = Router()
kinds = JobKinds()
log = logging.getLogger(__name__)
RESTACK_JOB = "restack"
MERGEABLE_TRIES = 10
"""Reads of a PR's `mergeable` before `auto_rebase` gives up on that base commit (GitHub computes
it after the push): 30 s apart on the server (a delayed job), `MERGEABLE_WAIT` in the Action."""
MERGEABLE_WAIT = 6.0
_BATCH_BRANCH = re.compile(r"^plan-cascade/(\d+)/batch-(\d+)$")


def batch_of_pr(repo: str, head_ref: str, body: str | None) -> tuple[int, int] | None:
    """(issue, batch) of a batch PR, from its body marker or its head branch name."""
    marker = parse_batch_marker(body)
    if marker is not None and marker[0].lower() == repo.lower():
        return marker[1], marker[2]
    match = _BATCH_BRANCH.match(head_ref or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def base_branch(session: Session) -> str:
    """The branch the plan's work must reach (and its lowest PR targets)."""
    assert session.config is not None
    return session.config.execution.base_branch or session.default_branch


async def _plan_session(services: Services, event: Event, issue: int) -> tuple[Session, LoadedPlan] | None:
    session = await session_for_event(services, event, issue=issue)
    if await session.load_config() is None:
        return None
    loaded = await session.load_plan()
    return (session, loaded) if loaded is not None else None


@router.register("pull_request", "closed")
async def on_pull_request_closed(event: Event, services: Services) -> None:
    """A batch PR was merged: record where its work went, and what follows from that."""
    pr = event.envelope.pull_request
    if pr is None or event.repo is None or not pr.merged:
        return
    found = batch_of_pr(event.repo, pr.head.ref, pr.body)
    if found is None:
        return
    opened = await _plan_session(services, event, found[0])
    if opened is not None:
        await on_batch_merged(*opened, batch=found[1], number=pr.number)


@router.register("pull_request", "edited")
async def on_pull_request_edited(event: Event, services: Services) -> None:
    """A batch PR's base changed (GitHub retargets it when the branch below is deleted after a
    merge): the batch below is read from GitHub, in case its `closed` delivery is late or lost."""
    pr, changes = event.envelope.pull_request, event.payload.get("changes") or {}
    if pr is None or event.repo is None or "base" not in changes:
        return
    found = batch_of_pr(event.repo, pr.head.ref, pr.body)
    if found is None or found[1] < 2:
        return
    opened = await _plan_session(services, event, found[0])
    if opened is None or found[1] - 1 > len(opened[1].state.batches):
        return
    below = opened[1].state.batches[found[1] - 2]
    if below.pr_number is not None and not below.merged and below.merged_into is None:
        await on_batch_merged(*opened, batch=found[1] - 1, number=below.pr_number)


async def on_batch_merged(session: Session, loaded: LoadedPlan, *, batch: int, number: int) -> None:
    """Pull request `number`, merged, as GitHub has it now: batch `batch`'s merge or nothing."""
    if batch > len(loaded.state.batches):
        return
    record = loaded.state.batches[batch - 1]
    if record.pr_number != number or record.merged:
        return  # not the batch's PR (no request needed), or counted already
    try:
        pr = await session.port.get_pull_request(session.repo, number)
        commits: list[str] = []
        if pr.merged and pr.head_sha != record.head_sha:
            commits = [c.sha for c in await session.port.list_pull_request_commits(session.repo, number)]
    except GitHubError as exc:
        log.info("merged #%s not counted: GitHub could not confirm it (%s)", number, exc.message)
        return
    if record.merged_into is not None and record.merged_into == pr.base_ref:
        return  # said already (a redelivery)
    problem = merge_problem(session.repo, record, pr, commits)
    if problem is not None:
        log.info("merged #%s does not count as batch %s of #%s: %s", number, batch, session.issue, problem)
        return
    await _record(session, loaded, batch, pr)


async def _record(session: Session, loaded: LoadedPlan, batch: int, pr: PullRequest) -> None:
    services, base = session.services, base_branch(session)
    assert session.config is not None
    stacked = session.config.execution.stacking == "stacked"
    outcome = None
    waiting = announce = False

    def merged(state: PlanState) -> PlanState:
        nonlocal outcome, waiting, announce
        outcome = record_merge(
            state, batch, into=pr.base_ref, base_branch=base, head=pr.head_sha, stacked=stacked
        )
        state = outcome.state
        waiting = any(
            state.status == PlanStatus.PAUSED and (state.note or "").startswith(f"waiting for batch {n} ")
            for n in outcome.delivered
        )
        if waiting:
            state = transition(state, PlanStatus.RUNNING, at=services.clock(), note=f"batch {batch} merged")
        announce = state.status == PlanStatus.COMPLETED and all_delivered(state) and not state.summary_posted
        if announce:
            state = state.model_copy(update={"summary_posted": True})
        return state

    saved = await update_plan(session, loaded, merged)
    assert outcome is not None
    if outcome.elsewhere is not None:
        holder = outcome.waits_for
        holder_pr = saved.state.batches[holder - 1].pr_number if holder else None
        note = say.merged_elsewhere(
            batch=batch,
            pr=pr.number,
            into=outcome.elsewhere,
            base=base,
            waits_for=(holder, holder_pr) if holder else None,
        )
        await session.port.create_issue_comment(session.repo, pr.number, body=note)
        await session.reply(note)
        return
    for (
        number
    ) in outcome.retarget:  # at once, before any restack: the next PR must not merge into a dead branch
        await _retarget(session, saved.state, number, base=base, stacked=stacked)
    if waiting:
        await start_execution(session, saved)
    state = saved.state
    if stacked and lowest_open(state) is not None:
        await enqueue_restack(
            session, start=batch + 1, reason="merged", cause=f"after #{pr.number} was merged"
        )
    if all_delivered(state) and state.status == PlanStatus.COMPLETED:
        await on_child_merged(session)  # a child of an epic: the siblings that waited may start now
    else:
        await child_moved(session)
    if announce:
        opened = [b for b in state.batches if b.pr_number is not None]
        elapsed = (services.clock() - state.created_at).total_seconds() / 60 if state.created_at else 0
        await session.reply(
            messages.plan_completed(
                state,
                pull_requests=[(b.pr_number, b.pr_url or "") for b in opened if b.pr_number is not None],
                elapsed_minutes=elapsed,
            )
        )


async def _retarget(session: Session, state: PlanState, number: int, *, base: str, stacked: bool) -> None:
    record = state.batches[number - 1]
    if record.pr_number is None:
        return
    want = expected_base(state, number, base_branch=base, stacked=stacked)
    try:
        pr = await session.port.get_pull_request(session.repo, record.pr_number)
        if pr.state == "open" and pr.base_ref != want:
            await session.port.update_pull_request(session.repo, record.pr_number, base=want)
    except GitHubError as exc:  # the restack job retargets again
        log.warning("could not retarget #%s to %s: %s", record.pr_number, want, exc.message)


@router.register("push")
async def on_push(event: Event, services: Services) -> None:
    """The base branch moved: with `execution.auto_rebase`, check the batch PRs based on it."""
    data, repo = event.payload, event.envelope.repository
    if event.repo is None or repo is None or data.get("deleted"):
        return
    session = await open_session(
        services,
        repo=event.repo,
        issue=0,
        installation_id=event.installation_id,
        default_branch=repo.default_branch,
        clone_url=repo.clone_url,
    )
    config = await session.load_config()
    if config is None or not config.execution.auto_rebase:
        return
    base = base_branch(session)
    if data.get("ref") != f"refs/heads/{base}":
        return
    await auto_rebase_check(session, base=base, head=str(data.get("after") or ""))


async def auto_rebase_check(session: Session, *, base: str, head: str) -> None:
    """Queue a look at each open batch PR into `base` (its `mergeable` is computed by GitHub
    after the push, so the job reads it, and reads again later while it is unknown)."""
    try:
        prs = await session.port.list_pull_requests(session.repo, base=base)
    except GitHubError as exc:
        log.warning("auto_rebase: could not list the pull requests into %s: %s", base, exc.message)
        return
    for pr in prs:
        found = batch_of_pr(session.repo, pr.head_ref, pr.body)
        if found is None or pr.head_repo.lower() != session.repo.lower():
            continue
        at = replace(session, issue=found[0])
        await enqueue_restack(
            at, start=found[1], reason="auto", cause=f"after `{base}` moved", pr=pr.number, base_sha=head
        )


async def request_rebase(session: Session, *, batch: int | None, reply_on: int) -> None:
    """`/plan-cascade rebase`: the batch (or every open one) onto what it must sit on now."""
    loaded = await session.load_plan()
    if loaded is None:
        await session.port.create_issue_comment(
            session.repo, reply_on, body=messages.state_refusal("rebase", "this issue has no plan")
        )
        return
    state = loaded.state
    candidates = [n for n in (lowest_open(state), stranded(state)) if n is not None]
    start = batch if batch is not None else min(candidates, default=None)
    if start is None or start > len(state.batches) or not (is_open(state.batches[start - 1]) or candidates):
        why = "there is no open batch pull request to rebase"
        body = messages.state_refusal("rebase", why)
        await session.port.create_issue_comment(session.repo, reply_on, body=body)
        return
    await enqueue_restack(session, start=start, reason="rebase", cause="as asked", reply_to=reply_on)


async def enqueue_restack(session: Session, *, start: int, reason: Reason, cause: str, **extra: Any) -> None:
    """Queue the `restack` job in the plan's job group (after its execution and fixes)."""
    enqueue = session.services.enqueue
    if enqueue is None:
        log.warning("no job queue wired: the stack of %s#%s is not rebuilt", session.repo, session.issue)
        return
    payload = {
        "repo": session.repo,
        "issue": session.issue,
        "installation_id": session.installation_id,
        "start": start,
        "reason": reason,
        "cause": cause,
        **extra,
    }
    await enqueue(RESTACK_JOB, f"{session.repo}#{session.issue}/run", payload)


@kinds.register(RESTACK_JOB, holds_worker=True)
async def run_restack_job(job: ClaimedJob, services: Services) -> None:
    """Rebuild the plan's open batches from `start` up (see `StackKeeper.restack`)."""
    data = job.payload
    session = await session_for_job(services, job)
    if session is None:
        return
    loaded = await session.load_plan()
    if loaded is None or loaded.state.status == PlanStatus.CANCELLED:
        return
    start, reason = int(data["start"]), data["reason"]
    if reason == "auto":
        if not await _auto_wanted(session, loaded, job):
            return
        loaded = await update_plan(session, loaded, lambda s: _mark_rebased(s, start, data.get("base_sha")))
    keeper = await _keeper(session, loaded)
    await keeper.restack(start=start, reason=reason, cause=data.get("cause") or "")
    reply_to = data.get("reply_to")
    if reply_to:
        prs = [b.pr_number for b in keeper.run.state.batches if is_open(b) and b.pr_number]
        body = say.rebase_done(keeper.done) if keeper.done else say.up_to_date(prs, base_branch(session))
        await session.port.create_issue_comment(session.repo, int(reply_to), body=body)


async def _keeper(session: Session, loaded: LoadedPlan) -> StackKeeper:
    comment = await session.port.get_issue_comment(session.repo, loaded.comment_id)
    run = await build_run(session, loaded.state, loaded.comment_id, comment.html_url)
    current = loaded

    async def update(change: Any) -> PlanState:
        nonlocal current
        current = await update_plan(session, current, change)
        return current.state

    def wanted(number: int) -> Any:
        return still_wanted(session, loaded.state.plan_hash, fix_batch=number)

    scratch = replace(run, reporter=NoSave(run.reporter))
    return StackKeeper(
        port=session.port,
        repo=session.repo,
        run=scratch,
        update=update,
        plan_url=comment.html_url or "",
        wanted=wanted,
    )


async def _auto_wanted(session: Session, loaded: LoadedPlan, job: ClaimedJob) -> bool:
    """`auto_rebase`: only the open batch whose PR GitHub says no longer merges cleanly, once per
    base commit; while GitHub has not computed `mergeable` yet, the job looks again later."""
    data = job.payload
    start = int(data["start"])
    record = loaded.state.batches[start - 1] if start <= len(loaded.state.batches) else None
    if record is None or not is_open(record) or record.hands_off or record.pr_number != data.get("pr"):
        return False
    assert record.pr_number is not None
    if data.get("base_sha") and record.rebased_onto == data.get("base_sha"):
        return False
    queue = session.services.queue
    tries = int(data.get("tries", 0))
    while True:
        try:
            pr = await session.port.get_pull_request(session.repo, record.pr_number)
        except GitHubError as exc:
            log.warning("auto_rebase: could not read #%s: %s", record.pr_number, exc.message)
            return False
        tries += 1
        if pr.mergeable is not None or tries >= MERGEABLE_TRIES:
            return pr.mergeable is False
        if queue is not None:  # the server: look again later, leaving the worker to other jobs
            payload = {**data, "tries": tries}
            group = f"{job.group_key}/mergeable"
            await queue.enqueue(kind=RESTACK_JOB, group_key=group, payload=payload, delay_seconds=30)
            return False
        await asyncio.sleep(MERGEABLE_WAIT)  # the Action: this run is the only chance


def _mark_rebased(state: PlanState, batch: int, base_sha: str | None) -> PlanState:
    return with_batch(state, state.batches[batch - 1].model_copy(update={"rebased_onto": base_sha}))
