"""A lease keeps how far an unfinished walk got: the redelivery look's cursor into GitHub's list.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("leases") as batch:
        batch.add_column(sa.Column("cursor", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("leases") as batch:
        batch.drop_column("cursor")
