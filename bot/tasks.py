"""Work started ahead in the background, and let go when it turns out not to be wanted."""

from __future__ import annotations

import asyncio
from typing import Any


def forget(task: asyncio.Future[Any]) -> None:
    """Stop `task` (no longer wanted) and never raise its error: one that already ended with an
    error has it read, so asyncio does not report it as never retrieved."""
    task.cancel()
    if task.done() and not task.cancelled():
        task.exception()
