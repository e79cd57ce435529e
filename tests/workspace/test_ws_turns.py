"""The worktree lock's turns: adds (which a story or a merge waits for) before removals (which
nothing waits for), each kind in its order, and a cancelled waiter never leaves it stuck."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import bot.workspace.worktree as worktree_module
from bot.workspace import Mirror, add_worktree, remove_worktree
from bot.workspace.turns import TurnLock


async def _turns(lock: TurnLock, plan: list[tuple[str, bool]]) -> list[str]:
    """While the lock is held, queue `plan`'s holders (name, urgent) in that order; their turns."""
    order: list[str] = []

    async def hold(name: str, urgent: bool) -> None:
        if urgent:
            async with lock:
                order.append(name)
        else:
            async with lock.when_free():
                order.append(name)

    async with lock:
        tasks = []
        for name, urgent in plan:
            tasks.append(asyncio.ensure_future(hold(name, urgent)))
            await asyncio.sleep(0)  # queued in this order
    await asyncio.gather(*tasks)
    assert not lock.locked()
    return order


async def test_urgent_holders_go_before_background_ones_each_in_their_order() -> None:
    plan = [("remove-1", False), ("remove-2", False), ("add-1", True), ("remove-3", False), ("add-2", True)]
    assert await _turns(TurnLock(), plan) == ["add-1", "add-2", "remove-1", "remove-2", "remove-3"]


@pytest.mark.parametrize("urgent", [True, False])
async def test_a_cancelled_waiter_leaves_the_lock_to_the_next(urgent: bool) -> None:
    lock = TurnLock()
    got: list[str] = []

    async def hold(name: str) -> None:
        async with lock if urgent else lock.when_free():
            got.append(name)

    async with lock:
        gone = asyncio.ensure_future(hold("cancelled"))
        kept = asyncio.ensure_future(hold("kept"))
        await asyncio.sleep(0)
        gone.cancel()
    await asyncio.gather(gone, kept, return_exceptions=True)
    assert got == ["kept"] and not lock.locked()


async def test_a_waiter_cancelled_as_the_lock_is_handed_to_it_passes_it_on() -> None:
    lock = TurnLock()
    got: list[str] = []

    async def hold(name: str) -> None:
        async with lock:
            got.append(name)

    await lock.__aenter__()
    first = asyncio.ensure_future(hold("first"))
    second = asyncio.ensure_future(hold("second"))
    await asyncio.sleep(0)
    await lock.__aexit__(None, None, None)  # handed to `first`, which has not run yet
    first.cancel()
    await asyncio.gather(first, second, return_exceptions=True)
    assert first.cancelled() and got == ["second"] and not lock.locked()


async def test_a_worktree_add_goes_before_the_removals_queued_ahead_of_it(
    mirror: Mirror, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's merge adds its worktree while its stories' worktrees are being removed: the
    add, which the run waits for, is not queued behind them."""
    done = [
        await add_worktree(mirror, branch=f"bot/s{n}", base_ref="origin/main", path=tmp_path / f"s{n}")
        for n in range(3)
    ]
    order: list[str] = []
    original = worktree_module.run_git

    async def run_git(args: list[str], **kwargs: Any) -> Any:
        if "worktree" in args:
            verb = args[args.index("worktree") + 1]
            order.append(f"{verb} {Path(next(a for a in args if a.startswith(str(tmp_path)))).name}")
        return await original(args, **kwargs)

    removing = worktree_module.remove_tree  # a removal starts no git: its files go in a thread

    def remove_tree(path: Path) -> None:
        if path.parent == tmp_path:
            order.append(f"remove {path.name}")
        removing(path)

    monkeypatch.setattr(worktree_module, "run_git", run_git)
    monkeypatch.setattr("bot.workspace.mirror.run_git", run_git)
    monkeypatch.setattr(worktree_module, "remove_tree", remove_tree)
    async with mirror.worktree_lock:  # the lock busy while they queue up, removals first
        removals = [asyncio.ensure_future(remove_worktree(wt)) for wt in done]
        await asyncio.sleep(0.05)
        merge = asyncio.ensure_future(
            add_worktree(mirror, branch="bot/batch", base_ref="origin/main", path=tmp_path / "batch")
        )
        await asyncio.sleep(0.05)
    batch = await merge
    await asyncio.gather(*removals)
    assert order[0] == "add batch" and sorted(order[1:]) == ["remove s0", "remove s1", "remove s2"]
    assert (batch.path / "README.md").exists() and not any(wt.path.exists() for wt in done)
