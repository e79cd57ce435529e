"""An epic across repositories: checked when planned, its children opened once its plan is approved,
and stopped with it when it is cancelled.

Before approval the plan comment lists each target repository and the child it will open there,
and every problem that would stop it (not on the allowed list, the App not installed or without a
permission it needs, the target's config invalid): `epic_problems`, which refuses the approval.
The approval queues the plan's execute job like any plan's; for an epic across repositories that
job checks the targets again and opens the children, each in its repository through that
repository's installation, with the target's own trigger label, recorded one by one (a job redone
after a crash opens only the ones missing).
"""

from __future__ import annotations

import logging
from datetime import datetime

from bot.errors import GitHubError, NotInstalled
from bot.handlers.epic import (
    child_body,
    epic_children,
    parent_of,
    plan_of,
    queue_child_planning,
    refresh_rollup,
)
from bot.handlers.epic_repos import check_targets, session_in
from bot.handlers.plan_io import update_plan
from bot.handlers.session import Session
from bot.plan.epic import IssueRef, feature_order, feature_repository, parse_ref
from bot.plan.state import PlanState, PlanStatus, transition
from bot.store.plans import LoadedPlan

log = logging.getLogger(__name__)
WAITING_NOTE = "an epic across repositories: approve this plan to open its children there"
OPENED_NOTE = "an epic across repositories: each child is planned and approved in its own repository"
NOT_RUN = (PlanStatus.DRAFT, PlanStatus.AWAITING_APPROVAL, PlanStatus.APPROVED, PlanStatus.PAUSED)
"""A child in one of these has run nothing yet (or is stopped): a cancelled epic cancels it."""


async def check_epic(session: Session, loaded: LoadedPlan) -> LoadedPlan:
    """A newly planned epic across repositories: record what stops it (none: it may be approved)."""
    problems = await check_targets(session, loaded.state.prd)

    def checked(state: PlanState) -> PlanState | None:
        if state.plan_hash != loaded.state.plan_hash:
            return None  # revised meanwhile: that revision is checked on its own
        return state.model_copy(update={"epic_problems": problems, "note": WAITING_NOTE})

    return await update_plan(session, loaded, checked)


async def recheck_targets(
    session: Session, *, actor: str, association: str | None, user_type: str | None
) -> None:
    """Before an approval of an epic that could not open its children: look again (the App may
    have been installed meanwhile), for a person the approval rule allows only (no outsider makes
    the bot call GitHub). Its problems then say what is still in the way, or nothing."""
    loaded = await session.load_plan()
    if (
        loaded is None
        or not loaded.state.epic_problems
        or loaded.state.status != PlanStatus.AWAITING_APPROVAL
    ):
        return
    if not (await session.may_start(actor, association, user_type)).allowed:
        return
    problems = await check_targets(session, loaded.state.prd)
    if problems != loaded.state.epic_problems:

        def rechecked(state: PlanState) -> PlanState | None:
            same = state.plan_hash == loaded.state.plan_hash
            return state.model_copy(update={"epic_problems": problems}) if same else None

        await update_plan(session, loaded, rechecked)


async def open_children(session: Session, loaded: LoadedPlan) -> None:
    """The approved epic's children, each in its repository (the execute job of an epic across
    repositories). A problem found now is written to the plan and nothing more is opened."""
    state = loaded.state
    problems = await check_targets(session, state.prd)
    if problems:
        at = session.services.clock()

        def stopped(current: PlanState) -> PlanState:
            moved = transition(current, PlanStatus.AWAITING_APPROVAL, at=at, note=WAITING_NOTE)
            return moved.model_copy(update={"epic_problems": problems, "approved_scope": []})

        await update_plan(session, loaded, stopped)
        listed = "\n".join(f"- {p}" for p in problems)
        await session.reply(
            "This epic's children cannot be opened yet; nothing was opened:\n\n"
            f"{listed}\n\nFix these, then approve this plan again: the repositories are checked again first."
        )
        return
    assert session.config is not None
    by_id = {f.id: f for f in state.prd.features}
    saved, opened = loaded, 0
    for fid in feature_order(state.prd.features):
        if fid in saved.state.child_issues:
            continue
        feature = by_id[fid]
        repo = feature_repository(feature, session.repo)
        target = await session_in(session, repo, 0)
        config = await target.load_config()
        if config is None:
            await session.reply(
                f"{repo}'s .github/plan-cascade.yml turned invalid while this epic's children were "
                "opened: fix it there, then approve this plan again to open the rest."
            )
            return
        needs = [
            ref
            for d in feature.depends_on
            if (ref := parse_ref(saved.state.child_issues.get(d, ""), default_repo=session.repo)) is not None
        ]
        body = child_body(
            description=feature.description,
            parent=IssueRef(session.repo, session.issue),
            parent_title=state.prd.title,
            needs=needs,
            here=repo,
        )
        issue = await target.port.create_issue(
            repo, title=feature.title, body=body, labels=[config.trigger_label]
        )
        child = IssueRef(repo, issue.number)

        def recorded(current: PlanState, fid: str = fid, child: IssueRef = child) -> PlanState:
            return current.model_copy(
                update={"child_issues": {**current.child_issues, fid: str(child)}, "note": OPENED_NOTE}
            )

        saved = await update_plan(session, saved, recorded)
        opened += 1
        await queue_child_planning(session, child, target.installation_id)
    if not opened:
        return  # a job run again after every child was opened: said already
    listed = "\n".join(f"- {fid}: {ref}" for fid, ref in saved.state.child_issues.items())
    await session.reply(
        "This epic's children are open, each in its repository; each is planned there and approved "
        f"there by a person with write access to that repository:\n\n{listed}"
    )
    await refresh_rollup(session, session.issue)


async def cancel_children(session: Session, epic: PlanState, *, by: str) -> list[str]:
    """A cancelled epic stops its children that have not run: each is cancelled and says so. The
    children named, as seen from the epic, with what happened to each."""
    said: list[str] = []
    here = IssueRef(session.repo, session.issue)
    for child in epic_children(epic):
        try:
            there = await session_in(session, child.repo, child.number)
            loaded = await there.load_plan()
            if loaded is not None and loaded.state.status not in NOT_RUN:
                said.append(f"{child.shown_from(session.repo)}: {loaded.state.status.value}, left as it is")
                continue
            if loaded is not None:
                at = session.services.clock()
                note = f"the epic {here.shown_from(child.repo)} was cancelled by @{by}"

                def cancelled(state: PlanState, at: datetime = at, note: str = note) -> PlanState | None:
                    if state.status not in NOT_RUN:
                        return None
                    return transition(state, PlanStatus.CANCELLED, at=at, note=note)

                await update_plan(there, loaded, cancelled)
            await there.reply(
                f"The epic {here.shown_from(child.repo)} was cancelled by @{by}: this child will not run. "
                "Label the issue again to plan it on its own."
            )
            said.append(f"{child.shown_from(session.repo)}: cancelled")
        except (GitHubError, NotInstalled) as exc:
            log.warning("could not cancel %s with its epic: %s", child, exc)
            said.append(f"{child.shown_from(session.repo)}: could not be cancelled ({exc})")
    return said


async def epic_cancelled(session: Session, body: str | None) -> bool:
    """Whether this child's epic was cancelled (then it is not planned)."""
    found = await parent_of(session, body)
    return found is not None and found[1].status == PlanStatus.CANCELLED


__all__ = ["cancel_children", "check_epic", "epic_cancelled", "open_children", "plan_of"]
