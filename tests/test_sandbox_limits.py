"""Confined code cannot exhaust the host (issue 37, item 4): processes, open files, memory, /tmp.

The attacker is a gate, setup command or agent: the repository's code, in the sandbox the
operator's settings make (`PLAN_CASCADE_SANDBOX_*`), through the production `run_process`. Each
test tries to take more than the setting gives and counts what it got. Processes are counted by a
cgroup when the server can make one, and by `RLIMIT_NPROC` otherwise, which the kernel does not
enforce for root: a root server without cgroups skips that test (the threat model says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import resource
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.errors import WorkspaceError
from bot.sandbox.cgroups import removals_settled
from bot.sandbox.limits import LimitGate, Limits
from bot.sandbox.process import ProcessResult, run_process, scrubbed_env
from tests.support import CountingExecutor, audit_threads, bwrap_marker, make_settings

pytestmark = bwrap_marker()

FORK_BOMB = """
import os, time
started = 0
for _ in range(150):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    started += 1
print("STARTED", started, flush=True)
"""
OPEN_FILES = """
held = []
try:
    for _ in range(5000):
        held.append(open("/dev/null"))
except OSError:
    pass
print("OPENED", len(held), flush=True)
"""
MEMORY = """
held = []
for _ in range(30):
    held.append(bytearray(10 * 1024 * 1024))  # written: the pages are really used
    print("MB", 10 * len(held), flush=True)
print("ALLOCATED", flush=True)
"""


def policy(tmp_path: Path, **settings: str):  # type: ignore[no-untyped-def]
    return make_settings(tmp_path, **settings).sandbox_policy()


async def confined_run(sandbox, tmp_path: Path, argv: list[str]) -> ProcessResult:  # type: ignore[no-untyped-def]
    worktree, home = tmp_path / "wt", tmp_path / "home"
    worktree.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    jail = sandbox.confinement(worktree=worktree, home=home)
    assert jail.confined
    return await run_process(argv, cwd=worktree, env=scrubbed_env(home=home), timeout=120, confinement=jail)


def machine_counts(controller: str) -> bool:
    """Whether this machine lets the server make a cgroup with `controller` (for skipping where the
    defence cannot exist; code that has no cgroups at all is tested, and must fail)."""
    try:
        from bot.sandbox.cgroups import find_cgroups
    except ImportError:
        return True
    found = find_cgroups("auto")
    return found is not None and controller in found.counts


def number(pattern: str, output: str) -> int:
    found = re.findall(pattern, output)
    assert found, output
    return int(found[-1])


async def test_a_fork_bomb_gets_no_more_processes_than_the_setting(tmp_path: Path) -> None:
    sandbox = policy(tmp_path, PLAN_CASCADE_SANDBOX_PROCESSES="40")
    if os.geteuid() == 0 and not machine_counts("pids"):
        pytest.skip("a server running as root limits processes with a pids cgroup, and none can be made here")
    done = await confined_run(sandbox, tmp_path, ["python3", "-c", FORK_BOMB])
    assert number(r"STARTED (\d+)", done.output) < 40, done.output


async def test_open_files_stop_at_the_setting(tmp_path: Path) -> None:
    sandbox = policy(tmp_path, PLAN_CASCADE_SANDBOX_OPEN_FILES="200")
    done = await confined_run(sandbox, tmp_path, ["python3", "-c", OPEN_FILES])
    assert number(r"OPENED (\d+)", done.output) < 200, done.output
    raised = await confined_run(sandbox, tmp_path, ["bash", "-c", "ulimit -n 5000 && echo RAISED"])
    assert "RAISED" not in raised.output, "the hard limit is the setting too: it cannot be raised"


async def test_memory_stops_at_the_setting(tmp_path: Path) -> None:
    sandbox = policy(tmp_path, PLAN_CASCADE_SANDBOX_MEMORY_MB="100")
    if not machine_counts("memory"):
        pytest.skip("memory is limited by a memory cgroup, and none can be made here")
    done = await confined_run(sandbox, tmp_path, ["python3", "-c", MEMORY])
    assert "ALLOCATED" not in done.output, done.output
    assert number(r"MB (\d+)", done.output) <= 100, done.output


async def test_tmp_is_memory_and_holds_no_more_than_the_setting(tmp_path: Path) -> None:
    """/tmp is a tmpfs: memory. It is sized by the memory setting (a memory cgroup, where there
    is one, counts it too: here there is none, the size alone holds)."""
    from bot.sandbox.confinement import bwrap_sizes_tmpfs

    if not bwrap_sizes_tmpfs("bwrap"):
        pytest.skip("this bubblewrap cannot size a tmpfs (--size came in bubblewrap 0.7)")
    sandbox = policy(tmp_path, PLAN_CASCADE_SANDBOX_MEMORY_MB="64", PLAN_CASCADE_SANDBOX_CGROUP="off")
    fill = "head -c 200M /dev/zero > /tmp/fill; stat -c 'SIZE %s' /tmp/fill"
    done = await confined_run(sandbox, tmp_path, ["bash", "-c", fill])
    assert number(r"SIZE (\d+)", done.output) <= 64 * 1024 * 1024, done.output


async def test_each_cgroup_goes_with_its_process(tmp_path: Path) -> None:
    sandbox = policy(tmp_path)
    if not machine_counts("pids"):
        pytest.skip("no cgroup can be made here")
    parents = set(sandbox.limits.cgroups.parents.values())
    before = {p: {c.name for c in p.iterdir() if c.name.startswith("plan-cascade-")} for p in parents}
    done = await confined_run(sandbox, tmp_path, ["bash", "-c", "sleep 30 & sleep 30 & echo started"])
    assert done.exit_code == 0, done.output  # inside one: tests/test_sandbox_cgroup_join.py
    await removals_settled()  # an empty cgroup is removed in the background
    after = {p: {c.name for c in p.iterdir() if c.name.startswith("plan-cascade-")} for p in parents}
    assert after == before, "a cgroup was left behind"


def test_limits_are_settings_with_defaults(tmp_path: Path) -> None:
    limits = make_settings(tmp_path).sandbox_limits(cgroups=False)
    assert (limits.processes, limits.open_files) == (1024, 8192)
    assert limits.memory == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    off = make_settings(
        tmp_path,
        PLAN_CASCADE_SANDBOX_PROCESSES="0",
        PLAN_CASCADE_SANDBOX_OPEN_FILES="0",
        PLAN_CASCADE_SANDBOX_MEMORY_MB="0",
    ).sandbox_limits(cgroups=False)
    assert not off.any
    assert make_settings(tmp_path, PLAN_CASCADE_SANDBOX_CGROUP="off").sandbox_policy().limits.cgroups is None
    for bad in ({"PLAN_CASCADE_SANDBOX_PROCESSES": "-1"}, {"PLAN_CASCADE_SANDBOX_CGROUP": "relative/path"}):
        with pytest.raises(ValueError, match="PLAN_CASCADE_SANDBOX"):
            make_settings(tmp_path, **bad)


def test_cgroups_a_dead_server_left_are_swept_at_start_and_a_live_ones_kept(tmp_path: Path) -> None:
    """A server killed with SIGKILL leaves its confined processes' cgroups (their processes died
    with it): the next start removes them, never those of another bot process still running."""
    import subprocess

    from bot.sandbox.cgroups import find_cgroups

    cgroups = find_cgroups("auto")
    if cgroups is None:
        pytest.skip("no cgroup can be made here")
    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    parent = next(iter(cgroups.parents.values()))
    left, live = parent / f"plan-cascade-{int(dead.stdout)}-1", parent / f"plan-cascade-{os.getpid()}-999999"
    left.mkdir()
    live.mkdir()
    try:
        assert cgroups.sweep() >= 1
        assert not left.exists() and live.exists()
    finally:
        for folder in (left, live):
            if folder.exists():
                folder.rmdir()


def test_a_delegated_cgroup_v2_folder_gets_a_group_with_both_limits(tmp_path: Path) -> None:
    """The files of cgroup v2 (a folder the operator delegated, `PLAN_CASCADE_SANDBOX_CGROUP`),
    laid out in a plain folder: which file each limit goes to."""
    from bot.sandbox.cgroups import find_cgroups

    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    cgroups = find_cgroups(str(tmp_path))
    assert cgroups is not None and cgroups.version == "v2" and cgroups.counts == ("pids", "memory")
    group = cgroups.make(processes=40, memory=64 * 1024 * 1024)
    assert group is not None and len(group.folders) == 1
    assert (group.folders[0] / "pids.max").read_text() == "40"
    assert (group.folders[0] / "memory.max").read_text() == str(64 * 1024 * 1024)
    assert find_cgroups("off") is None


NOT_ROOT = """
import asyncio, json, sys
from pathlib import Path
from bot.sandbox.process import run_process, scrubbed_env
from tests.support import make_settings

top = Path(sys.argv[1])
for name in ("wt", "home"):
    (top / name).mkdir()
settings = make_settings(top, PLAN_CASCADE_SANDBOX_PROCESSES="30", PLAN_CASCADE_SANDBOX_OPEN_FILES="200")
jail = settings.sandbox_policy().confinement(worktree=top / "wt", home=top / "home")
env = scrubbed_env(home=top / "home")
async def main():
    for script in sys.argv[2:]:
        argv = ["python3", "-c", script]
        done = await run_process(argv, cwd=top / "wt", env=env, timeout=60, confinement=jail)
        print(json.dumps(done.output))
asyncio.run(main())
"""


def test_a_server_that_is_not_root_limits_processes_per_sandbox_without_cgroups() -> None:
    """Run as uid 65534 (no cgroup can be made): `RLIMIT_NPROC`, set once the sandbox's user
    namespace exists, counts that sandbox alone (not the 40 other processes of the server's user)
    and stops the fork bomb; open files stop too."""
    import json
    import subprocess
    import sys

    from tests.support import run_as_server, server_folder

    with server_folder("plan-cascade-limits-") as top:
        busy = subprocess.Popen(  # the server's own processes: they do not count against a sandbox
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
                "sleep 30 & sleep 30 & wait",
            ]
            if os.geteuid() == 0
            else ["sh", "-c", "sleep 30 & sleep 30 & wait"]
        )
        try:
            done = run_as_server([sys.executable, "-c", NOT_ROOT, str(top), FORK_BOMB, OPEN_FILES], cwd=top)
        finally:
            busy.kill()
            busy.wait()
    assert done.returncode == 0, done.stderr[-2000:]
    forks, files = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    assert 20 < number(r"STARTED (\d+)", forks) < 30, forks
    assert number(r"OPENED (\d+)", files) < 200, files


class FakeBubblewrap:
    """The child's side of a `LimitGate`, held as bubblewrap holds it: it says on the info fd which
    process is the sandbox's first, closes it, and waits on the block fd (read here without waiting)."""

    def __init__(self, gate: LimitGate) -> None:
        info, block = gate.child_fds
        self.info, self.block = os.dup(info), os.dup(block)
        os.set_blocking(self.block, False)
        gate.started()

    def say(self, words: bytes, *, done: bool = True) -> None:
        os.write(self.info, words)
        if done:
            os.close(self.info)

    def released(self) -> bytes:
        try:
            return os.read(self.block, 1)
        except BlockingIOError:
            return b""


@contextlib.asynccontextmanager
async def sandbox_process() -> AsyncIterator[int]:
    """A process standing in for a sandbox's first one (its pid): killed on the way out."""
    proc = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        yield proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


def child_pid(pid: int) -> bytes:
    return json.dumps({"child-pid": pid, "cgroup-namespace": 4026531835}).encode()


async def test_without_cgroups_the_limits_are_set_on_the_loop_then_the_sandbox_is_let_go() -> None:
    """No cgroup to make: the limits are a few `prlimit` calls, made on the event loop's own thread
    (handing them to a thread and back costs more, under load); then, not before, the gate opens."""
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    gate = LimitGate()
    bwrap = FakeBubblewrap(gate)
    async with sandbox_process() as pid:
        bwrap.say(child_pid(pid))
        with audit_threads("resource.prlimit", lambda args: args[0] == pid) as threads:
            assert await gate.release(Limits(processes=40, open_files=200)) is None
        assert resource.prlimit(pid, resource.RLIMIT_NOFILE) == (200, 200)
        assert resource.prlimit(pid, resource.RLIMIT_NPROC) == (40, 40)
    gate.close()
    assert threads and set(threads) == {threading.get_ident()}
    assert executor.handed == 0
    assert bwrap.released() == b"1"


async def test_the_gate_waits_for_all_bubblewrap_says_however_it_comes() -> None:
    """Bubblewrap writes its info in pieces, a moment after it started, and closes it: the gate
    reads it to the end before it limits anything."""
    gate = LimitGate()
    bwrap = FakeBubblewrap(gate)
    async with sandbox_process() as pid:
        releasing = asyncio.ensure_future(gate.release(Limits(open_files=200)))
        await asyncio.sleep(0.05)
        bwrap.say(child_pid(pid)[:9], done=False)
        await asyncio.sleep(0.05)
        assert not releasing.done() and bwrap.released() == b""
        bwrap.say(child_pid(pid)[9:])
        await releasing
        assert resource.prlimit(pid, resource.RLIMIT_NOFILE) == (200, 200)
    gate.close()
    assert bwrap.released() == b"1"


async def test_a_gate_that_cannot_limit_its_process_lets_nothing_run() -> None:
    """Bubblewrap failed before making the sandbox (it said nothing): nothing to release. It named
    no process, or one that cannot be limited: WorkspaceError, and the gate stays shut."""
    silent = LimitGate()
    bwrap = FakeBubblewrap(silent)
    bwrap.say(b"")
    assert await silent.release(Limits()) is None
    silent.close()
    assert bwrap.released() == b""
    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()  # reaped: no process has its pid
    for words in (b"{not json", child_pid(gone.pid)):
        gate = LimitGate()
        bwrap = FakeBubblewrap(gate)
        bwrap.say(words)
        with pytest.raises(WorkspaceError):
            await gate.release(Limits(open_files=200))
        gate.close()
        assert bwrap.released() == b"", "the sandbox is never let go"


async def test_a_cgroup_is_made_in_a_thread_with_the_process_inside() -> None:
    """A cgroup to make is file work on the cgroup file system: in a thread, off the loop."""
    from bot.sandbox.cgroups import find_cgroups

    cgroups = find_cgroups("auto")
    if cgroups is None or not cgroups.counts:
        pytest.skip("no cgroup can be made here")
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    gate = LimitGate()
    bwrap = FakeBubblewrap(gate)
    async with sandbox_process() as pid:
        bwrap.say(child_pid(pid))
        group = await gate.release(Limits(processes=40, open_files=200, cgroups=cgroups))
        assert group is not None
        try:
            assert executor.handed == 1
            assert pid in group.pids()
        finally:
            await asyncio.to_thread(group.remove)
    gate.close()
    assert bwrap.released() == b"1"
