"""The shortcuts that cut git processes keep their guarantees: a changed mirror config is still
caught, refs read from files agree with git, a push leases on what the mirror last saw and
asks the remote only when that fails, no listing is made when no deny glob can match, and a
worktree's remembered entry in the mirror is confirmed before it is used."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import WorkspaceError
from bot.workspace.mirror import Mirror, read_ref
from bot.workspace.policy import protected_paths
from bot.workspace.worktree import (
    add_worktree,
    admin_dir,
    commit_staged,
    head_sha,
    remove_worktree,
    stage_all,
)

PRD = """
version: 1
title: One
summary: One story.
stories:
  - id: STORY-001
    title: One
    acceptance_criteria: ["a.txt holds a line"]
"""


async def test_a_config_changed_after_a_verified_call_is_still_refused(mirror: Mirror, git) -> None:  # type: ignore[no-untyped-def]
    await mirror.fetch()  # verified, and remembered
    await mirror.fetch()  # unchanged: not verified again, still fine
    git("config", "--local", "core.sshCommand", "touch /tmp/pwned", cwd=mirror.path)
    with pytest.raises(WorkspaceError, match="changed outside the bot"):
        await mirror.fetch()


async def test_refs_read_from_files_agree_with_git(mirror: Mirror, git, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = git("rev-parse", "refs/remotes/origin/main", cwd=mirror.path)
    assert read_ref(mirror.path, "refs/remotes/origin/main") == main
    assert read_ref(mirror.path, "refs/remotes/origin/nope") == ""
    assert read_ref(mirror.path, "refs/../../etc/passwd") is None
    (mirror.path / "refs/heads/odd").write_bytes(b"\xff" + main.encode() + b"\n")
    assert read_ref(mirror.path, "refs/heads/odd") is None  # not a sha: unsure
    (mirror.path / "refs/heads/odd").write_text(f"  {main}\n\n")
    assert read_ref(mirror.path, "refs/heads/odd") == main
    assert read_ref(mirror.path, "refs/heads") is None  # a folder: unsure
    git("pack-refs", "--all", cwd=mirror.path)  # packed: read from packed-refs
    assert read_ref(mirror.path, "refs/remotes/origin/main") == main
    wt = await add_worktree(mirror, branch="b", base_ref="refs/remotes/origin/main", path=tmp_path / "wt")
    (wt.path / "x.txt").write_text("x\n")
    await stage_all(wt)
    sha = await commit_staged(wt, message="x", author_name="Bot", author_email="bot@example.com", trailers={})
    assert sha == await head_sha(wt) == git("rev-parse", "HEAD", cwd=wt.path)
    await stage_all(wt)
    assert (
        await commit_staged(wt, message="y", author_name="Bot", author_email="bot@example.com", trailers={})
        is None
    )


async def test_a_push_leases_on_the_tracking_ref_and_recovers_when_the_remote_moved(
    mirror: Mirror, git, remote: Path, seed: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from bot.orchestration.pushing import push_branch as _push
    from tests.execution_support import approved_state, config_for, make_run

    run = make_run(
        tmp_path,
        remote,
        approved_state(PRD),
        config_for(Path("/bin/true")),
    )
    run.mirror = mirror
    wt = await add_worktree(mirror, branch="s1", base_ref="refs/remotes/origin/main", path=tmp_path / "w1")
    (wt.path / "a.txt").write_text("a\n")
    await stage_all(wt)
    first = await commit_staged(
        wt, message="a", author_name="Bot", author_email="bot@example.com", trailers={}
    )
    assert first is not None
    await _push(run, "s1", first)
    assert git("rev-parse", "refs/heads/s1", cwd=remote) == first
    assert await mirror.tracking_sha("s1") == first, "the push updated what the mirror saw"
    # The remote branch moves behind the mirror's back (a crash left another push there).
    git("fetch", "-q", "origin", "s1", cwd=seed)
    git("checkout", "-q", "-b", "s1", "FETCH_HEAD", cwd=seed)
    (seed / "b.txt").write_text("b\n")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "b", cwd=seed)
    git("push", "-q", "origin", "s1", cwd=seed)
    (wt.path / "c.txt").write_text("c\n")
    await stage_all(wt)
    second = await commit_staged(
        wt, message="c", author_name="Bot", author_email="bot@example.com", trailers={}
    )
    assert second is not None
    await _push(run, "s1", second)  # the lease fails; the remote is asked and the push made on it
    assert git("rev-parse", "refs/heads/s1", cwd=remote) == second


async def test_no_listing_when_no_deny_glob_can_match(mirror: Mirror, tmp_path: Path) -> None:
    wt = await add_worktree(mirror, branch="p", base_ref="refs/remotes/origin/main", path=tmp_path / "p")
    calls = []
    real = wt.git

    async def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0])
        return await real(*args, **kwargs)

    object.__setattr__(wt, "git", counting)
    assert await protected_paths(wt, [".github/workflows/**"]) == [wt.path / ".git"]
    assert calls == []
    (wt.path / ".github" / "workflows").mkdir(parents=True)
    assert await protected_paths(wt, [".github/workflows/**"]) == [wt.path / ".git"]
    assert await protected_paths(wt, ["src/**"]) == [wt.path / ".git", wt.path / "src" / "app.py"]
    assert await protected_paths(wt, ["*.py"]) == [wt.path / ".git", wt.path / "src" / "app.py"]
    assert calls == ["ls-files", "ls-files", "ls-files"]


async def test_a_remembered_worktree_entry_is_confirmed_before_use(mirror: Mirror, tmp_path: Path) -> None:
    base = "refs/remotes/origin/main"
    one = await add_worktree(mirror, branch="one", base_ref=base, path=tmp_path / "x" / "wt")
    entry = one.admin
    assert mirror.worktree_admins[one.path] == entry  # remembered
    await remove_worktree(one)
    other = await add_worktree(mirror, branch="other", base_ref=base, path=tmp_path / "y" / "wt")
    assert other.admin == entry  # git gave the free name to another worktree
    assert admin_dir(mirror, one.path) is None  # the memory of `one` is not trusted, and dropped
    assert one.path not in mirror.worktree_admins
    again = await add_worktree(mirror, branch="one", base_ref=base, path=one.path)
    assert again.admin != entry
    assert (again.admin / "gitdir").read_text().strip() == str(again.path / ".git")
    mirror.worktree_admins[again.path] = entry  # a wrong memory is corrected, never used
    assert admin_dir(mirror, again.path) == mirror.worktree_admins[again.path] != entry
    (again.path / ".git").write_text(f"gitdir: {entry}\n")  # the worktree's own file is never the source
    assert again.admin != entry and other.admin == entry
    assert (await again.git("rev-parse", "--abbrev-ref", "HEAD")).stdout.strip() == "one"
