"""Process groups are recorded while they run, and a crashed bot's leftovers are killed at the next start."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from bot.workspace.process import run_process, scrubbed_env
from bot.workspace.reaper import ProcessRegistry, start_time
from bot.workspace.sandbox import Sandbox
from tests.processes import live_with_arg, unique_sleep


async def test_run_process_records_its_group_while_it_runs(tmp_path: Path) -> None:
    registry = ProcessRegistry(tmp_path / "processes")
    confinement = Sandbox(mode="off", registry=registry).confinement(worktree=tmp_path, home=tmp_path)
    duration = unique_sleep()
    task = asyncio.create_task(
        run_process(
            f"sleep {duration}",
            cwd=tmp_path,
            env=scrubbed_env(home=tmp_path),
            timeout=30,
            confinement=confinement,
        )
    )
    for _ in range(200):
        if list(registry.root.glob("*.json")):
            break
        await asyncio.sleep(0.01)
    (record,) = registry.root.glob("*.json")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not record.exists() and live_with_arg(duration) == []


def test_leftovers_of_a_crashed_bot_are_killed_and_a_reused_pid_is_spared(tmp_path: Path) -> None:
    registry = ProcessRegistry(tmp_path / "processes")
    duration = unique_sleep()
    orphan = subprocess.Popen(["sleep", duration], start_new_session=True)  # what a dead bot left running
    registry.record(orphan.pid)
    bystander = subprocess.Popen(["sleep", unique_sleep()], start_new_session=True)
    # A record whose pid now belongs to another process (started later) must not kill it.
    started = start_time(bystander.pid)
    assert started is not None
    (registry.root / f"{bystander.pid}.json").write_text(
        f'{{"pgid": {bystander.pid}, "start": {started - 1}}}'
    )
    try:
        assert registry.kill_leftovers() == 1
        assert orphan.wait(timeout=5) < 0
        assert bystander.poll() is None
        assert list(registry.root.glob("*.json")) == []
    finally:
        for proc in (orphan, bystander):
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
            proc.wait()
