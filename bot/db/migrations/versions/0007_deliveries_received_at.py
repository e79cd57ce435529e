"""Index delivery records by the time they were received: retention removes the oldest first, and
the status page lists the newest, without reading the whole table.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_deliveries_received_at", "deliveries", ["received_at"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_received_at", table_name="deliveries")
