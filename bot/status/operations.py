"""The server's work, intake and spend as the status page shows them (pure).

Inputs are rows of the `jobs`, `deliveries` and `plans` tables (read by `bot.status.reads`)
and this process's own counters; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.db.models import Delivery, Job
from bot.redaction import redact
from bot.status.plans import PlanSummary, aware

ERROR_CHARS = 600
"""How much of a job's last error the page shows (its tail: where the exception is)."""


def error_tail(error: str | None) -> str | None:
    """What the page shows of a job's error: redacted whole (a secret cut in two would no
    longer look like one), then its last `ERROR_CHARS` characters."""
    if not error:
        return error
    shown = redact(error)
    return "…" + shown[-ERROR_CHARS:] if len(shown) > ERROR_CHARS else shown


@dataclass(frozen=True)
class WaitingRow:
    """Queued jobs of one kind, as the database counts them."""

    kind: str
    count: int
    due: int
    oldest: datetime | None


@dataclass(frozen=True)
class Waiting:
    """Jobs of one kind waiting to run."""

    kind: str
    count: int
    due: int
    oldest_age_seconds: float | None


@dataclass(frozen=True)
class JobView:
    """A job the operator may want to look at."""

    id: int
    kind: str
    target: str
    status: str
    attempts: int
    max_attempts: int
    worker: str | None
    lease_left_seconds: float | None
    age_seconds: float
    last_error: str | None
    updated_at: datetime | None
    delivery_id: str | None


@dataclass(frozen=True)
class Work:
    """The job queue: what waits, what runs and on which worker, what failed."""

    counts: dict[str, int]
    waiting: tuple[Waiting, ...]
    oldest_waiting_seconds: float | None
    running: tuple[JobView, ...]
    retrying: tuple[JobView, ...]
    dead: tuple[JobView, ...]


def _seconds(later: datetime, earlier: datetime | None) -> float | None:
    moment = aware(earlier)
    return None if moment is None else round((later - moment).total_seconds(), 1)


def job_view(job: Job, *, now: datetime) -> JobView:
    """A job row for the page: its lease and age in seconds, the tail of its last error."""
    lease = _seconds(aware(job.lease_until) or now, now) if job.lease_until is not None else None
    return JobView(
        id=job.id,
        kind=job.kind,
        target=job.group_key,
        status=job.status,
        attempts=job.attempts,
        max_attempts=job.max_attempts,
        worker=job.locked_by,
        lease_left_seconds=lease,
        age_seconds=_seconds(now, job.created_at) or 0.0,
        last_error=error_tail(job.last_error),
        updated_at=aware(job.updated_at),
        delivery_id=job.delivery_id,
    )


def work(
    *,
    counts: dict[str, int],
    waiting: Sequence[WaitingRow],
    running: Sequence[Job],
    retrying: Sequence[Job],
    dead: Sequence[Job],
    now: datetime,
) -> Work:
    """The queue's state from its rows: waiting by kind (oldest first), running, failing, dead."""
    kinds = tuple(
        Waiting(kind=w.kind, count=w.count, due=w.due, oldest_age_seconds=_seconds(now, w.oldest))
        for w in sorted(waiting, key=lambda w: (aware(w.oldest) or now, w.kind))
    )
    ages = [k.oldest_age_seconds for k in kinds if k.oldest_age_seconds is not None]
    return Work(
        counts=dict(sorted(counts.items())),
        waiting=kinds,
        oldest_waiting_seconds=max(ages) if ages else None,
        running=tuple(job_view(j, now=now) for j in running),
        retrying=tuple(job_view(j, now=now) for j in retrying),
        dead=tuple(job_view(j, now=now) for j in dead),
    )


@dataclass(frozen=True)
class Storage:
    """How big the database is, and how long it keeps finished work."""

    engine: str
    size_bytes: int
    """SQLite: its pages (the file, once the write-ahead log is copied in); PostgreSQL:
    `pg_database_size`."""
    free_bytes: int | None
    """SQLite: space inside the file that removed rows left; new rows reuse it (the file does not
    shrink by itself). None elsewhere."""
    wal_bytes: int | None
    """SQLite: the write-ahead log (copied into the file by checkpoints, then reused). None elsewhere."""
    retention_days: int
    """`PLAN_CASCADE_RETENTION_DAYS` (0: nothing is removed)."""
    last_prune: datetime | None


@dataclass(frozen=True)
class DeliveryView:
    """One recorded webhook delivery and what became of its job."""

    id: str
    event: str
    action: str | None
    target: str | None
    outcome: str
    received_at: datetime | None
    job_status: str | None
    job_error: str | None


@dataclass(frozen=True)
class Intake:
    """Recent deliveries, the failed ones, and this process's answers by outcome."""

    recent: tuple[DeliveryView, ...]
    failed: tuple[DeliveryView, ...]
    answers_since_start: dict[str, int]
    answer_times: str
    redeliveries: str


def delivery_view(delivery: Delivery, job: Job | None) -> DeliveryView:
    """A delivery row with its job's status (None: no job, the event was ignored)."""
    return DeliveryView(
        id=delivery.id,
        event=delivery.event,
        action=delivery.action,
        target=delivery.target,
        outcome=delivery.outcome,
        received_at=aware(delivery.received_at),
        job_status=job.status if job is not None else None,
        job_error=error_tail(job.last_error) if job is not None else None,
    )


def intake(
    *,
    recent: Sequence[Delivery],
    failed: Sequence[tuple[Delivery, Job]],
    jobs: Iterable[Job],
    answers: dict[str, int],
    redeliveries: int | None = None,
) -> Intake:
    """Deliveries newest first, joined to their jobs; a delivery whose job died is failed.

    `answers`: this process's `/webhook` answers by outcome (accepted, ignored, duplicate,
    refused …), from its own counters; `redeliveries`: the missed deliveries this process asked
    GitHub to send again (None: not counted here). The tables record no answer times: the page
    says so.
    """
    by_delivery = {j.delivery_id: j for j in jobs if j.delivery_id}
    return Intake(
        recent=tuple(delivery_view(d, by_delivery.get(d.id)) for d in recent),
        failed=tuple(delivery_view(d, j) for d, j in failed),
        answers_since_start=dict(sorted(answers.items())),
        answer_times="not recorded",
        redeliveries="not counted here"
        if redeliveries is None
        else f"{redeliveries} since this process began",
    )


def answers_by_outcome(samples: Iterable[tuple[str, dict[str, str], float]]) -> dict[str, int]:
    """`plan_cascade_deliveries_total` samples (name, labels, value) summed by outcome;
    the refusals (bad signature, bad headers, bad JSON, too large) are also summed as `refused`."""
    totals: dict[str, int] = {}
    for name, labels, value in samples:
        if not name.endswith("_total") or "outcome" not in labels:
            continue
        outcome = labels["outcome"]
        totals[outcome] = totals.get(outcome, 0) + int(value)
    refused = sum(v for k, v in totals.items() if k not in ("accepted", "ignored", "duplicate"))
    if refused:
        totals["refused"] = refused
    return totals


@dataclass(frozen=True)
class Spend:
    """LLM spend of one repository (a plan's cost counted on its last active day)."""

    repo: str
    today_usd: float
    week_usd: float
    plans_today: int
    plans_week: int


def spend(plans: Iterable[PlanSummary], *, now: datetime) -> tuple[Spend, ...]:
    """Spend per repository today (UTC) and over the last 7 days, most expensive first.

    The plan state records a plan's total cost, not when each model call was made, so a
    plan's whole cost counts on the day of its last activity.
    """
    start_of_day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    week_ago = now - timedelta(days=7)
    rows: dict[str, list[float]] = {}
    for plan in plans:
        at = plan.last_activity
        if at is None or at < week_ago:
            continue
        row = rows.setdefault(plan.repo, [0.0, 0.0, 0, 0])
        row[1] += plan.cost_usd
        row[3] += 1
        if at >= start_of_day:
            row[0] += plan.cost_usd
            row[2] += 1
    found = (Spend(repo, round(r[0], 4), round(r[1], 4), int(r[2]), int(r[3])) for repo, r in rows.items())
    return tuple(sorted(found, key=lambda s: (-s.week_usd, s.repo)))


@dataclass(frozen=True)
class Installation:
    """An installation the cached plans came through, and what is known of its rate limit."""

    id: int | None
    repos: tuple[str, ...]
    plans: int
    rate_limit: str
    paused: str


@dataclass(frozen=True)
class Limits:
    """What this process knows of one installation's rate limits (from its GitHub answers)."""

    remaining: int | None = None
    limit: int | None = None
    seen_ago_s: float | None = None
    paused_for_s: float = 0.0
    pauses: int = 0
    paused_total_s: float = 0.0
    created_hour: int | None = None
    """Creations (comments, check runs, pull requests…) this process made in the last hour."""
    created_limit: int = 500


def describe_limits(limits: Limits | None) -> tuple[str, str]:
    """(the rate limit, the pauses) in words, for one installation."""
    if limits is None:
        return "not seen by this process", "none"
    quota = "not seen by this process"
    if limits.remaining is not None and limits.limit is not None and limits.seen_ago_s is not None:
        quota = f"{limits.remaining:,} of {limits.limit:,} left ({_ago(limits.seen_ago_s)})"
    if limits.created_hour is not None:
        made = f"{limits.created_hour:,} of {limits.created_limit:,} creations in the last hour"
        quota = made if quota == "not seen by this process" else f"{quota}; {made}"
    paused = "none"
    if limits.pauses:
        paused = f"{limits.pauses} pause(s), {limits.paused_total_s:.0f} s in all"
    if limits.paused_for_s > 0:
        paused = f"paused now, {limits.paused_for_s:.0f} s left; " + paused
    return quota, paused


def _ago(seconds: float) -> str:
    return "just now" if seconds < 60 else f"{seconds / 60:.0f} min ago"


def installations(
    rows: Iterable[tuple[str, int | None]], known: Mapping[int, Limits] | None = None
) -> tuple[Installation, ...]:
    """(repo, installation id) of each cached plan → installations, with what this process
    knows of their rate limits from GitHub's answers (`known`, by installation id)."""
    found: dict[int | None, dict[str, int]] = {}
    for repo, inst in rows:
        repos = found.setdefault(inst, {})
        repos[repo] = repos.get(repo, 0) + 1
    return tuple(
        Installation(
            id=inst,
            repos=tuple(sorted(repos)),
            plans=sum(repos.values()),
            rate_limit=describe_limits((known or {}).get(inst) if inst is not None else None)[0],
            paused=describe_limits((known or {}).get(inst) if inst is not None else None)[1],
        )
        for inst, repos in sorted(found.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    )
