"""run_process with real subprocesses: process groups, timeouts, cancellation, capping, env, bwrap."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sandbox import run_process, scrubbed_env
from tests.processes import live_with_arg, unique_sleep
from tests.support import CountingExecutor, audit_threads, bwrap_marker, confined

needs_bwrap = bwrap_marker()


def live_in_group(pgid: int) -> list[int]:
    """Pids of processes in group ``pgid`` that are not zombies (read from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


async def group_gone(pgid: int) -> list[int]:
    """Survivors of group ``pgid`` after up to 2s: SIGKILL is instant, dying takes a moment."""
    for _ in range(100):
        if not (alive := live_in_group(pgid)):
            return alive
        await asyncio.sleep(0.02)
    return live_in_group(pgid)


@pytest.fixture
def pidfile(tmp_path: Path) -> Iterator[Path]:
    """Where a command writes its $$ (its process group id); the group is killed at teardown
    whatever the test's outcome, so a failing test leaves no sleeper behind."""
    path = tmp_path / "pid"
    yield path
    if path.exists() and path.read_text().strip():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(path.read_text()), signal.SIGKILL)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return scrubbed_env(home=home)


async def _read_pid(path: Path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.02)
    raise AssertionError("the command never wrote its pid")


async def test_runs_in_cwd_merges_streams_and_reports_exit_code(tmp_path: Path, env: dict[str, str]) -> None:
    result = await run_process("pwd; echo out; echo err >&2; exit 3", cwd=tmp_path, env=env, timeout=30)
    assert result.exit_code == 3
    assert result.output == f"{tmp_path}\nout\nerr\n"
    assert not result.timed_out and not result.truncated
    assert result.duration_s < 30


async def test_argv_command_is_not_shell_parsed(tmp_path: Path, env: dict[str, str]) -> None:
    result = await run_process(["/bin/echo", "$HOME; rm -rf /"], cwd=tmp_path, env=env, timeout=30)
    assert result.exit_code == 0
    assert result.output == "$HOME; rm -rf /\n"


async def test_timeout_kills_the_whole_group(tmp_path: Path, env: dict[str, str], pidfile: Path) -> None:
    command = f"echo $$ > {pidfile}; sleep 300 & echo started; sleep 300"
    started = time.monotonic()
    result = await run_process(command, cwd=tmp_path, env=env, timeout=1)
    assert time.monotonic() - started < 10
    assert result.timed_out
    assert result.exit_code is None
    assert "started" in result.output
    pgid = int(pidfile.read_text())
    assert await group_gone(pgid) == []


async def test_cancellation_kills_the_whole_group(tmp_path: Path, env: dict[str, str], pidfile: Path) -> None:
    command = f"sleep 300 & echo $$ > {pidfile}; sleep 300"
    task = asyncio.create_task(run_process(command, cwd=tmp_path, env=env, timeout=120))
    pgid = await _read_pid(pidfile)
    assert len(live_in_group(pgid)) >= 2  # bash and its two sleeps are running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Not os.killpg(pgid, 0): zombies waiting for this container's init would still answer it.
    assert await group_gone(pgid) == []


async def test_background_children_do_not_outlive_a_finished_command(
    tmp_path: Path, env: dict[str, str], pidfile: Path
) -> None:
    started = time.monotonic()
    result = await run_process(
        f"echo $$ > {pidfile}; sleep 300 & echo done", cwd=tmp_path, env=env, timeout=60
    )
    assert time.monotonic() - started < 10
    assert result.exit_code == 0 and not result.timed_out
    assert result.output == "done\n"
    assert await group_gone(int(pidfile.read_text())) == []


async def test_a_child_that_left_the_group_cannot_hang_the_call(tmp_path: Path, env: dict[str, str]) -> None:
    duration = unique_sleep()
    started = time.monotonic()
    try:
        result = await run_process(f"setsid sleep {duration} & echo done", cwd=tmp_path, env=env, timeout=60)
        assert time.monotonic() - started < 10
        assert result.exit_code == 0
        assert result.output == "done\n"
    finally:
        for pid in live_with_arg(duration):  # unsandboxed, a setsid child escapes: clean up
            os.kill(pid, 9)


async def test_output_is_capped_to_head_and_tail(tmp_path: Path, env: dict[str, str]) -> None:
    script = "import sys; sys.stdout.write('A' * 1000 + 'B' * 100000 + 'Z' * 1000)"
    result = await run_process(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, timeout=30, output_limit=2000
    )
    assert result.truncated
    assert result.output == "A" * 1000 + "\n[... 100000 characters cut ...]\n" + "Z" * 1000


async def test_output_at_the_limit_is_kept_whole_and_utf8_survives_chunking(
    tmp_path: Path, env: dict[str, str]
) -> None:
    script = "import sys; sys.stdout.write('é' * 150000)"
    result = await run_process(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, timeout=30, output_limit=150000
    )
    assert not result.truncated
    assert result.output == "é" * 150000


def test_scrubbed_env_has_nothing_from_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_leakleakleak")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-leak")
    env = scrubbed_env(home=tmp_path, extra={"CI": "true"})
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "CI": "true",
    }


async def test_child_sees_no_secret_from_the_parent(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_leakleakleak")
    result = await run_process("env", cwd=tmp_path, env=env, timeout=30)
    assert result.exit_code == 0
    assert "ghs_leakleakleak" not in result.output
    assert "GITHUB_TOKEN" not in result.output
    assert f"HOME={tmp_path / 'home'}" in result.output


@pytest.mark.parametrize(
    "name", ["GITHUB_TOKEN", "openai_api_key", "DB_PASSWORD", "WEBHOOK_SECRET", "SSH_KEY"]
)
def test_scrubbed_env_refuses_secret_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        scrubbed_env(home=tmp_path, extra={name: "x"})


@needs_bwrap
async def test_sandbox_allows_writable_dirs_only(tmp_path: Path, env: dict[str, str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    command = "echo ok > inside.txt && cat inside.txt; touch ../escape.txt; touch /usr/escape.txt"
    result = await run_process(
        command, cwd=work, env=env, timeout=30, confinement=confined(work, tmp_path / "home")
    )
    assert (work / "inside.txt").read_text() == "ok\n"
    assert not (tmp_path / "escape.txt").exists()
    assert not Path("/usr/escape.txt").exists()
    assert "Read-only file system" in result.output


@needs_bwrap
async def test_sandbox_has_no_network(tmp_path: Path, env: dict[str, str]) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        script = (
            f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')"
        )
        argv = ["/usr/bin/python3", "-c", script]
        open_net = await run_process(argv, cwd=tmp_path, env=env, timeout=30)
        box = confined(tmp_path, tmp_path)
        sandboxed = await run_process(argv, cwd=tmp_path, env=env, timeout=30, confinement=box)
    assert open_net.output == "connected\n"  # the probe can tell
    assert sandboxed.exit_code != 0
    assert "connected" not in sandboxed.output


@needs_bwrap
async def test_a_sandboxed_commands_tool_dirs_are_looked_up_off_the_event_loop(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Which directories of PATH to show reads each of them (/usr/bin's ~1,000 entries): the loop,
    which runs every other story meanwhile, does not wait for that."""
    from bot.sandbox.tooldirs import kept_runtime

    kept_runtime.clear()  # what an earlier test's confinement found is kept a minute
    with audit_threads("os.scandir", lambda args: str(args[0]) == "/usr/bin") as threads:
        result = await run_process(
            "true", cwd=tmp_path, env=env, timeout=30, confinement=confined(tmp_path, tmp_path)
        )
    assert result.exit_code == 0
    assert threads and threading.get_ident() not in threads


@needs_bwrap
async def test_a_confined_process_without_cgroups_starts_with_no_hand_off_to_a_thread(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its tool directories known (read by an earlier process), a confined process's argv is made
    and its limits are set on the loop: each hand-off to a thread and back costs more than that
    work under load. The limits hold all the same."""
    from bot.sandbox import tooldirs

    monkeypatch.setattr(tooldirs, "RUNTIME_KEEP", 1e9)  # no minute of keeping ends mid-test
    jail = confined(tmp_path, tmp_path)
    assert jail.limits is not None and jail.limits.any and jail.limits.cgroups is None
    await run_process("true", cwd=tmp_path, env=env, timeout=30, confinement=jail)  # reads them
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    result = await run_process("ulimit -Hn", cwd=tmp_path, env=env, timeout=30, confinement=jail)
    assert result.output == f"{jail.limits.open_files}\n"
    assert executor.handed == 0


def test_a_tool_directory_reached_by_two_path_entries_is_read_once_and_shown_with_its_runtime(
    tmp_path: Path,
) -> None:
    """A virtualenv's `bin` on PATH shows with what its programs need (the virtualenv, its base
    Python's installation), also when PATH names it twice, once through a symlink (as `/bin` and
    `/usr/bin` on a merged /usr): the directory is read once, whatever entry comes first."""
    from bot.sandbox.confinement import Confinement

    base = tmp_path / "base"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.11").write_text("")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\n")
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.11")
    (tmp_path / "link").symlink_to(venv / "bin")
    box = Confinement(confined=True, worktree=tmp_path / "wt", home=tmp_path / "home")
    path = f"{tmp_path / 'link'}:{venv / 'bin'}:/usr/bin:/bin"
    with audit_threads(
        "os.scandir", lambda args: str(args[0]) in {str(venv / "bin"), str(tmp_path / "link")}
    ) as reads:
        argv = box.argv(["python", "-V"], cwd=tmp_path / "wt", env={"PATH": path})
    shown = {argv[i + 1] for i, word in enumerate(argv) if word == "--ro-bind"}
    assert {str(venv), str(base)} <= shown, argv
    assert len(reads) == 1, "the virtualenv's bin was read once"


def test_a_tool_directorys_runtime_is_kept_until_the_directory_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every confined process asks what its tool directories need: a directory is listed again
    only when it changed (a python added or retargeted), not for each process."""
    from bot.sandbox import tooldirs
    from bot.sandbox.confinement import Confinement

    monkeypatch.setattr(tooldirs, "RUNTIME_KEEP", 1e9)  # no minute of keeping ends mid-test

    venv, first, second = tmp_path / "venv", tmp_path / "py1", tmp_path / "py2"
    for base in (first, second):
        (base / "bin").mkdir(parents=True)
        (base / "bin" / "python3.11").write_text("")
    (venv / "bin").mkdir(parents=True)
    box = Confinement(confined=True, worktree=tmp_path / "wt", home=tmp_path / "home")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin"}

    def shown() -> tuple[set[str], int]:
        with audit_threads("os.scandir", lambda args: str(args[0]) == str(venv / "bin")) as reads:
            argv = box.argv(["python", "-V"], cwd=tmp_path / "wt", env=env)
        return {argv[i + 1] for i, word in enumerate(argv) if word == "--ro-bind"}, len(reads)

    (venv / "bin" / "python").symlink_to(first / "bin" / "python3.11")
    binds, reads = shown()
    assert str(first) in binds and reads == 1
    assert shown() == (binds, 0)  # the same directory, unchanged: not listed again
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to(second / "bin" / "python3.11")
    os.utime(venv / "bin", ns=(1, 1))  # a change within the same clock tick is a change too
    binds, reads = shown()
    assert str(second) in binds and str(first) not in binds and reads == 1


@needs_bwrap
async def test_sandbox_timeout_kills_everything_inside(tmp_path: Path, env: dict[str, str]) -> None:
    duration = unique_sleep()
    command = f"setsid sleep {duration} & sleep {duration}"
    result = await run_process(
        command, cwd=tmp_path, env=env, timeout=1, confinement=confined(tmp_path, tmp_path)
    )
    assert result.timed_out
    for _ in range(50):  # the pid namespace is torn down asynchronously
        if not live_with_arg(duration):
            break
        await asyncio.sleep(0.05)
    assert live_with_arg(duration) == []


async def test_the_pidfd_child_watcher_runs_processes_on_this_loop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import asyncio
    import warnings

    from bot.sandbox.process import fast_child_watcher
    from bot.workspace.git import run_git

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        before = asyncio.get_child_watcher()
        try:
            fast_child_watcher()
            result = await run_git(["--version"], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
            assert result.stdout.startswith("git version")
        finally:
            asyncio.set_child_watcher(before)
            before.attach_loop(asyncio.get_running_loop())
