"""Mega plans: each feature of an epic becomes a child issue, planned on its own and run in
dependency order.

The child issues carry a hidden marker naming their parent and the child issues they wait
for. A child runs only once those are *merged* (their plans completed and every batch pull
request merged), so it branches from a default branch that holds their code; a child
approved earlier starts by itself when the last of them is merged. A child is planned with
the epic's context (the epic's summary, and the summaries of its completed siblings). The
epic issue keeps one roll-up comment: each child, its status and its pull requests.
The epic itself is never executed: its children are.
"""

from __future__ import annotations

import logging
import re

from bot.errors import GitHubError
from bot.handlers.approval import start_execution
from bot.handlers.session import Session, open_session
from bot.plan.state import PlanState, PlanStatus
from bot.planning.epic import Epic
from bot.rendering.jinja import md_block, md_inline

log = logging.getLogger(__name__)
PLAN_CHILD_JOB = "plan_child"
_MARKER = re.compile(r"<!-- plan-cascade:epic parent=(\d+) needs=([0-9,]*) -->")
ROLLUP_MARKER = "<!-- plan-cascade:epic-rollup -->"


def child_marker(parent: int, needs: list[int]) -> str:
    """The hidden line of a child issue: its parent and the children it waits for."""
    return f"<!-- plan-cascade:epic parent={parent} needs={','.join(map(str, needs))} -->"


def parse_child_marker(body: str | None) -> tuple[int, list[int]] | None:
    """(parent, needed child issues) of a child issue body: the LAST marker, the one the bot
    writes at the end, after the feature's description (a model's text, which is neutralised
    too, so no marker of its own survives in it)."""
    found = _MARKER.findall(body or "")
    if not found:
        return None
    parent, needs = found[-1]
    return int(parent), [int(n) for n in needs.split(",") if n]


def child_body(*, description: str, parent: int, parent_title: str, needs: list[int]) -> str:
    """A child issue's body: the feature's description (a model wrote it: defused Markdown),
    where it belongs, what it waits for, and the bot's marker last."""
    waits = ", ".join(f"#{n}" for n in needs)
    return (
        f"{md_block(description)}\n\nPart of #{parent} ({md_inline(parent_title)}).\n"
        + (f"Runs after {waits} is merged.\n" if needs else "")
        + child_marker(parent, needs)
    )


def feature_order(epic: Epic) -> list[str]:
    """Feature ids with every feature after the features it depends on (stable)."""
    done: list[str] = []
    left = list(epic.features)
    while left:
        ready = [f for f in left if all(d in done for d in f.depends_on)]
        if not ready:  # a cycle: validate_epic refuses these, keep the listed order
            ready = left[:1]
        done.append(ready[0].id)
        left.remove(ready[0])
    return done


async def create_children(session: Session, epic: Epic, *, title: str) -> list[tuple[str, int]]:
    """Open one child issue per feature (dependencies first); queue each one's planning."""
    assert session.config is not None
    numbers: dict[str, int] = {}
    by_id = {f.id: f for f in epic.features}
    for fid in feature_order(epic):
        feature = by_id[fid]
        needs = [numbers[d] for d in feature.depends_on if d in numbers]
        body = child_body(
            description=feature.description, parent=session.issue, parent_title=title, needs=needs
        )
        issue = await session.port.create_issue(
            session.repo, title=f"{feature.title}", body=body, labels=[session.config.trigger_label]
        )
        numbers[fid] = issue.number
        if session.services.enqueue is not None:
            await session.services.enqueue(
                PLAN_CHILD_JOB,
                f"{session.repo}#{issue.number}",
                {"repo": session.repo, "issue": issue.number, "installation_id": session.installation_id},
            )
    return [(fid, numbers[fid]) for fid in feature_order(epic)]


def merged_plan(state: PlanState | None) -> bool:
    """Whether a child's work is on the default branch: completed, and every batch PR merged."""
    if state is None or state.status != PlanStatus.COMPLETED:
        return False
    return all(b.merged for b in state.batches if b.pr_number is not None)


async def _child_state(session: Session, number: int) -> PlanState | None:
    loaded = await session.store.load(session.port, session.repo, number, bot_login=session.bot_login)
    return loaded.state if loaded is not None else None


async def waiting_for(session: Session) -> list[int]:
    """Child issues this issue must wait for that are not merged yet."""
    issue = await session.port.get_issue(session.repo, session.issue)
    marker = parse_child_marker(issue.body)
    if marker is None:
        return []
    return [number for number in marker[1] if not merged_plan(await _child_state(session, number))]


async def epic_context(session: Session, body: str | None) -> str:
    """For a child issue: the epic's summary and its completed siblings' summaries (else "")."""
    marker = parse_child_marker(body)
    if marker is None:
        return ""
    parent = await _child_state(session, marker[0])
    if parent is None:
        return ""
    lines = [
        f"This issue is one feature of the epic #{marker[0]} ({parent.prd.title}): {parent.prd.summary}",
    ]
    siblings = []
    for number in parent.children:
        child = await _child_state(session, number) if number != session.issue else None
        if child is not None and child.status == PlanStatus.COMPLETED:
            merged = "merged" if merged_plan(child) else "not merged yet"
            siblings.append(f"- #{number} {child.prd.title} ({merged}): {child.prd.summary}")
    if siblings:
        lines += ["Features of the epic already done (build on them, do not redo them):", *siblings]
    return "\n".join(lines)


async def child_moved(session: Session, *, body: str | None = None) -> None:
    """A child's plan changed (planned, ran, a PR merged): update its epic's roll-up."""
    if body is None:
        body = (await session.port.get_issue(session.repo, session.issue)).body
    marker = parse_child_marker(body)
    if marker is not None:
        await refresh_rollup(session, marker[0])


async def on_child_merged(session: Session) -> None:
    """A child's last batch PR merged: start the approved siblings that waited only for it."""
    issue = await session.port.get_issue(session.repo, session.issue)
    marker = parse_child_marker(issue.body)
    if marker is None:
        return
    parent = await _child_state(session, marker[0])
    for number in parent.children if parent is not None else []:
        if number == session.issue:
            continue
        sibling = await open_session(
            session.services, repo=session.repo, issue=number, installation_id=session.installation_id
        )
        sibling_issue = await sibling.port.get_issue(session.repo, number)
        needs = (parse_child_marker(sibling_issue.body) or (0, []))[1]
        if session.issue not in needs or await sibling.load_config() is None:
            continue
        loaded = await sibling.load_plan()
        if loaded is None or loaded.state.status != PlanStatus.APPROVED or await waiting_for(sibling):
            continue
        log.info("#%s was merged: starting #%s, which waited for it", session.issue, number)
        await start_execution(sibling, loaded)
    await refresh_rollup(session, marker[0])


def rollup_body(parent: int, rows: list[tuple[int, str, PlanState | None]]) -> str:
    """The epic's one roll-up comment: each child, its status and pull requests. Pure."""
    lines = [
        ROLLUP_MARKER,
        f"### 🧭 Epic #{parent}: features",
        "",
        "| Issue | Feature | Status | Pull requests |",
        "|---|---|---|---|",
    ]
    for number, title, state in rows:
        if state is None:
            status, pulls = "not planned yet", "—"
        else:
            status = (
                "merged" if merged_plan(state) and state.batches else state.status.value.replace("_", " ")
            )
            opened = [b for b in state.batches if b.pr_number is not None]
            pulls = ", ".join(f"#{b.pr_number}{' (merged)' if b.merged else ''}" for b in opened) or "—"
        safe = md_inline(title[:80]).replace("|", "\\|")  # a model wrote it: no mentions, no HTML
        lines.append(f"| #{number} | {safe} | {status} | {pulls} |")
    lines += ["", "_Updated as the features move. A feature runs once the features it needs are merged._"]
    return "\n".join(lines)


async def refresh_rollup(session: Session, parent: int) -> None:
    """Write (or edit) the epic's roll-up comment from its children's plans."""
    epic = await _child_state(session, parent)
    if epic is None or not epic.children:
        return
    rows = []
    for number in epic.children:
        state = await _child_state(session, number)
        title = (
            state.prd.title
            if state is not None
            else (await session.port.get_issue(session.repo, number)).title
        )
        rows.append((number, title, state))
    body = rollup_body(parent, rows)
    try:
        mine = [
            c
            for c in await session.port.list_issue_comments(session.repo, parent)
            if c.user_login == session.bot_login and (c.body or "").startswith(ROLLUP_MARKER)
        ]
        if mine:
            if mine[0].body != body:
                await session.port.update_issue_comment(session.repo, mine[0].id, body=body)
        else:
            await session.port.create_issue_comment(session.repo, parent, body=body)
    except GitHubError as exc:  # the roll-up is a view: the plans are intact without it
        log.warning("could not update the roll-up of epic #%s: %s", parent, exc.message)
