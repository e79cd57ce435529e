"""Worktrees go, whatever their processes left in them (issue 37, item 7).

Setup, a gate or an agent can leave a folder nobody may list (`chmod 000`), a folder nobody may
write, symlinks out, and a tree thousands of levels deep. A server running as root removes most
of that anyway (and the tests run as root), so the real case, a server that is not root, runs in
a child process as uid 65534 here: it makes a mirror and a worktree of its own, fills the worktree
as hostile code would and removes it with the bot's `remove_worktree`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import own_as_server, run_as_server, server_folder

CHILD = r"""
import asyncio, json, os, subprocess, sys
from pathlib import Path
from bot.workspace.mirror import Mirror
from bot.workspace.worktree import add_worktree, remove_worktree

top = Path(sys.argv[1])
outside = top / "outside"
env = {"HOME": str(top), "PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null"}
env.update({f"GIT_{who}_{what}": "d" for who in ("AUTHOR", "COMMITTER") for what in ("NAME", "EMAIL")})
def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
seed = top / "seed"
seed.mkdir()
git("init", "-q", "-b", "main", cwd=seed)
(seed / "README.md").write_text("hi\n")
git("add", "-A", cwd=seed)
git("commit", "-q", "-m", "one", cwd=seed)
git("clone", "-q", "--bare", str(seed), str(top / "remote.git"), cwd=top)

async def main():
    mirror = Mirror(root=top / "data", clone_url=(top / "remote.git").as_uri(), env={"HOME": str(top)})
    await mirror.ensure()
    wt = await add_worktree(mirror, branch="story", base_ref="origin/main", path=top / "data" / "wt")
    # What hostile code leaves behind:
    locked = wt.path / "build" / "locked"
    (locked / "inner").mkdir(parents=True)
    (locked / "inner" / "file").write_text("x")
    (locked / "inner").chmod(0)
    locked.chmod(0)
    frozen = wt.path / "frozen"
    frozen.mkdir()
    (frozen / "file").write_text("x")
    frozen.chmod(0o500)
    deep = os.open(str(wt.path), os.O_RDONLY)
    for _ in range(1500):  # deeper than Python's recursion limit
        os.mkdir("d", dir_fd=deep)
        inner = os.open("d", os.O_RDONLY, dir_fd=deep)
        os.close(deep)
        deep = inner
    os.close(deep)
    os.symlink(outside, wt.path / "out")
    outside.chmod(0o500)  # the symlink's target: never opened up, never emptied
    try:
        await remove_worktree(wt)
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:300]
    listed = await mirror.git("worktree", "list", "--porcelain")
    seen = {"error": error, "left": wt.path.exists(), "registered": str(wt.path) in listed.stdout}
    seen.update(outside_mode=oct(outside.stat().st_mode & 0o777), outside=sorted(os.listdir(outside)))
    print(json.dumps(seen))

asyncio.run(main())
"""


@pytest.fixture
def unprivileged_top() -> Iterator[Path]:
    """A folder the unprivileged child owns, and a folder beside its worktree that must stay."""
    with server_folder("plan-cascade-removal-") as top:
        (top / "outside").mkdir()
        (top / "outside" / "keep.txt").write_text("not the worktree's\n")
        own_as_server(top / "outside", top / "outside" / "keep.txt")
        yield top


def test_a_server_that_is_not_root_removes_whatever_a_worktree_holds(unprivileged_top: Path) -> None:
    done = run_as_server([sys.executable, "-c", CHILD, str(unprivileged_top)], cwd=unprivileged_top)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["error"] is None, seen
    assert not seen["left"] and not seen["registered"], seen
    assert seen["outside"] == ["keep.txt"] and seen["outside_mode"] == "0o500", "the symlink was followed"


def test_remove_tree_takes_symlinks_and_files_as_themselves(tmp_path: Path) -> None:
    from bot.sandbox.removal import remove_tree

    target = tmp_path / "target"
    (target / "sub").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(target)
    remove_tree(link)
    assert not link.is_symlink() and (target / "sub").is_dir()
    (tmp_path / "file").write_text("x")
    remove_tree(tmp_path / "file")
    remove_tree(tmp_path / "missing")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]
