"""Mega plans: each feature of an epic becomes a child issue, planned on its own and run in
dependency order.

The child issues carry a hidden marker naming their parent and the child issues they wait
for; a child's execution does not start before those are completed (it says so instead).
The epic itself is never executed: its children are.
"""

from __future__ import annotations

import logging
import re

from bot.handlers.session import Session
from bot.planning.epic import Epic
from bot.state import PlanStatus

log = logging.getLogger(__name__)
PLAN_CHILD_JOB = "plan_child"
_MARKER = re.compile(r"<!-- plan-cascade:epic parent=(\d+) needs=([0-9,]*) -->")


def child_marker(parent: int, needs: list[int]) -> str:
    """The hidden line of a child issue: its parent and the children it waits for."""
    return f"<!-- plan-cascade:epic parent={parent} needs={','.join(map(str, needs))} -->"


def parse_child_marker(body: str | None) -> tuple[int, list[int]] | None:
    """(parent, needed child issues) of a child issue body."""
    match = _MARKER.search(body or "")
    if not match:
        return None
    return int(match.group(1)), [int(n) for n in match.group(2).split(",") if n]


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
        waits = ", ".join(f"#{n}" for n in needs)
        body = (
            f"{feature.description}\n\nPart of #{session.issue} ({title}).\n"
            + (f"Runs after {waits} is completed.\n" if needs else "")
            + child_marker(session.issue, needs)
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


async def waiting_for(session: Session) -> list[int]:
    """Child issues this issue must wait for that are not completed yet."""
    issue = await session.port.get_issue(session.repo, session.issue)
    marker = parse_child_marker(issue.body)
    if marker is None:
        return []
    pending = []
    for number in marker[1]:
        loaded = await session.store.load(session.port, session.repo, number, bot_login=session.bot_login)
        if loaded is None or loaded.state.status != PlanStatus.COMPLETED:
            pending.append(number)
    return pending
