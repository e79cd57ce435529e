"""Mega plans: each feature of an epic becomes a child issue, planned on its own and run in
dependency order, in the repository the feature names.

The child issues carry a hidden marker naming their parent and the child issues they wait
for. A child runs only once those are *merged* (their plans completed and every batch pull
request merged into their own repositories' default branches), so it branches from a default
branch that holds their code; a child approved earlier starts by itself when the last of them is
merged. A child is planned with the epic's context (the epic's summary, and the summaries of its
completed siblings). The epic issue keeps one roll-up comment. The epic itself is never executed.

An epic within one repository opens its children as soon as it is planned (each child is
approved on its own). An epic whose features name other repositories is approved first, by a
writer of its own repository; only then are its children opened, each in its repository through
that repository's installation, and each approved there by that repository's writers
(`bot.handlers.epic_children`).
"""

from __future__ import annotations

import logging
import re

from bot.errors import GitHubError, NotInstalled
from bot.handlers.approval import start_execution
from bot.handlers.epic_repos import session_in
from bot.handlers.session import Session
from bot.plan.epic import IssueRef, feature_order, feature_repository, parse_ref, same_repository
from bot.plan.state import PlanState, PlanStatus
from bot.rendering.epic_rollup import (
    ROLLUP_MARKER,
    RollupRow,
    cross_rollup_body,
    failure_reason,
    merged_plan,
    rollup_body,
)
from bot.rendering.jinja import md_block, md_inline

__all__ = ["ROLLUP_MARKER", "feature_order", "merged_plan", "rollup_body"]

log = logging.getLogger(__name__)
PLAN_CHILD_JOB = "plan_child"
_MARKER = re.compile(r"<!-- plan-cascade:epic parent=(\S+) needs=(\S*) -->")


def child_marker(parent: int | IssueRef, needs: list[int] | list[IssueRef], *, here: str = "") -> str:
    """The hidden line of a child issue: its parent and the children it waits for. Within one
    repository numbers (`parent=1 needs=2,3`), else references (`parent=acme/service#1`)."""
    refs = [n if isinstance(n, IssueRef) else IssueRef(here, n) for n in needs]
    top = parent if isinstance(parent, IssueRef) else IssueRef(here, parent)
    local = all(same_repository(r.repo, here) for r in [top, *refs])
    shown = [str(r.number) if local else str(r) for r in refs]
    return f"<!-- plan-cascade:epic parent={top.number if local else top} needs={','.join(shown)} -->"


def child_link(body: str | None, repo: str) -> tuple[IssueRef, list[IssueRef]] | None:
    """(parent, needed children) of a child issue of `repo`: the LAST marker, the one the bot
    writes at the end, after the feature's description (a model's text, neutralised, so no
    marker of its own survives in it). None when there is none or it does not parse."""
    found = _MARKER.findall(body or "")
    if not found:
        return None
    parent, needs = found[-1]
    top = parse_ref(parent, default_repo=repo)
    refs = [parse_ref(n, default_repo=repo) for n in needs.split(",") if n]
    if top is None or any(r is None for r in refs):
        return None
    return top, [r for r in refs if r is not None]


def parse_child_marker(body: str | None) -> tuple[int, list[int]] | None:
    """(parent, needed child issues) of a child issue within one repository (numbers only)."""
    link = child_link(body, "")
    return (link[0].number, [r.number for r in link[1]]) if link is not None else None


def child_body(
    *,
    description: str,
    parent: int | IssueRef,
    parent_title: str,
    needs: list[int] | list[IssueRef],
    here: str = "",
) -> str:
    """A child issue's body: the feature's description (a model wrote it: defused Markdown),
    where it belongs, what it waits for, and the bot's marker last."""
    top = parent if isinstance(parent, IssueRef) else IssueRef(here, parent)
    refs = [n if isinstance(n, IssueRef) else IssueRef(here, n) for n in needs]
    waits = ", ".join(r.shown_from(here) for r in refs)
    return (
        f"{md_block(description)}\n\nPart of {top.shown_from(here)} ({md_inline(parent_title)}).\n"
        + (f"Runs after {waits} is merged.\n" if refs else "")
        + child_marker(top, refs, here=here)
    )


def epic_children(state: PlanState) -> list[IssueRef]:
    """Every child issue of an epic, in feature order."""
    refs = [IssueRef(state.repo, n) for n in state.children]
    for value in state.child_issues.values():
        ref = parse_ref(value, default_repo=state.repo)
        if ref is not None:
            refs.append(ref)
    return refs


async def queue_child_planning(session: Session, child: IssueRef, installation_id: int | None) -> None:
    """Plan a child (its label was added by the bot, which sends no event we act on)."""
    if session.services.enqueue is not None:
        await session.services.enqueue(
            PLAN_CHILD_JOB,
            str(child),
            {"repo": child.repo, "issue": child.number, "installation_id": installation_id},
        )


async def plan_of(session: Session, ref: IssueRef) -> PlanState | None:
    """The plan of `ref` (through its repository's installation); None when it has none or it
    cannot be read now (a caller deciding whether to start waits on None: fail closed)."""
    try:
        there = await session_in(session, ref.repo, ref.number)
        loaded = await there.store.load(there.port, ref.repo, ref.number, bot_login=there.bot_login)
    except (GitHubError, NotInstalled) as exc:
        log.warning("could not read the plan of %s: %s", ref, exc)
        return None
    return loaded.state if loaded is not None else None


async def parent_of(session: Session, body: str | None) -> tuple[IssueRef, PlanState] | None:
    """This issue's epic and its plan, when the epic lists this issue among its children (a marker
    written into an issue by hand names no epic)."""
    link = child_link(body, session.repo)
    if link is None:
        return None
    parent = await plan_of(session, link[0])
    me = IssueRef(session.repo, session.issue)
    if parent is None or not any(
        same_repository(r.repo, me.repo) and r.number == me.number for r in epic_children(parent)
    ):
        return None
    return link[0], parent


def planned_needs(
    epic: PlanState, child: IssueRef, marked: list[IssueRef]
) -> tuple[list[IssueRef], list[str]]:
    """What a child of an epic within one repository waits for by the epic's plan now (its
    feature's `depends_on`, through `child_features`): a revision may have changed it since the
    child's marker was written. (Children, features with no child yet); the marker's otherwise."""
    fid = next(
        (
            f
            for f, n in epic.child_features.items()
            if n == child.number and same_repository(child.repo, epic.repo)
        ),
        None,
    )
    feature = next((f for f in epic.prd.features if f.id == fid), None)
    if feature is None:
        return marked, []
    known = epic.child_features
    return [IssueRef(epic.repo, known[d]) for d in feature.depends_on if d in known], [
        d for d in feature.depends_on if d not in known
    ]


async def waiting_for(session: Session) -> list[str]:
    """Children this issue must wait for that are not merged yet (as named from here), each with
    why when it failed. Read from the issue's own marker, or from its epic's plan when that lists
    the issue's feature (a revision may have changed it): an unreadable plan waits (fail closed)."""
    issue = await session.port.get_issue(session.repo, session.issue)
    link = child_link(issue.body, session.repo)
    if link is None:
        return []
    needs: list[IssueRef] = link[1]
    unopened: list[str] = []
    found = await parent_of(session, issue.body)
    if found is not None:
        needs, unopened = planned_needs(found[1], IssueRef(session.repo, session.issue), needs)
    return await _unmerged(session, needs, here=session.repo) + [
        f"{d} (no child issue yet)" for d in unopened
    ]


async def _unmerged(session: Session, needs: list[IssueRef], *, here: str) -> list[str]:
    waits = []
    for ref in needs:
        state = await plan_of(session, ref)
        if merged_plan(state):
            continue
        why = ""
        if state is not None and state.status == PlanStatus.FAILED:
            why = f" (failed: {md_inline(failure_reason(state))})"
        elif state is not None and state.status == PlanStatus.CANCELLED:
            why = " (cancelled)"
        waits.append(ref.shown_from(here) + why)
    return waits


async def epic_context(session: Session, body: str | None) -> str:
    """For a child issue: the epic's summary and its completed siblings' summaries (else "")."""
    found = await parent_of(session, body)
    if found is None:
        return ""
    ref, parent = found
    lines = [
        f"This issue is one feature of the epic {ref.shown_from(session.repo)} ({parent.prd.title}): "
        f"{parent.prd.summary}",
    ]
    if parent.child_issues:
        lines.append(
            f"This issue is in {session.repo}; the epic is in {ref.repo}. "
            "Plan only what belongs in this repository."
        )
    siblings = []
    for child in epic_children(parent):
        if same_repository(child.repo, session.repo) and child.number == session.issue:
            continue
        state = await plan_of(session, child)
        if state is not None and state.status == PlanStatus.COMPLETED:
            merged = "merged" if merged_plan(state) else "not merged yet"
            siblings.append(
                f"- {child.shown_from(session.repo)} {state.prd.title} ({merged}): {state.prd.summary}"
            )
    if siblings:
        lines += ["Features of the epic already done (build on them, do not redo them):", *siblings]
    return "\n".join(lines)


async def child_moved(session: Session, *, body: str | None = None) -> None:
    """A child's plan changed (planned, ran, a PR merged): update its epic's roll-up."""
    if body is None:
        body = (await session.port.get_issue(session.repo, session.issue)).body
    link = child_link(body, session.repo)
    if link is not None:
        await refresh_rollup(session, link[0])


async def on_child_merged(session: Session) -> None:
    """A child's last batch PR merged: start the approved siblings (in any repository) that waited
    only for it; each starts in its own repository with its own approval."""
    issue = await session.port.get_issue(session.repo, session.issue)
    found = await parent_of(session, issue.body)
    if found is None:
        return
    ref, parent = found
    me = IssueRef(session.repo, session.issue)
    for child in epic_children(parent):
        if child == me:
            continue
        try:
            sibling = await session_in(session, child.repo, child.number)
            sibling_issue = await sibling.port.get_issue(child.repo, child.number)
            link = child_link(sibling_issue.body, child.repo)
            needs, _ = planned_needs(parent, child, link[1] if link is not None else [])
            if not any(same_repository(n.repo, me.repo) and n.number == me.number for n in needs):
                continue
            if await sibling.load_config() is None:
                continue
            loaded = await sibling.load_plan()
            if loaded is None or loaded.state.status != PlanStatus.APPROVED or await waiting_for(sibling):
                continue
        except (GitHubError, NotInstalled) as exc:
            log.warning("could not start %s after %s was merged: %s", child, me, exc)
            continue
        log.info("%s was merged: starting %s, which waited for it", me, child)
        await start_execution(sibling, loaded)
    await refresh_rollup(session, ref)


async def refresh_rollup(session: Session, parent: int | IssueRef) -> None:
    """Write (or edit) the epic's roll-up comment from its children's plans."""
    ref = parent if isinstance(parent, IssueRef) else IssueRef(session.repo, parent)
    try:
        home = await session_in(session, ref.repo, ref.number)
    except (GitHubError, NotInstalled) as exc:
        log.warning("could not reach the epic %s for its roll-up: %s", ref, exc)
        return
    epic = await plan_of(home, ref)
    if epic is None or not epic_children(epic):
        return
    body = await _rollup(home, epic)
    try:
        mine = [
            c
            for c in await home.port.list_issue_comments(ref.repo, ref.number)
            if c.user_login == home.bot_login and (c.body or "").startswith(ROLLUP_MARKER)
        ]
        if mine:
            if mine[0].body != body:
                await home.port.update_issue_comment(ref.repo, mine[0].id, body=body)
        else:
            await home.port.create_issue_comment(ref.repo, ref.number, body=body)
    except GitHubError as exc:  # the roll-up is a view: the plans are intact without it
        log.warning("could not update the roll-up of epic %s: %s", ref, exc.message)


async def _rollup(home: Session, epic: PlanState) -> str:
    if not epic.child_issues:
        rows = []
        for number in epic.children:
            state = await plan_of(home, IssueRef(epic.repo, number))
            title = (
                state.prd.title if state is not None else (await home.port.get_issue(epic.repo, number)).title
            )
            rows.append((number, title, state))
        return rollup_body(epic.issue, rows)
    by_ref = {v: fid for fid, v in epic.child_issues.items()}
    features = {f.id: f for f in epic.prd.features}
    cross: list[RollupRow] = []
    for child in epic_children(epic):
        feature = features.get(by_ref.get(str(child), ""))
        state = await plan_of(home, child)
        title = state.prd.title if state is not None else (feature.title if feature else str(child))
        repo = feature_repository(feature, epic.repo) if feature else child.repo
        waits: list[str] = []
        if not merged_plan(state) and feature is not None:
            needs = [
                parse_ref(epic.child_issues[d], default_repo=epic.repo)
                for d in feature.depends_on
                if d in epic.child_issues
            ]
            waits = await _unmerged(home, [n for n in needs if n is not None], here=epic.repo)
        cross.append(
            RollupRow(issue=child.shown_from(epic.repo), title=title, state=state, repo=repo, waits=waits)
        )
    return cross_rollup_body(epic.issue, cross)
