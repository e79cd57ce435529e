"""A sandbox's private copy of its worktree's git is made in its own memory, one per process.

Real bubblewrap, real git. Each process a confinement starts gets the copy in a tmpfs of its own
(filled by bubblewrap from memfds): what it writes there vanishes with it, the next process
starts again from what the bot's git sees, nothing is written under the data dir, and none of
the descriptors stay open in the bot. The built-in agent's commands are one session: they share
a copy on disk and see each other's git writes. A bubblewrap that cannot make files falls back
to the copy on disk.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from bot.sandbox.confinement import Confinement, Sandbox
from bot.sandbox.limits import Limits
from bot.sandbox.process import run_process, scrubbed_env
from bot.workspace.gitview import GitSnapshot, GitView
from bot.workspace.worktree import Worktree, add_worktree, sandbox_view
from tests.support import bwrap_marker
from tests.test_sandbox_git import BRANCH, TAG, files_of, gate_run

pytestmark = bwrap_marker()
MAIN = "refs/remotes/origin/main"
COMMIT = "git -c user.name=a -c user.email=a@example.com commit -qm"


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


async def inside(jail: Confinement, wt: Worktree, home: Path, command: str) -> str:
    done = await run_process(command, cwd=wt.path, env=scrubbed_env(home=home), timeout=60, confinement=jail)
    assert done.exit_code == 0, done.output
    return done.output


async def test_each_process_gets_its_own_copy_in_memory_and_the_next_starts_fresh(tmp_path: Path) -> None:
    run = await gate_run(tmp_path)
    wt = await add_worktree(run.mirror, branch=BRANCH, base_ref=MAIN, path=tmp_path / "wt")
    home = tmp_path / "home"
    home.mkdir()
    mib = 64 * 1024 * 1024
    sandbox = Sandbox(limits=Limits(memory=mib))
    jail = await asyncio.to_thread(sandbox.confinement, worktree=wt.path, home=home, git=sandbox_view(wt))
    assert isinstance(jail.git, GitSnapshot)
    before = files_of(run.mirror.path)
    fds = open_fds()

    common = "$(git rev-parse --git-common-dir)"
    first = await inside(
        jail,
        wt,
        home,
        f"set -e; echo new > new.txt; git add new.txt; {COMMIT} inside; git tag v9.9.9; "
        f"git describe --tags; git log -1 --format=%s; stat -f -c %T {common}; df -k --output=size {common}",
    )
    described, subject, kind, _, size = first.split()
    assert (described, subject, kind) == ("v9.9.9", "inside", "tmpfs"), first
    assert int(size) * 1024 == mib  # sized like its /tmp: its memory
    second = await inside(jail, wt, home, "git describe --tags; git log -1 --format=%s; git status --short")
    assert second.splitlines() == [TAG, "initial", "?? new.txt"], second  # the commit went with the first

    assert files_of(run.mirror.path) == before  # the bot's git saw none of it
    assert (await wt.git("describe", "--tags")).stdout.strip() == TAG
    assert not (run.mirror.root / "sandbox-git").exists()  # nothing made on disk
    assert open_fds() == fds  # the memfds were closed once bubblewrap had them


async def test_the_built_in_agents_commands_share_one_copy_on_disk(tmp_path: Path) -> None:
    run = await gate_run(tmp_path)
    wt = await add_worktree(run.mirror, branch=BRANCH, base_ref=MAIN, path=tmp_path / "wt")
    home = tmp_path / "home"
    home.mkdir()
    view = sandbox_view(wt)
    jail = await asyncio.to_thread(
        Sandbox().confinement, worktree=wt.path, home=home, git=view, git_session=True
    )
    assert jail.git == view

    await inside(jail, wt, home, "echo new > new.txt && git add new.txt")
    await inside(jail, wt, home, f"{COMMIT} staged")  # sees what the previous command staged
    log = await inside(jail, wt, home, "git log -1 --format=%s; git status --short")
    assert log.splitlines() == ["staged"], log
    assert (await wt.git("log", "-1", "--format=%s")).stdout.strip() == "initial"


async def test_a_bubblewrap_that_cannot_make_files_gets_the_copy_on_disk(tmp_path: Path) -> None:
    run = await gate_run(tmp_path)
    wt = await add_worktree(run.mirror, branch=BRANCH, base_ref=MAIN, path=tmp_path / "wt")
    home = tmp_path / "home"
    home.mkdir()
    real = shutil.which("bwrap")
    older = tmp_path / "bin" / "old-bwrap"
    older.parent.mkdir()
    older.write_text(  # its help lists no --file
        f'#!/bin/sh\nif [ "$1" = --help ]; then {real} --help | grep -v -- "--file "; exit 0; fi\n'
        f'exec {real} "$@"\n'
    )
    older.chmod(0o755)
    view = sandbox_view(wt)
    jail = await asyncio.to_thread(
        Sandbox(bwrap=str(older)).confinement, worktree=wt.path, home=home, git=view
    )
    assert isinstance(jail.git, GitView) and (view.scratch / "packed-refs").is_file()
    assert (await inside(jail, wt, home, "git describe --tags")).strip() == TAG
