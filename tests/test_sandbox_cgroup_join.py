"""A confined process joins its cgroup itself, before anything of it runs (issue 52).

With cgroup v1 the bot used to move each sandbox's first process into its cgroup from outside
(its pid written to `cgroup.procs`). That takes the kernel's lock on every thread group's cgroup
for writing: the first such move after a quiet moment waits for an RCU grace period (5 to 15 ms
here) while every fork on the machine waits behind it, once a story for the agent and again for
each gate. Now the process is started by a shell that moves its own thread in (0 written to each
group's `tasks`, which takes no such lock) and then becomes bubblewrap: everything of the sandbox
is born inside, and the server writes no `cgroup.procs`. cgroup v2 has no such move and keeps the
move at the gate.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.sandbox.cgroups import JOIN_FAILED, Group, find_cgroups, removals_settled
from bot.sandbox.limits import Limits, joining
from bot.sandbox.process import confined_child, kill_process_group, scrubbed_env
from tests.support import audit_threads, bwrap_marker, make_settings


def tasks_group(tmp_path: Path, *names: str) -> Group:
    """A group whose folders are plain folders: the shell's words, without the cgroup file system."""
    folders = [tmp_path / name for name in names]
    for folder in folders:
        folder.mkdir()
        (folder / "tasks").write_text("")
    return Group(folders=folders, joins=True)


def test_the_shell_joins_every_folder_then_becomes_the_command(tmp_path: Path) -> None:
    group = tasks_group(tmp_path, "pids", "memory")
    argv = group.joined(["/bin/sh", "-c", 'echo "$$" > pid; echo "$1" > said', "sh", "it's $(not) run"])
    proc = subprocess.run(argv, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert [(folder / "tasks").read_text() for folder in group.folders] == ["0\n", "0\n"]
    assert (tmp_path / "said").read_text() == "it's $(not) run\n", "its arguments are never read as code"


def test_the_shell_becomes_the_command_it_starts(tmp_path: Path) -> None:
    """`exec`: the process the caller started, records and kills is the command's (bubblewrap's)."""
    group = tasks_group(tmp_path, "pids")
    proc = subprocess.Popen(
        group.joined(["/bin/sh", "-c", 'echo "$$" > pid']), cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}
    )
    assert proc.wait() == 0
    assert int((tmp_path / "pid").read_text()) == proc.pid


def test_a_process_that_cannot_join_its_cgroup_runs_nothing_and_says_so(tmp_path: Path) -> None:
    group = tasks_group(tmp_path, "pids", "memory")
    (group.folders[1] / "tasks").unlink()
    (group.folders[1] / "tasks").mkdir()  # cannot be written: as a folder the server may not write
    proc = subprocess.run(
        group.joined(["touch", "ran"]),
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=False,
    )
    assert proc.returncode == JOIN_FAILED
    assert b"could not join the sandbox's cgroup; nothing ran" in proc.stderr
    assert not (tmp_path / "ran").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_functions_in_the_environment_change_nothing_where_sh_is_bash(tmp_path: Path) -> None:
    """Where /bin/sh is bash, bash would take functions from the environment it passes on (the
    command's, which names a repository may choose reach): privileged, it takes none."""
    group = tasks_group(tmp_path, "pids")
    sh = tmp_path / "bin" / "sh"
    sh.parent.mkdir()
    sh.symlink_to(str(shutil.which("bash")))  # bash as sh: what /bin/sh is on Fedora and others
    argv = group.joined(["touch", "ran"])
    argv[0] = str(sh)
    env = {
        "PATH": "/usr/bin:/bin",
        "BASH_FUNC_echo%%": "() { builtin echo hijacked; }",
        "BASH_FUNC_shift%%": "() { :; }",
    }
    proc = subprocess.run(argv, cwd=tmp_path, env=env, check=False)
    assert proc.returncode == 0
    assert (group.folders[0] / "tasks").read_text() == "0\n"
    assert (tmp_path / "ran").exists()


def test_cgroup_v2_keeps_the_move_at_the_gate(tmp_path: Path) -> None:
    """cgroup v2 has no move of one's own thread outside a threaded group: its process is moved in
    at its gate, as before, and nothing is made ahead."""
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    cgroups = find_cgroups(str(tmp_path))
    assert cgroups is not None and cgroups.version == "v2"
    assert asyncio.run(joining(Limits(cgroups=cgroups))) is None
    group = cgroups.make(processes=40, memory=0)
    assert group is not None and not group.joins
    group.remove()


@bwrap_marker()
async def test_a_sandbox_is_born_in_its_cgroup_and_nothing_is_moved_in(tmp_path: Path) -> None:
    sandbox = make_settings(tmp_path).sandbox_policy()
    cgroups = sandbox.limits.cgroups
    if cgroups is None or cgroups.version != "v1":
        pytest.skip("cgroup v1 is not where the server makes cgroups here")
    worktree, home = tmp_path / "wt", tmp_path / "home"
    worktree.mkdir()
    home.mkdir()
    jail = sandbox.confinement(worktree=worktree, home=home)
    argv = ["sh", "-c", "sleep 30 & sleep 30 & echo READY; wait"]
    writes = audit_threads("open", lambda args: str(args[0]).endswith("cgroup.procs") and "w" in str(args[1]))
    with writes as moved:
        async with confined_child(argv, cwd=worktree, env=scrubbed_env(home=home), confinement=jail) as child:
            try:
                await child.release()
                assert await asyncio.wait_for(child.output.readline(), 30) == b"READY\n"
                group = child.group
                assert group is not None and len(group.folders) == len(set(cgroups.parents.values()))
                inside = await asyncio.to_thread(group.pids)
                assert child.proc.pid in inside, "bubblewrap itself started inside"
                assert len(inside) >= 4, inside  # bubblewrap, the sandbox's first process, sh, two sleeps
                for pid in inside:
                    lines = Path(f"/proc/{pid}/cgroup").read_text()
                    assert all(f"{folder.name}\n" in lines for folder in group.folders), lines
            finally:
                await kill_process_group(child.proc)
    assert moved == [], "the server moved a process in from outside"
    await removals_settled()
    assert not any(folder.exists() for folder in group.folders), "its cgroup went with it"
    assert os.path.isdir(next(iter(cgroups.parents.values())))
