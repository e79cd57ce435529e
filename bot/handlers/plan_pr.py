"""The plan pull request (`plan_pr: true`): the PRD as a file maintainers can edit and approve.

The bot opens a draft PR from `plan-cascade/<issue>/plan` adding `.plan-cascade/<issue>/prd.yaml`.
An approving review by a permitted user reads the file at the reviewed commit, validates
it, makes it the current revision when it was edited, and records the approval for
exactly that revision.
"""

from __future__ import annotations

import logging
import re

from bot.errors import PlanValidationError, StateError
from bot.handlers.session import Session, open_session
from bot.permissions import is_bot
from bot.plan import changelog_lines, diff_prds, parse_prd, prd_to_yaml, revision_hash
from bot.plans import LoadedPlan
from bot.rendering import messages
from bot.routing import Event, Router
from bot.services import Services
from bot.state import revise
from bot.workspace.mirror import Mirror
from bot.workspace.worktree import add_worktree, commit_all, remove_worktree

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
    """Commit the PRD to the plan branch and open (or update) the draft plan PR."""
    from bot.handlers.planning import save_plan

    assert session.config is not None and session.clone_url is not None
    state = loaded.state
    branch = plan_branch(session.issue)
    mirror = Mirror(
        root=session.services.settings.data_dir.resolve(),
        clone_url=session.clone_url,
        token_provider=session.port.git_token,
    )
    await mirror.ensure()
    await mirror.fetch()
    remote = await mirror.remote_sha(branch)
    base = f"refs/remotes/origin/{branch}" if remote else f"refs/remotes/origin/{session.default_branch}"
    if remote is not None:
        author = (await mirror.git("log", "-1", "--format=%ae", remote)).stdout.strip()
        if author.lower() != session.config.agent.author_email.lower():
            log.info("the plan branch has a maintainer's edits: left as it is")
            return
    path = session.services.settings.data_dir.resolve() / "worktrees" / "plan" / str(session.issue)
    wt = await add_worktree(mirror, branch=branch, base_ref=base, path=path, reset=True)
    try:
        target = wt.path / prd_path(session.issue)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(prd_to_yaml(state.prd))
        sha = await commit_all(
            wt,
            message=f"Plan for #{session.issue}, revision {state.revision}",
            author_name=session.config.agent.author_name,
            author_email=session.config.agent.author_email,
            trailers={"Plan-Cascade-Plan": state.plan_hash},
        )
        if sha is not None or remote is None:
            await mirror.push(branch, expected_remote_sha=remote, force=remote is not None)
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
    if state.plan_pr != pr.number:
        await save_plan(
            session, state.model_copy(update={"plan_pr": pr.number}), comment_id=loaded.comment_id
        )


@router.register("pull_request_review", "submitted")
async def on_plan_pr_review(event: Event, services: Services) -> None:
    """An approving review of the plan PR approves the PRD file at the reviewed commit."""
    env = event.envelope
    review, pr = env.review, env.pull_request
    if review is None or pr is None or event.repo is None or review.state.lower() != "approved":
        return
    match = _PLAN_BRANCH.match(pr.head.ref)
    if match is None or is_bot(review.user.login, review.user.type):
        return
    issue = int(match.group(1))
    session = await open_session(
        services, repo=event.repo, issue=issue, installation_id=event.installation_id
    )
    if await session.load_config() is None:
        await session.report_config_error()
        return
    verdict = await session.may_approve(review.user.login, review.author_association)
    if not verdict.allowed:
        await session.port.create_issue_comment(
            event.repo,
            pr.number,
            body=messages.permission_denied(
                review.user.login,
                verdict.permission,
                approvers=list(session.config.approvers) if session.config else [],
            ),
        )
        return
    loaded = await session.load_plan()
    if loaded is None:
        return
    sha = (event.payload.get("review") or {}).get("commit_id") or pr.head.sha
    text = await session.port.get_file_text(event.repo, prd_path(issue), ref=sha)
    if text is None:
        await session.port.create_issue_comment(
            event.repo,
            pr.number,
            body=f"`{prd_path(issue)}` is missing from this branch: restore it to approve.",
        )
        return
    assert session.config is not None
    try:
        prd = parse_prd(text, max_stories=session.config.limits.max_stories)
    except PlanValidationError as exc:
        await session.port.create_issue_comment(
            event.repo, pr.number, body=messages.prd_invalid(exc.problems, "plan-pr")
        )
        return
    await _approve_file(session, loaded, prd, approver=review.user.login)


async def _approve_file(session: Session, loaded: LoadedPlan, prd, *, approver: str) -> None:  # type: ignore[no-untyped-def]
    from bot.handlers.approval import record_approval
    from bot.handlers.planning import save_plan

    state = loaded.state
    if revision_hash(prd) != state.plan_hash:
        try:
            state = revise(
                state,
                prd,
                at=session.services.clock(),
                changelog=changelog_lines(diff_prds(state.prd, prd)),
                source="plan-pr",
            )
        except StateError as exc:
            await session.reply(messages.state_refusal("approve", exc.message))
            return
        loaded = await save_plan(session, state, comment_id=loaded.comment_id)
    try:
        await record_approval(session, loaded, user=approver, via="review", scope=[])
    except StateError as exc:
        await session.reply(messages.state_refusal("approve", exc.message))
