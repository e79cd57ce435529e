"""Work started ahead and let go (`bot.tasks.forget`): stopped when it still runs, and its error,
when it ended with one, never reported as lost."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from bot.tasks import forget


async def _fails() -> None:
    raise RuntimeError("not wanted anyway")


async def _reported(let_go: bool) -> list[dict[str, Any]]:
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    task = asyncio.ensure_future(_fails())
    await asyncio.sleep(0)
    assert task.done()
    if let_go:
        forget(task)
    del task
    gc.collect()
    loop.set_exception_handler(None)
    return reported


async def test_a_failed_task_let_go_is_not_reported_as_never_retrieved() -> None:
    assert [c["message"] for c in await _reported(let_go=False)] == ["Task exception was never retrieved"]
    assert await _reported(let_go=True) == []


async def test_a_running_task_let_go_is_stopped() -> None:
    started = asyncio.Event()

    async def waits() -> None:
        started.set()
        await asyncio.sleep(3600)

    task = asyncio.ensure_future(waits())
    await started.wait()
    forget(task)
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
