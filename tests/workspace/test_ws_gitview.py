"""The sandbox's private copy of a worktree's git is made again safely, whatever a sandbox left in it.

The copy is writable from inside a sandbox (at the mirror's path), so before a new confinement
it may hold anything: symlinks out, directories without permissions. Making it again must
never follow them, and a failure must not print the server's paths.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.errors import WorkspaceError
from bot.workspace import Mirror, add_worktree
from bot.workspace.gitview import GitView
from bot.workspace.worktree import remove_worktree, sandbox_view


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
    with pytest.raises(WorkspaceError) as caught:
        view.refresh()
    assert "could not be made (No such file or directory)" in caught.value.message
    assert str(tmp_path) not in caught.value.message
