"""The plan pull request (`plan_pr: true`): the PRD as a file maintainers can edit and approve.

The bot opens a draft PR from `plan-cascade/<issue>/plan` adding `.plan-cascade/<issue>/prd.yaml`.
An approving review by a permitted user reads the file at the reviewed commit, validates
it, makes it the current revision when it was edited, and records the approval for
exactly that revision.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re

from bot.errors import GitHubError, PlanValidationError, StateError
from bot.handlers.approval import record_approval
from bot.handlers.plan_io import update_plan
from bot.handlers.session import Session, open_session
from bot.plan import (
    PRD,
    changelog_lines,
    diff_prds,
    parse_prd,
    prd_to_yaml,
    revision_hash,
    vague_criteria,
)
from bot.plan.state import PlanState, revise
from bot.rendering import messages
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.store.permissions import is_bot
from bot.store.plans import LoadedPlan
from bot.workspace.worktree import add_worktree, commit_staged, remove_worktree, stage_all

router = Router()
log = logging.getLogger(__name__)
_PLAN_BRANCH = re.compile(r"^plan-cascade/(\d+)/plan$")


def plan_branch(issue: int) -> str:
    """`plan-cascade/<issue>/plan`."""
    return f"plan-cascade/{issue}/plan"


def prd_path(issue: int) -> str:
    """`.plan-cascade/<issue>/prd.yaml`."""
    return f".plan-cascade/{issue}/prd.yaml"


async def open_plan_pr(session: Session, loaded: LoadedPlan) -> None:
    """Commit the PRD to the plan branch and open (or update) the draft plan PR.

    The plan records the PR's number and the commit the bot pushed: only that PR, and
    only commits pushed on top of ours by people with write access, can approve a file.
    """
    assert session.config is not None and session.clone_url is not None
    state = loaded.state
    branch = plan_branch(session.issue)
    mirror = session.mirror()
    await mirror.fetch()
    remote = await mirror.remote_sha(branch)
    base = f"refs/remotes/origin/{branch}" if remote else f"refs/remotes/origin/{session.default_branch}"
    identity = await session.commit_identity()
    # Whose head it is, from what the bot pushed: an amend or a rebase keeps the bot's author.
    if remote is not None and remote != state.plan_pr_head and not mirror.pushed(branch, remote):
        log.info("the plan branch has a head Plan Cascade did not push (a person's edits): left as it is")
        return
    path = session.services.settings.data_dir.resolve() / "worktrees" / "plan" / str(session.issue)
    wt = await add_worktree(mirror, branch=branch, base_ref=base, path=path, reset=True)
    try:
        target = wt.path / prd_path(session.issue)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(prd_to_yaml(state.prd))
        await stage_all(wt)
        sha = await commit_staged(
            wt,
            message=f"Plan for #{session.issue}, revision {state.revision}",
            author_name=identity.name,
            author_email=identity.email,
            trailers={"Plan-Cascade-Plan": state.plan_hash},
        )
        pushed = sha or remote or await mirror.resolve(f"refs/heads/{branch}")
        if sha is not None or remote is None:
            pushed = await mirror.push(branch, expected_remote_sha=remote, force=remote is not None)
    finally:
        await remove_worktree(wt)
    title = f"[Plan Cascade] #{session.issue} plan, revision {state.revision}"
    body = (
        f"The plan for #{session.issue} as a file. Edit `{prd_path(session.issue)}` in this branch if you "
        "want changes, then **approve this pull request** to approve the plan as it is in the file. "
        "Nothing runs before that. This pull request is never merged by the bot."
    )
    pr = await session.port.find_pull_request(session.repo, branch, state="open")
    if pr is None:
        pr = await session.port.create_pull_request(
            session.repo, title=title, body=body, head=branch, base=session.default_branch, draft=True
        )
    else:
        await session.port.update_pull_request(session.repo, pr.number, title=title)
    if state.plan_pr != pr.number or state.plan_pr_head != pushed:
        await update_plan(session, loaded, functools.partial(_record_pr, number=pr.number, head=pushed))


def _record_pr(state: PlanState, *, number: int, head: str) -> PlanState:
    return state.model_copy(update={"plan_pr": number, "plan_pr_head": head})


@router.register("pull_request_review", "submitted")
async def on_plan_pr_review(event: Event, services: Services) -> None:
    """An approving review of the plan PR approves the PRD file at the reviewed commit.

    Only the plan PR recorded in the plan counts, with its head branch in this repository,
    the bot's commit still on it and every later commit by someone with write access; the
    reviewer must pass the approval rule. Anything else adopts nothing.
    """
    env = event.envelope
    review, pr = env.review, env.pull_request
    if review is None or pr is None or event.repo is None or review.state.lower() != "approved":
        return
    match = _PLAN_BRANCH.match(pr.head.ref)
    if match is None or is_bot(review.user.login, review.user.type):
        return
    head_repo = pr.head.repo.full_name if pr.head.repo else ""
    if head_repo.lower() != event.repo.lower():
        log.info("review of #%s ignored: its head is in %s, not this repository", pr.number, head_repo or "?")
        return
    issue = int(match.group(1))
    session = await open_session(
        services, repo=event.repo, issue=issue, installation_id=event.installation_id
    )
    if await session.load_config() is None:
        await session.report_config_error()
        return
    loaded = await session.load_plan()
    if loaded is None:
        return
    if loaded.state.plan_pr != pr.number:
        log.info("review of #%s ignored: the plan's pull request is #%s", pr.number, loaded.state.plan_pr)
        return
    verdict = await session.may_start(review.user.login, review.author_association, review.user.type)
    if not verdict.allowed:
        await session.refuse(review.user.login, verdict, on=pr.number)
        return
    sha = (event.payload.get("review") or {}).get("commit_id") or pr.head.sha
    problem = await _commits_problem(session, pr.number, loaded.state, reviewed=sha)
    if problem is not None:
        log.info("review of plan PR #%s by %s refused: %s", pr.number, review.user.login, problem)
        await _say(session, pr.number, f"This review approves nothing: {problem}.")
        return
    text = await session.port.get_file_text(event.repo, prd_path(issue), ref=sha)
    if text is None:
        await _say(
            session, pr.number, f"`{prd_path(issue)}` is missing from this branch: restore it to approve."
        )
        return
    assert session.config is not None
    try:
        prd = await asyncio.to_thread(
            parse_prd, text, max_stories=session.config.limits.max_stories, vague=False
        )
    except PlanValidationError as exc:
        await _say(session, pr.number, messages.prd_invalid(exc.problems, "plan-pr"))
        return
    await _approve_file(session, loaded, prd, approver=review.user.login)


async def _say(session: Session, pr_number: int, body: str) -> None:
    await session.port.create_issue_comment(session.repo, pr_number, body=body)


async def _commits_problem(
    session: Session, pr_number: int, state: PlanState, *, reviewed: str
) -> str | None:
    """Why the plan PR's history cannot be trusted up to the reviewed commit (None when it can)."""
    try:
        commits = await session.port.list_pull_request_commits(session.repo, pr_number)
    except GitHubError as exc:
        return f"GitHub could not list its commits ({exc.message})"
    shas = [c.sha for c in commits]
    if state.plan_pr_head is None or state.plan_pr_head not in shas:
        return "the commit Plan Cascade pushed is no longer on the branch"
    if reviewed not in shas:
        return f"the reviewed commit {reviewed[:12]} is not part of this pull request"
    later = commits[shas.index(state.plan_pr_head) + 1 : shas.index(reviewed) + 1]
    for commit in later:
        login = commit.author_login
        if not login:
            return f"commit {commit.sha[:12]} is not linked to a GitHub account"
        verdict = await session.may_act(login, user_type=commit.author_type)
        if not verdict.allowed:
            return f"commit {commit.sha[:12]} is by {login}, who may not change plans ({verdict.reason})"
    return None


async def _approve_file(session: Session, loaded: LoadedPlan, prd: PRD, *, approver: str) -> None:
    plan_hash = revision_hash(prd)
    if plan_hash != loaded.state.plan_hash:

        def adopted(state: PlanState) -> PlanState | None:
            if state.plan_hash == plan_hash:
                return None
            return revise(
                state,
                prd,
                at=session.services.clock(),
                changelog=changelog_lines(diff_prds(state.prd, prd)),
                source="plan-pr",
            ).model_copy(update={"warnings": vague_criteria(prd)})

        try:
            loaded = await update_plan(session, loaded, adopted)
        except StateError as exc:
            await session.reply(messages.state_refusal("approve", exc.message))
            return
    try:
        await record_approval(session, loaded, user=approver, via="review", scope=[], plan_hash=plan_hash)
    except StateError as exc:
        await session.reply(messages.state_refusal("approve", exc.message))
