"""The status page's signed-in sessions: signing out ends a session in every process.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "status_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_status_sessions_expires_at", "status_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_status_sessions_expires_at", table_name="status_sessions")
    op.drop_table("status_sessions")
