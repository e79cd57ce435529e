"""Alembic environment: runs on the connection handed over by `Database.migrate`."""

from __future__ import annotations

from alembic import context

from bot.db.models import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - we always pass a connection
    raise RuntimeError("run migrations through `plan-cascade migrate`")

context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
