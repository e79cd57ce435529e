"""Schedules: each repository's `schedules:` entries, when each runs next and how it last ran.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("repo", sa.String(200), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("installation_id", sa.BigInteger, nullable=True),
        sa.Column("cron", sa.String(100), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("next_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_slot", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_issue", sa.Integer, nullable=True),
        sa.Column("last_outcome", sa.String(32), nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
        sa.Column("skips", sa.Integer, nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_schedules_next_at", "schedules", ["next_at"])


def downgrade() -> None:
    op.drop_index("ix_schedules_next_at", table_name="schedules")
    op.drop_table("schedules")
