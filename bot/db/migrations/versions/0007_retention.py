"""Retention: a waiting job's body in a table of its own, and delivery records indexed by the time
they were received.

- `job_bodies`: a webhook job's body (~10 KB) no longer sits in the job's row, which every
  claim, heartbeat and failure rewrites; it is removed when the job completes. The bodies of
  jobs not yet done move there; those of done jobs are dropped (nothing reads them). The
  `jobs.body` column stays, empty and unused (dropping it would copy the whole table on SQLite).
- `ix_deliveries_received_at`: retention removes the oldest records first, and the status page
  lists the newest, without reading the whole table.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_bodies",
        sa.Column("job_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("body", sa.Text, nullable=False),
    )
    op.execute(
        "INSERT INTO job_bodies (job_id, body) SELECT id, body FROM jobs "
        "WHERE body IS NOT NULL AND status <> 'done'"
    )
    op.execute("UPDATE jobs SET body = NULL WHERE body IS NOT NULL")
    op.create_index("ix_deliveries_received_at", "deliveries", ["received_at"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_received_at", table_name="deliveries")
    op.execute("UPDATE jobs SET body = (SELECT body FROM job_bodies WHERE job_bodies.job_id = jobs.id)")
    op.drop_table("job_bodies")
