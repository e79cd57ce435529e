"""The epic's roll-up comment: each child, where it lives, its plan's state, its pull requests and
what it waits for. Pure: rows in, Markdown out."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.plan.state import PlanState, PlanStatus
from bot.rendering.jinja import md_inline

ROLLUP_MARKER = "<!-- plan-cascade:epic-rollup -->"


def merged_plan(state: PlanState | None) -> bool:
    """Whether a child's work is on the default branch: completed, and every batch PR merged."""
    if state is None or state.status != PlanStatus.COMPLETED:
        return False
    return all(b.merged for b in state.batches if b.pr_number is not None)


def failure_reason(state: PlanState) -> str:
    """Why a child's plan failed, in one line (its note, else its first failed story's reason)."""
    reasons = [s.reason for s in state.stories.values() if s.reason]
    return (state.note or (reasons[0] if reasons else "") or "it failed")[:160]


def plan_status(state: PlanState | None) -> str:
    """A child's status as the roll-up says it."""
    if state is None:
        return "not planned yet"
    if merged_plan(state) and state.batches:
        return "merged"
    status = state.status.value.replace("_", " ")
    if state.status == PlanStatus.FAILED:
        return f"{status}: {md_inline(failure_reason(state))}"  # agents' output may be in it
    return status


@dataclass
class RollupRow:
    """One child of an epic, as the roll-up shows it."""

    issue: str
    """How the child is named from the epic (`#12`, or `owner/name#12` in another repository)."""
    title: str
    state: PlanState | None
    repo: str = ""
    waits: list[str] = field(default_factory=list)
    """Children it waits for that are not merged yet, each with why when it failed or was cancelled
    (Markdown the bot made: references, and reasons already neutralised)."""


def _pulls(state: PlanState | None, prefix: str) -> str:
    if state is None:
        return "—"
    opened = [b for b in state.batches if b.pr_number is not None]
    return ", ".join(f"{prefix}#{b.pr_number}{' (merged)' if b.merged else ''}" for b in opened) or "—"


def rollup_body(parent: int, rows: list[tuple[int, str, PlanState | None]]) -> str:
    """The roll-up of an epic within one repository: each child, its status and pull requests."""
    lines = [
        ROLLUP_MARKER,
        f"### 🧭 Epic #{parent}: features",
        "",
        "| Issue | Feature | Status | Pull requests |",
        "|---|---|---|---|",
    ]
    for number, title, state in rows:
        safe = md_inline(title[:80]).replace("|", "\\|")  # a model wrote it: no mentions, no HTML
        status = plan_status(state).replace("|", "\\|")
        lines.append(f"| #{number} | {safe} | {status} | {_pulls(state, '')} |")
    lines += ["", "_Updated as the features move. A feature runs once the features it needs are merged._"]
    return "\n".join(lines)


def cross_rollup_body(parent: int, rows: list[RollupRow]) -> str:
    """The roll-up of an epic across repositories: a row per child with its repository, plan state,
    pull requests (in its repository) and what it waits for."""
    lines = [
        ROLLUP_MARKER,
        f"### 🧭 Epic #{parent}: features across repositories",
        "",
        "| Repository | Issue | Feature | Status | Pull requests | Waits for |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        safe = md_inline(row.title[:80]).replace("|", "\\|")
        status = plan_status(row.state).replace("|", "\\|")
        waits = ", ".join(row.waits).replace("|", "\\|") or "—"
        lines.append(
            f"| {row.repo} | {row.issue} | {safe} | {status} | {_pulls(row.state, row.repo)} | {waits} |"
        )
    lines += [
        "",
        "_Each child is planned and approved in its own repository by that repository's writers, and "
        "starts once the children it needs are merged into their repositories' default branches._",
    ]
    return "\n".join(lines)
