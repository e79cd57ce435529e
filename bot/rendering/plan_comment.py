"""The plan comment: the one comment per issue that shows the plan and carries its state.

`render_plan_comment` is pure. It never returns more than `limit` characters: the
hidden state block is budgeted first, then the comment is rendered in full and, when
too long, trimmed in steps (perspectives' bodies, acceptance criteria, the dependency
graph, the story lists), each step named in a visible note.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from bot.errors import PlanValidationError
from bot.plan import short_hash
from bot.plan.baseline import summary_line
from bot.plan.state import PlanState, PlanStatus, StoryStatus, totals
from bot.plan.state_block import PLAN_MARKER, encode_state
from bot.rendering.epic_plan import epic_rows
from bot.rendering.estimate import ExecutionEstimate
from bot.rendering.jinja import mermaid_id, mermaid_label, template_env
from bot.rendering.schedules import scheduled_line

COMMENT_LIMIT = 65_536
"""GitHub's limit on an issue comment, in characters."""
MERMAID_MAX_TEXT = 50_000
"""Mermaid's default `maxTextSize`: GitHub shows an error instead of a bigger diagram."""
MERMAID_TITLE_CHARS = 60
"""Titles in the diagram are cut to this many characters."""

STORY_EMOJI: dict[StoryStatus, str] = {
    StoryStatus.PENDING: "⏳",
    StoryStatus.RUNNING: "🔄",
    StoryStatus.PASSED: "✅",
    StoryStatus.FAILED: "❌",
    StoryStatus.SKIPPED: "⏭️",
    StoryStatus.CANCELLED: "🚫",
}
PLAN_BADGE: dict[PlanStatus, str] = {
    PlanStatus.DRAFT: "📝 Draft",
    PlanStatus.AWAITING_APPROVAL: "🟡 Awaiting approval",
    PlanStatus.APPROVED: "🟢 Approved",
    PlanStatus.RUNNING: "🔄 Running",
    PlanStatus.PAUSED: "⏸️ Paused",
    PlanStatus.COMPLETED: "✅ Completed",
    PlanStatus.FAILED: "❌ Failed",
    PlanStatus.CANCELLED: "🚫 Cancelled",
}
_VIA = {
    "reaction": "a 👍 reaction",
    "command": "`/plan-cascade approve`",
    "review": "a review of the plan PR",
}
_PROGRESS_STATUSES = {PlanStatus.RUNNING, PlanStatus.PAUSED, PlanStatus.FAILED, PlanStatus.COMPLETED}


@dataclass(frozen=True)
class _Trim:
    """Which trimming steps are applied."""

    perspectives: bool = False
    criteria: bool = False
    graph: bool = False
    rows: int | None = None
    minimal: bool = False

    def notes(self, total: int) -> list[str]:
        notes = []
        if self.minimal:
            return ["everything but the status and the commands"]
        if self.perspectives:
            notes.append("the planning perspectives' text")
        if self.criteria:
            notes.append("the acceptance criteria (one line per story)")
        if self.graph:
            notes.append("the dependency graph")
        if self.rows is not None:
            notes.append(f"the story lists (the first {self.rows} of {total} stories are shown)")
        return notes


def utc(moment: datetime) -> str:
    """``2025-01-02 10:00 UTC`` (a naive time is taken to be UTC)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def comment_size(text: str) -> int:
    """Length as GitHub may count it (UTF-16 code units; never less than `len`)."""
    return len(text.encode("utf-16-le")) // 2


def mermaid_flowchart(state: PlanState) -> str:
    """The dependency graph as Mermaid source: one subgraph per batch, edges dependency --> story."""
    ids: dict[str, str] = {}
    for story in state.prd.stories:
        node = base = mermaid_id(story.id)
        n = 2
        while node in ids.values():
            node, n = f"{base}_{n}", n + 1
        ids[story.id] = node
    lines = ["flowchart TD"]
    for number, batch in enumerate(state.batches_ids(), start=1):
        lines.append(f'  subgraph batch{number}["Batch {number}"]')
        for sid in batch:
            story = state.prd.story(sid)
            title = story.title if len(story.title) <= MERMAID_TITLE_CHARS else story.title[:59] + "…"
            status = state.stories[sid].status if sid in state.stories else StoryStatus.PENDING
            mark = "" if status == StoryStatus.PENDING else f" {STORY_EMOJI[status]}"
            lines.append(f'    {ids[sid]}["{mermaid_label(sid)}: {mermaid_label(title)}{mark}"]')
        lines.append("  end")
    for story in state.prd.stories:
        lines.extend(
            f"  {ids[dep]} --> {ids[story.id]}" for dep in dict.fromkeys(story.depends_on) if dep in ids
        )
    return "\n".join(lines)


def _rows(state: PlanState) -> list[dict[str, Any]]:
    batch_no = {sid: n for n, batch in enumerate(state.batches_ids(), start=1) for sid in batch}
    rows = []
    for story in state.prd.stories:
        record = state.stories.get(story.id)
        status = record.status if record else StoryStatus.PENDING
        rows.append(
            {
                "story": story,
                "batch": batch_no[story.id],
                "status": status.value,
                "emoji": STORY_EMOJI[status],
                "record": record,
                "in_scope": story.id in state.approved_scope,
            }
        )
    return rows


def _batches(state: PlanState, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    records = {b.number: b for b in state.batches}
    result = []
    for number, batch in enumerate(state.batches_ids(), start=1):
        members = [row for row in rows if row["batch"] == number]
        done = sum(1 for row in members if row["status"] == "passed")
        result.append(
            {"number": number, "ids": batch, "rows": members, "done": done, "pr": records.get(number)}
        )
    return result


def _approvals(state: PlanState) -> list[dict[str, Any]]:
    return [
        {
            "approval": a,
            "current": state.binds(a),
            "via": _VIA[a.via],
            "at": utc(a.at),
            "hash": short_hash(a.plan_hash),
        }
        for a in state.approvals
    ]


def _context(
    state: PlanState,
    *,
    estimate: ExecutionEstimate | None,
    trigger_label: str,
    app_url: str | None,
    state_block: str,
) -> dict[str, Any]:
    rows = _rows(state)
    spent_tokens, spent_cost = totals(state)
    graph = mermaid_flowchart(state)
    return {
        "state": state,
        "base_line": summary_line(state.base_check, labelled=False) if state.base_check else None,
        "marker": PLAN_MARKER,
        "badge": PLAN_BADGE[state.status],
        "short": short_hash(state.plan_hash),
        "rows": rows,
        "batches": _batches(state, rows),
        "graph": graph if len(graph) <= MERMAID_MAX_TEXT else None,
        "approvals": _approvals(state),
        "approvers": len({a.user for a in state.current_approvals()}),
        "partial_scope": bool(state.approved_scope) and len(state.approved_scope) < len(rows),
        "failed": [row["story"].id for row in rows if row["status"] == "failed"],
        "show_progress": state.status in _PROGRESS_STATUSES
        or (state.status == PlanStatus.CANCELLED and any(r["status"] != "pending" for r in rows)),
        "spent_tokens": spent_tokens,
        "spent_cost": spent_cost,
        "execution_tokens": spent_tokens - state.planning_tokens,
        "execution_cost": spent_cost - state.planning_cost_usd,
        "estimate": estimate,
        "trigger_label": trigger_label,
        "app_url": app_url,
        "updated": utc(state.updated_at) if state.updated_at else None,
        "state_block": state_block,
        "epic_rows": epic_rows(state),
        "scheduled_line": scheduled_line(state.scheduled) if state.scheduled else None,
    }


def _steps(state: PlanState, *, graph_drawn: bool) -> Iterator[_Trim]:
    """The full rendering, then each trimming step that would change something, cumulatively."""
    trim = _Trim()
    yield trim
    for step, useful in (
        (
            "perspectives",
            bool(state.perspectives or state.cross_check or state.looked_at or state.clarifications),
        ),
        ("criteria", True),
        ("graph", graph_drawn),
    ):
        if useful:
            trim = replace(trim, **{step: True})
            yield trim


def render_plan_comment(
    state: PlanState,
    *,
    estimate: ExecutionEstimate | None = None,
    trigger_label: str = "plan-cascade",
    app_url: str | None = None,
    limit: int = COMMENT_LIMIT,
    state_block: str | None = None,
) -> str:
    """The plan comment's Markdown body, at most `limit` characters, ending with the state block.

    `state_block` replaces the inline block (a reference to continuation comments when the
    state is too large for one comment). Raises PlanValidationError when it alone does not fit.
    """
    state_block = state_block or encode_state(state, key=None)
    if comment_size(PLAN_MARKER) + comment_size(state_block) + 2 > limit:
        raise PlanValidationError(
            "the plan is too large for one GitHub comment",
            [
                f"its state block alone is {comment_size(state_block):,} characters and a comment may "
                f"have {limit:,}",
                "lower limits.max_stories in .github/plan-cascade.yml or split the issue into smaller ones",
            ],
        )
    template = template_env().get_template("plan_comment.md.j2")
    context = _context(
        state, estimate=estimate, trigger_label=trigger_label, app_url=app_url, state_block=state_block
    )
    total = len(state.prd.stories)

    def render(trim: _Trim) -> str:
        return template.render(context, trim=trim, trimmed=trim.notes(total)).strip() + "\n"

    for trim in _steps(state, graph_drawn=context["graph"] is not None):
        body = render(trim)
        if comment_size(body) <= limit:
            return body
    low, high, best = 0, total - 1, None
    while low <= high:  # the most story rows that fit
        mid = (low + high) // 2
        body = render(replace(trim, rows=mid))
        if comment_size(body) <= limit:
            best, low = body, mid + 1
        else:
            high = mid - 1
    if best is not None:
        return best
    body = render(_Trim(minimal=True))
    if comment_size(body) <= limit:
        return body
    raise PlanValidationError(
        "the plan is too large for one GitHub comment",
        [
            f"even its shortest form is {comment_size(body):,} characters and a comment may have {limit:,}",
            "shorten the plan's summary, notes and warnings, lower limits.max_stories or split the issue",
        ],
    )
