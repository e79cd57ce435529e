"""Plans as the status page shows them: pure functions from cached plan rows to view models.

Input is what the `plans` table holds (a row's columns and its parsed `PlanState`); nothing
here reads the database, GitHub or a model. Every text field is left as the bot or a person
wrote it: the HTML templates escape it (autoescape) and the JSON is JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol
from urllib.parse import quote, urlsplit

from bot.plan.state import PlanState, StoryStatus, totals
from bot.redaction import redact

DEFAULT_BUDGET_USD = 25.0
"""`limits.max_cost_usd` when the repository's config is not in this process's cache."""

_FINISHED = {StoryStatus.PASSED.value, StoryStatus.SKIPPED.value, StoryStatus.CANCELLED.value}


class PlanRow(Protocol):
    """The columns of a `plans` row the page reads besides the state (a `PlanRecord` is one)."""

    @property
    def repo(self) -> str: ...
    @property
    def issue_number(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def updated_at(self) -> datetime: ...


def aware(value: datetime | None) -> datetime | None:
    """A datetime in UTC (SQLite hands back naive ones)."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def safe_url(url: str | None) -> str | None:
    """`url` when it is http(s) (a link the page may show), else None."""
    if url and urlsplit(url).scheme in ("http", "https"):
        return url
    return None


def plan_path(repo: str, issue: int) -> str:
    """The plan's page on the status site."""
    return f"/status/plans/{quote(repo, safe='/')}/{issue}"


@dataclass(frozen=True)
class Tally:
    """How many are done, failed, running and waiting, of `total`."""

    done: int = 0
    failed: int = 0
    running: int = 0
    waiting: int = 0
    total: int = 0


@dataclass(frozen=True)
class PlanSummary:
    """One line of the plans table."""

    key: str
    repo: str
    issue: int
    title: str
    issue_url: str
    page: str
    status: str
    revision: int
    approved_by: tuple[str, ...]
    stories: Tally
    batches: Tally
    cost_usd: float
    tokens: int
    budget_usd: float
    budget_known: bool
    last_activity: datetime | None
    note: str | None


def levels(state: PlanState) -> list[list[str]]:
    """The plan's batches (story ids by dependency level), as `bot.plan.compute_batches` makes them;
    a plan whose dependencies cannot be ordered shows its stories in one batch."""
    try:
        return state.batches_ids()
    except Exception:  # an unorderable PRD in the cache: show it, do not fail the page
        return [[s.id for s in state.prd.stories]]


def story_tally(statuses: Iterable[str]) -> Tally:
    """Stories counted by status: passed (done), failed, running, and the rest waiting."""
    done = failed = running = waiting = 0
    for status in statuses:
        if status == StoryStatus.PASSED:
            done += 1
        elif status == StoryStatus.FAILED:
            failed += 1
        elif status == StoryStatus.RUNNING:
            running += 1
        else:
            waiting += 1
    return Tally(done, failed, running, waiting, done + failed + running + waiting)


def batch_status(state: PlanState, number: int, story_ids: Sequence[str]) -> str:
    """`failed`, `running`, `done` (every story finished, or the PR merged) or `waiting`."""
    statuses = [state.stories[s].status.value for s in story_ids if s in state.stories]
    record = state.batches[number - 1] if number - 1 < len(state.batches) else None
    if StoryStatus.FAILED.value in statuses:
        return "failed"
    if StoryStatus.RUNNING.value in statuses:
        return "running"
    if (record is not None and record.merged) or (statuses and all(s in _FINISHED for s in statuses)):
        return "done"
    return "waiting"


def batch_tally(state: PlanState) -> Tally:
    """Batches counted by :func:`batch_status`."""
    found = [batch_status(state, n, ids) for n, ids in enumerate(levels(state), start=1)]
    return Tally(
        done=found.count("done"),
        failed=found.count("failed"),
        running=found.count("running"),
        waiting=found.count("waiting"),
        total=len(found),
    )


def last_activity(record: PlanRow, state: PlanState) -> datetime | None:
    """The newest of the row's write and the state's own time."""
    times = [t for t in (aware(record.updated_at), aware(state.updated_at)) if t is not None]
    return max(times) if times else None


def plan_summary(
    record: PlanRow, state: PlanState, *, web_url: str, budget_usd: float | None = None
) -> PlanSummary:
    """A cached plan as one line of the plans table. `budget_usd`: the repository's
    `limits.max_cost_usd` when this process has its config cached (else the default is shown)."""
    tokens, cost = totals(state)
    return PlanSummary(
        key=f"{record.repo}#{record.issue_number}",
        repo=record.repo,
        issue=record.issue_number,
        title=state.prd.title,
        issue_url=f"{web_url}/{record.repo}/issues/{record.issue_number}",
        page=plan_path(record.repo, record.issue_number),
        status=record.status,
        revision=state.revision,
        approved_by=tuple(dict.fromkeys(a.user for a in state.current_approvals())),
        stories=story_tally(s.status.value for s in state.stories.values()),
        batches=batch_tally(state),
        cost_usd=round(cost, 6),
        tokens=tokens,
        budget_usd=budget_usd if budget_usd is not None else DEFAULT_BUDGET_USD,
        budget_known=budget_usd is not None,
        last_activity=last_activity(record, state),
        note=redact(state.note) if state.note else None,
    )


@dataclass(frozen=True)
class Filters:
    """What the plans table is narrowed to (None: everything)."""

    repo: str | None = None
    status: str | None = None

    def keeps(self, plan: PlanSummary) -> bool:
        """Whether `plan` passes the filters (the repository compared case-insensitively)."""
        if self.repo and plan.repo.lower() != self.repo.lower():
            return False
        return not (self.status and plan.status != self.status)


def plan_table(
    plans: Iterable[PlanSummary], filters: Filters, *, limit: int
) -> tuple[list[PlanSummary], int]:
    """The plans passing `filters`, newest activity first, at most `limit`; and how many passed."""
    epoch = datetime.min.replace(tzinfo=UTC)
    kept = sorted(
        (p for p in plans if filters.keeps(p)),
        key=lambda p: (p.last_activity or epoch, p.key),
        reverse=True,
    )
    return kept[:limit], len(kept)


def with_budget(plan: PlanSummary, budget_usd: float | None) -> PlanSummary:
    """`plan` against its repository's budget when this process knows it (else the default stays)."""
    if budget_usd is None:
        return plan
    return replace(plan, budget_usd=budget_usd, budget_known=True)
