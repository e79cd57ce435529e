"""One plan's page: batches, stories, checks, the dependency graph and the timeline (pure).

The timeline holds what the plan state records: times where the state has them (planned,
revised, approvals, the last write), and in plan order what it records without a time
(each story's attempts and result, each batch's PR, CI fixes, acceptance verdicts).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from bot.db.models import PlanRecord
from bot.plan.model import Story
from bot.plan.state import PlanState, StoryState
from bot.redaction import redact
from bot.status.plans import (
    PlanSummary,
    aware,
    batch_status,
    levels,
    plan_summary,
    safe_url,
)

NODE_WIDTH, NODE_HEIGHT, COLUMN_GAP, ROW_GAP, MARGIN = 170, 40, 60, 16, 8


@dataclass(frozen=True)
class CheckView:
    """A gate's check run on a story's commit."""

    name: str
    conclusion: str
    url: str | None


@dataclass(frozen=True)
class Verdict:
    """The acceptance review's verdict on one criterion."""

    criterion: str
    verdict: str
    evidence: str


@dataclass(frozen=True)
class BlockedView:
    """Requests to one destination the egress proxy refused a story's agent or setup."""

    by: str
    target: str
    count: int
    allow: str


@dataclass(frozen=True)
class StoryView:
    """One story's row."""

    id: str
    title: str
    status: str
    attempts: int
    agent: str | None
    model: str | None
    tokens: int
    cached_tokens: int
    cost_usd: float
    depends_on: tuple[str, ...]
    reason: str | None
    branch: str | None
    commit: str | None
    checks: tuple[CheckView, ...]
    acceptance: tuple[Verdict, ...]
    blocked: tuple[BlockedView, ...] = ()


@dataclass(frozen=True)
class BatchView:
    """One batch: its stories and its pull request."""

    number: int
    status: str
    stories: tuple[StoryView, ...]
    pr_number: int | None
    pr_url: str | None
    merged: bool
    draft: bool
    hands_off: bool
    gates: dict[str, str]
    ci_fixes: int
    ci_stopped: str | None


@dataclass(frozen=True)
class Node:
    """A story's box in the dependency graph (SVG coordinates)."""

    id: str
    status: str
    x: int
    y: int


@dataclass(frozen=True)
class Edge:
    """A dependency: a line from the needed story's box to the story's box."""

    source: str
    target: str
    path: str


@dataclass(frozen=True)
class Graph:
    """The dependency graph laid out in columns, one per batch."""

    width: int
    height: int
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


@dataclass(frozen=True)
class Event:
    """A line of the timeline; `at` is None where the state records no time."""

    at: datetime | None
    what: str


@dataclass(frozen=True)
class PlanDetail:
    """Everything a plan's page shows."""

    summary: PlanSummary
    summary_text: str
    source: str
    planning_cost_usd: float
    review_cost_usd: float
    batches: tuple[BatchView, ...]
    graph: Graph
    timeline: tuple[Event, ...]
    warnings: tuple[str, ...]


def story_view(story: Story, record: StoryState, *, repo_url: str) -> StoryView:
    """A story's row: its record, its check runs linked on GitHub, its acceptance verdicts."""
    checks = tuple(
        CheckView(
            name=gate,
            conclusion=conclusion,
            url=f"{repo_url}/runs/{record.check_runs[gate]}" if gate in record.check_runs else None,
        )
        for gate, conclusion in record.gates.items()
    )
    return StoryView(
        id=story.id,
        title=story.title,
        status=record.status.value,
        attempts=record.attempts,
        agent=record.agent,
        model=record.model,
        tokens=record.tokens,
        cached_tokens=record.cached_tokens,
        cost_usd=round(record.cost_usd, 6),
        depends_on=tuple(story.depends_on),
        reason=redact(record.reason) if record.reason else None,
        branch=record.branch,
        commit=record.commit,
        checks=checks,
        acceptance=_verdicts(story.acceptance_criteria, record),
        blocked=tuple(
            BlockedView(by=b.by, target=b.target, count=b.count, allow=b.allow.replace("`", ""))
            for b in record.blocked
        ),
    )


def _verdicts(criteria: list[str], record: StoryState) -> tuple[Verdict, ...]:
    return tuple(
        Verdict(
            criterion=criteria[i] if i < len(criteria) else f"criterion {i + 1}",
            verdict=check.verdict,
            evidence=redact(check.evidence),
        )
        for i, check in enumerate(record.acceptance)
    )


def batch_views(state: PlanState, *, repo_url: str) -> tuple[BatchView, ...]:
    """The plan's batches with their stories, in order."""
    stories = {s.id: s for s in state.prd.stories}
    views = []
    for number, ids in enumerate(levels(state), start=1):
        rows = []
        for sid in ids:
            rows.append(story_view(stories[sid], state.stories.get(sid, StoryState()), repo_url=repo_url))
        record_b = state.batches[number - 1] if number - 1 < len(state.batches) else None
        pr_url = safe_url(record_b.pr_url) if record_b else None
        if record_b is not None and record_b.pr_number and pr_url is None:
            pr_url = f"{repo_url}/pull/{record_b.pr_number}"
        views.append(
            BatchView(
                number=number,
                status=batch_status(state, number, ids),
                stories=tuple(rows),
                pr_number=record_b.pr_number if record_b else None,
                pr_url=pr_url,
                merged=bool(record_b and record_b.merged),
                draft=bool(record_b and record_b.draft),
                hands_off=bool(record_b and record_b.hands_off),
                gates=dict(record_b.gates) if record_b else {},
                ci_fixes=record_b.ci_fixes if record_b else 0,
                ci_stopped=record_b.ci_stopped if record_b else None,
            )
        )
    return tuple(views)


def dependency_graph(state: PlanState) -> Graph:
    """Columns of boxes, one column per batch, and a curve from each dependency to its story."""
    where: dict[str, tuple[int, int]] = {}
    nodes = []
    batches = levels(state)
    for column, ids in enumerate(batches):
        for row, sid in enumerate(ids):
            x = MARGIN + column * (NODE_WIDTH + COLUMN_GAP)
            y = MARGIN + row * (NODE_HEIGHT + ROW_GAP)
            where[sid] = (x, y)
            record = state.stories.get(sid, StoryState())
            nodes.append(Node(id=sid, status=record.status.value, x=x, y=y))
    edges = []
    for story in state.prd.stories:
        for dep in story.depends_on:
            if dep not in where or story.id not in where:
                continue
            (x1, y1), (x2, y2) = where[dep], where[story.id]
            sx, sy, tx, ty = x1 + NODE_WIDTH, y1 + NODE_HEIGHT // 2, x2, y2 + NODE_HEIGHT // 2
            mid = (sx + tx) // 2
            edges.append(Edge(dep, story.id, f"M{sx},{sy} C{mid},{sy} {mid},{ty} {tx},{ty}"))
    tallest = max((len(ids) for ids in batches), default=0)
    return Graph(
        width=2 * MARGIN + max(len(batches), 1) * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP,
        height=2 * MARGIN + max(tallest, 1) * (NODE_HEIGHT + ROW_GAP) - ROW_GAP,
        nodes=tuple(nodes),
        edges=tuple(edges),
    )


def timeline(state: PlanState, batches: tuple[BatchView, ...]) -> tuple[Event, ...]:
    """What happened to the plan: timed events in order, then what the state keeps without a time."""
    timed: list[Event] = []
    if state.created_at is not None:
        timed.append(Event(aware(state.created_at), f"planned (source: {state.source})"))
    if state.revision > 1 and state.revised_at is not None:
        timed.append(Event(aware(state.revised_at), f"revision {state.revision} posted"))
    for approval in state.approvals:
        current = state.binds(approval)
        scope = "all stories" if not approval.scope else ", ".join(approval.scope)
        revision = approval.revision if approval.revision is not None else "?"
        stale = "" if current else " — for an older revision"
        timed.append(
            Event(
                aware(approval.at),
                f"approved by {approval.user} via {approval.via} (revision {revision}, {scope}){stale}",
            )
        )
    if state.updated_at is not None:
        note = f": {redact(state.note)}" if state.note else ""
        timed.append(Event(aware(state.updated_at), f"last change — {state.status.value}{note}"))
    timed.sort(key=lambda e: e.at or datetime.min.replace(tzinfo=UTC))
    untimed: list[Event] = []
    for batch in batches:
        for story in batch.stories:
            untimed.extend(_story_events(story))
        record = state.batches[batch.number - 1] if batch.number - 1 < len(state.batches) else None
        if batch.pr_number:
            merged = "merged" if batch.merged else ("draft" if batch.draft else "open")
            untimed.append(Event(None, f"batch {batch.number}: pull request #{batch.pr_number} ({merged})"))
        if record is not None:
            untimed.extend(Event(None, f"batch {batch.number}: CI — {redact(a)}") for a in record.ci_actions)
            if record.ci_fixes:
                untimed.append(Event(None, f"batch {batch.number}: {record.ci_fixes} CI fix commit(s)"))
            if record.ci_stopped:
                stopped = redact(record.ci_stopped)
                untimed.append(Event(None, f"batch {batch.number}: CI loop stopped — {stopped}"))
    return tuple(timed + untimed)


def _story_events(story: StoryView) -> list[Event]:
    events = []
    if story.attempts:
        who = " · ".join(x for x in (story.agent, story.model) if x)
        tries = "attempt" if story.attempts == 1 else "attempts"
        text = f"{story.id}: {story.status} after {story.attempts} {tries}"
        text += f" ({who})" if who else ""
        text += f" — {story.reason}" if story.reason else ""
        events.append(Event(None, text))
    if story.acceptance:
        met = sum(v.verdict == "met" for v in story.acceptance)
        events.append(Event(None, f"{story.id}: acceptance review, {met} of {len(story.acceptance)} met"))
    return events


def plan_detail(
    record: PlanRecord, state: PlanState, *, web_url: str, budget_usd: float | None = None
) -> PlanDetail:
    """A cached plan as its page shows it."""
    repo_url = f"{web_url}/{record.repo}"
    batches = batch_views(state, repo_url=repo_url)
    return PlanDetail(
        summary=plan_summary(record, state, web_url=web_url, budget_usd=budget_usd),
        summary_text=state.prd.summary,
        source=state.source,
        planning_cost_usd=round(state.planning_cost_usd, 6),
        review_cost_usd=round(state.review_cost_usd, 6),
        batches=batches,
        graph=dependency_graph(state),
        timeline=timeline(state, batches),
        warnings=tuple(state.warnings),
    )
