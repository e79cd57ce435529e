"""The overview page's whole content, assembled from rows (pure): what `/status` renders and
`/status.json` returns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from bot.status.lines import PlanRows
from bot.status.operations import (
    Installation,
    Intake,
    Limits,
    Spend,
    Storage,
    Work,
    answers_by_outcome,
    installations,
    intake,
    spend,
    work,
)
from bot.status.plans import Filters, PlanSummary, plan_table, with_budget
from bot.status.reads import IntakeRows, WorkRows
from bot.status.schedules import ScheduleLine

PLAN_LIMIT = 200
"""Plans listed at most (newest activity first); filters narrow the rest down."""


@dataclass(frozen=True)
class Overview:
    """Everything `/status` shows."""

    generated_at: datetime
    filters: Filters
    plans: tuple[PlanSummary, ...]
    plans_matching: int
    plans_total: int
    plans_by_status: dict[str, int]
    unreadable_plans: tuple[str, ...]
    repositories: tuple[str, ...]
    statuses: tuple[str, ...]
    work: Work
    intake: Intake
    spend: tuple[Spend, ...]
    installations: tuple[Installation, ...]
    storage: Storage | None = None
    schedules: tuple[ScheduleLine, ...] = ()


def overview(
    *,
    plans: PlanRows,
    queue: WorkRows,
    deliveries: IntakeRows,
    answers: Iterable[tuple[str, dict[str, str], float]],
    budgets: Mapping[str, float | None],
    limits: Mapping[int, Limits] | None = None,
    redeliveries: int | None = None,
    filters: Filters,
    now: datetime,
    limit: int = PLAN_LIMIT,
    storage: Storage | None = None,
    schedules: tuple[ScheduleLine, ...] = (),
) -> Overview:
    """The overview from the database's rows, this process's counters and known budgets."""
    summaries = [with_budget(line, budgets.get(line.repo)) for line in plans.lines]
    shown, matching = plan_table(summaries, filters, limit=limit)
    return Overview(
        generated_at=now,
        filters=filters,
        plans=tuple(shown),
        plans_matching=matching,
        plans_total=len(summaries),
        plans_by_status=dict(sorted(Counter(s.status for s in summaries).items())),
        unreadable_plans=tuple(plans.unreadable),
        repositories=tuple(sorted({s.repo for s in summaries}, key=str.lower)),
        statuses=tuple(sorted({s.status for s in summaries})),
        work=work(
            counts=queue.counts,
            waiting=queue.waiting,
            running=queue.running,
            retrying=queue.retrying,
            dead=queue.dead,
            now=now,
        ),
        intake=intake(
            recent=deliveries.recent,
            failed=deliveries.failed,
            jobs=deliveries.jobs,
            answers=answers_by_outcome(answers),
            redeliveries=redeliveries,
        ),
        spend=spend(summaries, now=now),
        installations=installations(plans.installations, limits),
        storage=storage,
        schedules=schedules,
    )
