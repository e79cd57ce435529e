"""SQLAlchemy tables. Schema changes go through Alembic migrations in `migrations/`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, Index, Integer, String, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Declarative base of our tables."""


class Delivery(Base):
    """One webhook delivery, keyed by `X-GitHub-Delivery` (redeliveries reuse it)."""

    __tablename__ = "deliveries"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64), nullable=True)
    target: Mapped[str | None] = mapped_column(String(300), nullable=True)
    outcome: Mapped[str] = mapped_column(String(32))
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_deliveries_received_at", "received_at"),)


class Job(Base):
    """A unit of work. Jobs of one `group_key` (one issue) never run at the same time."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(64))
    group_key: Mapped[str] = mapped_column(String(300))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    delivery_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=5)
    run_after: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    locked_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_jobs_status_run_after", "status", "run_after"),
        Index("ix_jobs_group_status", "group_key", "status"),
        # At most one running job per group, enforced by the database itself so that
        # two workers (or processes) can never run jobs of one issue at once.
        Index(
            "uq_jobs_one_running_per_group",
            "group_key",
            unique=True,
            sqlite_where=text("status = 'running'"),
            postgresql_where=text("status = 'running'"),
        ),
    )


class JobBody(Base):
    """A waiting job's raw input, kept verbatim: a webhook delivery's body (cheaper than
    re-encoding it into `payload`). Beside the job, not in its row: a claim, heartbeat or failure
    rewrites the job's row, which a ~10 KB body would spread over several pages (and on SQLite
    keep a page to itself once cleared). Removed when the job completes; a dead job keeps it."""

    __tablename__ = "job_bodies"

    job_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    body: Mapped[str] = mapped_column(Text)


class PlanRecord(Base):
    """Cache of a plan's state; rebuilt from the plan comment's hidden block when lost."""

    __tablename__ = "plans"

    repo: Mapped[str] = mapped_column(String(200), primary_key=True)
    issue_number: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(String(32))
    installation_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    plan_comment_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    reactions_etag: Mapped[str | None] = mapped_column(String(200), nullable=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """The plan state's `version`: writes are `UPDATE … WHERE version = <what the writer read>`."""


class Lease(Base):
    """A named lease: which process does a periodic task now (one at a time across processes)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    mark: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    """How far the task got (the redelivery look: where its next look reads back to)."""
    cursor: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """Where an unfinished walk goes on (the redelivery look: GitHub's cursor of the next page)."""


class StatusSession(Base):
    """A browser signed in to the status page, until it signs out or `expires_at` passes."""

    __tablename__ = "status_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """SHA-256 (hex) of the session id its cookie carries: the table holds no usable cookie."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)


class ScheduleRecord(Base):
    """One schedule of one repository (`schedules:` in its config): when it runs next, how it last ran.

    Rows follow the config (`bot.db.schedules.sync`); a schedule removed from it loses its row."""

    __tablename__ = "schedules"

    repo: Mapped[str] = mapped_column(String(200), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    installation_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cron: Mapped[str] = mapped_column(String(100))
    """The 5-field expression it runs at (a phrase's, with the spread fixed)."""
    timezone: Mapped[str] = mapped_column(String(64))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    next_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True, index=True)
    """When it runs next (None: disabled). Firing moves it on, in the transaction that queues the run."""
    last_slot: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    """The time the last run was due."""
    last_issue: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """The issue the last run opened (a skipped run keeps the open one)."""
    last_outcome: Mapped[str | None] = mapped_column(String(32), nullable=True)
    """opened, skipped, closed-older, failed."""
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    runs: Mapped[int] = mapped_column(Integer, default=0)
    skips: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
