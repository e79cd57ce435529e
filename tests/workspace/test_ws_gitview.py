"""The sandbox's private copy of a worktree's git is made again safely, whatever a sandbox left in it.

The copy is writable from inside a sandbox (at the mirror's path), so before a new confinement
it may hold anything: symlinks out, directories without permissions. Making it again must
never follow them, and a failure must not print the server's paths.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from bot.errors import WorkspaceError
from bot.sandbox.confinement import Sandbox
from bot.workspace import Mirror, add_worktree
from bot.workspace.gitview import GitSnapshot, GitView
from bot.workspace.worktree import remove_worktree, sandbox_view
from tests.support import bwrap_marker
from tests.workspace.conftest import Git


async def test_a_copy_a_sandbox_tampered_with_is_made_again_without_following_it(
    tmp_path: Path, mirror: Mirror
) -> None:
    wt = await add_worktree(mirror, branch="b", base_ref="refs/remotes/origin/main", path=tmp_path / "wt")
    view = sandbox_view(wt)
    view.refresh()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("the host's file\n")
    # What a sandbox can leave behind: symlinks out (also in place of a directory), locked dirs.
    (view.scratch / "refs" / "heads").mkdir()
    os.symlink(outside, view.scratch / "refs" / "heads" / "out")
    (view.scratch / "objects" / "info" / "alternates").unlink()
    os.symlink(outside / "keep.txt", view.scratch / "objects" / "info" / "alternates")
    locked = view.scratch / "worktrees" / view.admin_id / "locked-dir"
    (locked / "inner").mkdir(parents=True)
    (locked / "inner" / "f").write_text("x")
    os.chmod(locked / "inner", 0)
    os.chmod(locked, 0o500)

    view.refresh()

    assert (outside / "keep.txt").read_text() == "the host's file\n"
    assert not (view.scratch / "refs" / "heads" / "out").exists()
    assert not locked.exists()
    alternates = (view.scratch / "objects" / "info" / "alternates").read_text()
    assert alternates == f"{mirror.path.resolve() / 'objects' / 'shared'}\n"
    admin = wt.admin
    assert (view.scratch / "worktrees" / view.admin_id / "HEAD").read_bytes() == (admin / "HEAD").read_bytes()
    assert (view.scratch / "worktrees" / view.admin_id / "commondir").read_text().strip() == "../.."

    await remove_worktree(wt)  # the copy goes with its worktree
    assert not view.scratch.exists()


def test_a_copy_that_cannot_be_made_says_why_without_a_server_path(tmp_path: Path) -> None:
    view = GitView(mirror=tmp_path / "gone.git", admin_id="story-001", scratch=tmp_path / "copy")
    for make in (view.refresh, view.snapshot):  # on disk, in memory
        with pytest.raises(WorkspaceError) as caught:
            make()
        assert "could not be made (No such file or directory)" in caught.value.message
        assert str(tmp_path) not in caught.value.message


async def test_the_copy_holds_the_mirrors_refs_in_one_packed_refs_file(
    tmp_path: Path, mirror: Mirror, git: Git
) -> None:
    """Packed and loose refs (a loose one newer than its packed entry), annotated tags packed and
    loose, a symbolic ref: the copy lists each as the mirror does, with one file for all but the last."""
    main = "refs/remotes/origin/main"
    wt = await add_worktree(mirror, branch="b", base_ref=main, path=tmp_path / "wt")
    git("tag", "-a", "v1", "-m", "packed tag", main, cwd=mirror.path)
    git("update-ref", "refs/heads/moved", main, cwd=mirror.path)
    git("pack-refs", "--all", cwd=mirror.path)
    newer = git("commit-tree", "-m", "newer", f"{main}^{{tree}}", "-p", main, cwd=mirror.path)
    git("update-ref", "refs/heads/moved", newer, cwd=mirror.path)  # loose now, over its packed entry
    git("tag", "-a", "v2", "-m", "loose tag", newer, cwd=mirror.path)
    git("symbolic-ref", "refs/remotes/origin/HEAD", main, cwd=mirror.path)
    view = sandbox_view(wt)
    view.refresh()

    listed = "--format=%(objectname) %(refname) %(*objectname) %(symref)"
    inside = f"--git-dir={view.scratch}"
    objects = f"GIT_ALTERNATE_OBJECT_DIRECTORIES={mirror.path / 'objects'}"
    copy = subprocess.run(
        ["env", objects, "git", inside, "for-each-ref", listed], capture_output=True, text=True, check=True
    )
    assert copy.stdout.strip() == git("for-each-ref", listed, cwd=mirror.path)
    assert f"{newer} refs/heads/moved" in copy.stdout
    loose = [p.relative_to(view.scratch) for p in (view.scratch / "refs").rglob("*") if p.is_file()]
    assert loose == [Path("refs/remotes/origin/HEAD")]


@bwrap_marker()
async def test_a_confinement_with_a_git_view_is_never_made_on_the_event_loop(
    tmp_path: Path, mirror: Mirror, home: Path
) -> None:
    """The copy is file I/O: on the loop it would hold up every other story and the webhooks."""
    wt = await add_worktree(mirror, branch="b", base_ref="refs/remotes/origin/main", path=tmp_path / "wt")
    view = sandbox_view(wt)
    with pytest.raises(RuntimeError, match=r"asyncio\.to_thread"):
        Sandbox().confinement(worktree=wt.path, home=home, git=view)
    assert not view.scratch.exists()
    jail = await asyncio.to_thread(Sandbox().confinement, worktree=wt.path, home=home, git=view)
    assert isinstance(jail.git, GitSnapshot) and not view.scratch.exists()  # in memory: nothing on disk
    shared = await asyncio.to_thread(
        Sandbox().confinement, worktree=wt.path, home=home, git=view, git_session=True
    )
    assert shared.git == view and (view.scratch / "packed-refs").is_file()
