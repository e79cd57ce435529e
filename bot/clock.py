"""The time: one `utcnow` for the queue, the plan store, the engine and the front doors."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Something that tells the time: `utcnow`, or a test's fake."""


def utcnow() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)
