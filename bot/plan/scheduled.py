"""Which schedule opened a plan's issue (`schedules:` in the config), shown in its plan comment."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class ScheduledBy(BaseModel):
    """The schedule that opened the issue, and when it runs next (as known when the plan was made)."""

    name: str = Field(description="The schedule's name in `schedules:`.")
    slot: datetime = Field(description="The time this run was due.")
    next_at: datetime | None = Field(default=None, description="When the schedule runs next (None: unknown).")
    timezone: str = Field(default="UTC", description="The schedule's time zone, for showing its times.")
