"""A lock whose holders take turns by urgency: what someone waits for goes before what no one does.

A mirror's worktree lock (`Mirror.worktree_lock`) is wanted by worktree adds, on the way of every
story and every batch merge, and by removals, which nothing waits for (a story's worktree goes in
the background while its batch merges). First come, first served put a merge's add behind the
removals its stories had just started, and the whole run waited for them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator


class TurnLock:
    """`async with lock:` holds it as soon as it is free; `async with lock.when_free():` holds it
    only when no one waits with `async with lock:` (they go first, each queue in its order). The
    lock is handed from holder to waiter, never left free while someone waits."""

    def __init__(self) -> None:
        self._held = False
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._later: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        return self._held

    async def __aenter__(self) -> None:
        await self._acquire(self._urgent)

    async def __aexit__(self, *_: object) -> None:
        self._release()

    @contextlib.asynccontextmanager
    async def when_free(self) -> AsyncIterator[None]:
        """Hold it after everyone who waits for it with `async with lock:`."""
        await self._acquire(self._later)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, queue: deque[asyncio.Future[None]]) -> None:
        if not self._held:
            self._held = True
            return
        waiter = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # handed over as the cancel came: pass it on
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
            raise

    def _release(self) -> None:
        for queue in (self._urgent, self._later):
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    waiter.set_result(None)  # still held: by that waiter now
                    return
        self._held = False
