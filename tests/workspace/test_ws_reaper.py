"""Process groups are recorded while they run, with the bot process that started them; a crashed
bot's leftovers are killed at the next start, a live bot's (a sibling on the same data dir) never."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
from pathlib import Path

from bot.sandbox.confinement import Sandbox
from bot.sandbox.process import run_process, scrubbed_env
from bot.sandbox.reaper import ProcessRegistry, start_time
from tests.processes import dead_identity, identity_of, live_with_arg, unique_sleep
from tests.support import bwrap_marker


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


@bwrap_marker()
async def test_a_confined_process_is_not_recorded_it_dies_with_the_bot(tmp_path: Path) -> None:
    """A confined process dies with the bot whatever kills it (bubblewrap's `--die-with-parent`
    and its own PID namespace: `tests/e2e/test_e2e_orphans.py`): no record is written for it,
    which would be a file made and removed at every agent's, gate's and setup's start."""
    registry = ProcessRegistry(tmp_path / "processes")
    worktree, home = tmp_path / "wt", tmp_path / "home"
    worktree.mkdir()
    home.mkdir()
    confinement = Sandbox(registry=registry).confinement(worktree=worktree, home=home)
    assert confinement.confined and confinement.registry is None
    seen: list[list[Path]] = []

    async def look() -> None:
        while True:
            seen.append(list(registry.root.glob("*.json")) if registry.root.is_dir() else [])
            await asyncio.sleep(0.01)

    looking = asyncio.create_task(look())
    done = await run_process(
        "sleep 0.3", cwd=worktree, env=scrubbed_env(home=home), timeout=30, confinement=confinement
    )
    looking.cancel()
    assert done.exit_code == 0 and len(seen) > 10 and not any(seen)


def test_leftovers_of_a_crashed_bot_are_killed_and_a_reused_pid_is_spared(tmp_path: Path) -> None:
    root = tmp_path / "processes"
    duration = unique_sleep()
    orphan = subprocess.Popen(["sleep", duration], start_new_session=True)  # what a dead bot left running
    recorded(root, orphan.pid, owner=dead_identity())
    legacy = subprocess.Popen(["sleep", unique_sleep()], start_new_session=True)
    started = start_time(legacy.pid)
    assert started is not None
    # Written before records named their process (one bot process per data dir): a dead one's.
    (root / f"{legacy.pid}.json").write_text(f'{{"pgid": {legacy.pid}, "start": {started}}}')
    bystander = subprocess.Popen(["sleep", unique_sleep()], start_new_session=True)
    # A record whose pid now belongs to another process (started later) must not kill it.
    started = start_time(bystander.pid)
    assert started is not None
    (root / f"{bystander.pid}.json").write_text(
        json.dumps({"pgid": bystander.pid, "start": started - 1, "owner": dead_identity()})
    )
    try:
        assert ProcessRegistry(root).kill_leftovers() == 2
        assert orphan.wait(timeout=5) < 0 and legacy.wait(timeout=5) < 0
        assert bystander.poll() is None
        assert list(root.glob("*.json")) == []
    finally:
        stop(orphan, legacy, bystander)


def test_a_live_sibling_processs_groups_are_spared_until_it_dies(tmp_path: Path) -> None:
    """Two bot processes on one host, one data dir: the one starting kills only a dead one's groups."""
    root = tmp_path / "processes"
    sibling = subprocess.Popen(["sleep", unique_sleep()])  # stands for a live worker process
    agent = subprocess.Popen(["sleep", unique_sleep()], start_new_session=True)  # the agent it runs
    recorded(root, agent.pid, owner=identity_of(sibling.pid))  # as the sibling's registry writes it
    own = subprocess.Popen(["sleep", unique_sleep()], start_new_session=True)
    mine = ProcessRegistry(root)
    mine.record(own.pid)
    try:
        assert mine.kill_leftovers() == 0
        assert agent.poll() is None and own.poll() is None
        assert sorted(p.name for p in root.glob("*.json")) == sorted([f"{agent.pid}.json", f"{own.pid}.json"])
        sibling.kill()  # now the sibling dies (SIGKILL): its agent is a leftover
        sibling.wait()
        assert mine.kill_leftovers() == 1
        assert agent.wait(timeout=5) < 0
        assert own.poll() is None
        assert [p.name for p in root.glob("*.json")] == [f"{own.pid}.json"]
    finally:
        stop(sibling, agent, own)


def test_another_hosts_records_are_never_acted_on(tmp_path: Path) -> None:
    """A group recorded on another host is not ours to kill; its record goes once nothing here matches it."""
    root = tmp_path / "processes"
    group = subprocess.Popen(["sleep", unique_sleep()], start_new_session=True)
    started = start_time(group.pid)
    assert started is not None
    elsewhere = f"{socket.gethostname()}-other:{os.getpid()}:1"
    root.mkdir()
    (root / f"{group.pid}.json").write_text(
        json.dumps({"pgid": group.pid, "start": started, "owner": elsewhere})
    )
    (root / "999999999.json").write_text(json.dumps({"pgid": 999999999, "start": 5, "owner": elsewhere}))
    try:
        assert ProcessRegistry(root).kill_leftovers() == 0
        assert group.poll() is None
        assert [p.name for p in root.glob("*.json")] == [f"{group.pid}.json"]
    finally:
        stop(group)


def recorded(root: Path, pgid: int, *, owner: str) -> None:
    """What `ProcessRegistry(root, owner=owner).record(pgid)` writes."""
    ProcessRegistry(root, owner=owner).record(pgid)
    assert json.loads((root / f"{pgid}.json").read_text())["owner"] == owner


def stop(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_kill_leftovers_returns_once_what_it_killed_is_dead(tmp_path: Path) -> None:
    """A SIGKILL is delivered at once, but the process dies a moment later: the job a dead worker
    held must not run again while its agent still touches the worktree (right after `killpg`,
    the leader was still running in 44 of 50 tries here)."""
    for _ in range(20):
        agent = subprocess.Popen(["sleep", unique_sleep()], start_new_session=True)
        ProcessRegistry(tmp_path, owner=dead_identity()).record(agent.pid)
        try:
            assert ProcessRegistry(tmp_path).kill_leftovers() == 1
            assert start_time(agent.pid) is None, "kill_leftovers returned while its kill still ran"
        finally:
            agent.kill()
            agent.wait()
