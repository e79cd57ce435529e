"""Worktrees of a real mirror: parallel checkouts, commits with the bot identity, merges."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bot.workspace.mirror as mirror_module
import bot.workspace.worktree as worktree_module
from bot.errors import WorkspaceError
from bot.workspace import (
    Mirror,
    add_worktree,
    changed_files,
    commit_staged,
    head_sha,
    merge_branches,
    remove_worktree,
    stage_all,
)
from bot.workspace.worktree import add_detached

BOT_NAME = "plan-cascade[bot]"
BOT_EMAIL = "123+plan-cascade[bot]@users.noreply.github.com"
Git = Callable[..., str]


async def test_two_worktrees_on_different_branches_at_once(mirror: Mirror, tmp_path: Path, git: Git) -> None:
    base = await mirror.resolve("origin/main")
    one = await add_worktree(mirror, branch="bot/one", base_ref="origin/main", path=tmp_path / "one")
    two = await add_worktree(mirror, branch="bot/two", base_ref="origin/main", path=tmp_path / "two")
    (one.path / "one.txt").write_text("1\n")
    (two.path / "README.md").write_text("changed in two\n")
    await stage_all(one)
    sha_one = await commit_staged(
        one, message="one", author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={}
    )
    await stage_all(two)
    sha_two = await commit_staged(
        two, message="two", author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={}
    )
    assert sha_one and sha_two and sha_one != sha_two
    assert git("rev-parse", "bot/one", cwd=mirror.path) == sha_one
    assert git("rev-parse", "bot/two", cwd=mirror.path) == sha_two
    assert (two.path / "README.md").read_text() == "changed in two\n"
    assert (one.path / "README.md").read_text() == "hello\n"
    assert await changed_files(one, base) == ["one.txt"]
    assert await changed_files(two, base) == ["README.md"]


async def test_commit_uses_bot_identity_and_trailers(mirror: Mirror, tmp_path: Path, git: Git) -> None:
    wt = await add_worktree(mirror, branch="bot/c", base_ref="origin/main", path=tmp_path / "c")
    (wt.path / "src" / "app.py").write_text("print('v2')\n")
    await stage_all(wt)
    sha = await commit_staged(
        wt,
        message="#12: update app\n\nBody line.",
        author_name=BOT_NAME,
        author_email=BOT_EMAIL,
        trailers={"Plan-Cascade-Task": "T2", "Co-authored-by": "Ada <ada@example.com>"},
    )
    assert sha == await head_sha(wt)
    log = git("log", "-1", "--format=%an%n%ae%n%cn%n%ce%n%B", sha, cwd=wt.path)
    assert log.splitlines() == [
        BOT_NAME,
        BOT_EMAIL,
        BOT_NAME,
        BOT_EMAIL,
        "#12: update app",
        "",
        "Body line.",
        "",
        "Plan-Cascade-Task: T2",
        "Co-authored-by: Ada <ada@example.com>",
    ]
    trailers = git("log", "-1", "--format=%(trailers:key=Plan-Cascade-Task,valueonly)", sha, cwd=wt.path)
    assert trailers == "T2"


async def test_a_commit_returns_none_when_nothing_is_staged(mirror: Mirror, tmp_path: Path) -> None:
    wt = await add_worktree(mirror, branch="bot/n", base_ref="origin/main", path=tmp_path / "n")
    before = await head_sha(wt)
    await stage_all(wt)
    assert (
        await commit_staged(wt, message="x", author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={})
        is None
    )
    assert await head_sha(wt) == before


async def test_staging_all_records_deletions_and_new_files(mirror: Mirror, tmp_path: Path, git: Git) -> None:
    wt = await add_worktree(mirror, branch="bot/d", base_ref="origin/main", path=tmp_path / "d")
    base = await head_sha(wt)
    (wt.path / "README.md").unlink()
    (wt.path / "docs").mkdir()
    (wt.path / "docs" / "new.md").write_text("new\n")
    assert await changed_files(wt, base) == ["README.md", "docs/new.md"]  # before committing
    await stage_all(wt)
    sha = await commit_staged(wt, message="d", author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={})
    assert git("show", "--name-status", "--format=", sha, cwd=wt.path).splitlines() == [
        "D\tREADME.md",
        "A\tdocs/new.md",
    ]
    assert await changed_files(wt, base) == ["README.md", "docs/new.md"]  # after committing


async def test_commit_refuses_a_trailer_that_would_break_the_message(mirror: Mirror, tmp_path: Path) -> None:
    wt = await add_worktree(mirror, branch="bot/t", base_ref="origin/main", path=tmp_path / "t")
    (wt.path / "x").write_text("x")
    await stage_all(wt)
    with pytest.raises(ValueError, match="trailer"):
        await commit_staged(
            wt, message="m", author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={"A": "b\nEvil: c"}
        )


async def test_existing_branch_resumes_unless_reset(mirror: Mirror, tmp_path: Path) -> None:
    wt = await add_worktree(mirror, branch="bot/r", base_ref="origin/main", path=tmp_path / "r")
    (wt.path / "progress.txt").write_text("step 1\n")
    await stage_all(wt)
    sha = await commit_staged(wt, message="step 1", author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={})
    await remove_worktree(wt)

    resumed = await add_worktree(mirror, branch="bot/r", base_ref="origin/main", path=tmp_path / "r2")
    assert await head_sha(resumed) == sha
    assert (resumed.path / "progress.txt").read_text() == "step 1\n"
    again = await add_worktree(mirror, branch="bot/r", base_ref="origin/main", path=tmp_path / "r2")
    assert again.path == resumed.path  # the same checkout is reused

    fresh = await add_worktree(
        mirror, branch="bot/r", base_ref="origin/main", path=tmp_path / "r2", reset=True
    )
    assert await head_sha(fresh) == await mirror.resolve("origin/main")
    assert not (fresh.path / "progress.txt").exists()


async def test_a_worktrees_files_are_checked_out_outside_the_worktree_lock(
    mirror: Mirror, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large tree's checkout must not hold back every other story's worktree: only the
    registration is serialised, the files come after, with the lock free."""
    seen: list[tuple[str, bool]] = []
    original = worktree_module.run_git

    async def run_git(args: list[str], **kwargs: Any) -> Any:
        if "reset" in args:
            seen.append(("reset", mirror.worktree_lock.locked()))
        elif "worktree" in args and "add" in args:
            seen.append(("worktree add", mirror.worktree_lock.locked()))
        return await original(args, **kwargs)

    monkeypatch.setattr(worktree_module, "run_git", run_git)
    monkeypatch.setattr(mirror_module, "run_git", run_git)
    wt = await add_worktree(mirror, branch="bot/lock", base_ref="origin/main", path=tmp_path / "lock")
    detached = await add_detached(mirror, path=tmp_path / "detached", ref="origin/main")
    for checkout in (wt, detached):
        assert (checkout.path / "README.md").read_text() == "hello\n"
        assert await changed_files(checkout, await mirror.resolve("origin/main")) == []
    assert [entry for entry in seen if entry[0] == "reset"] == [("reset", False), ("reset", False)]
    assert [entry for entry in seen if entry[0] == "worktree add"] == [("worktree add", True)] * 2


async def test_a_worktree_registered_but_never_checked_out_gets_its_files_when_reused(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    """A crash between the registration and the checkout leaves a worktree with no files and no
    index: resuming it checks it out, rather than committing the whole tree's deletion."""
    path = tmp_path / "half"
    git("worktree", "add", "-q", "--no-checkout", "-b", "bot/half", str(path), "origin/main", cwd=mirror.path)
    assert not (path / "README.md").exists()
    wt = await add_worktree(mirror, branch="bot/half", base_ref="origin/main", path=path)
    assert (wt.path / "src" / "app.py").read_text() == "print('v1')\n"
    assert await changed_files(wt, await mirror.resolve("origin/main")) == []
    assert git("status", "--porcelain", cwd=wt.path) == ""


async def test_remove_worktree_is_idempotent_even_when_dir_is_gone(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    wt = await add_worktree(mirror, branch="bot/x", base_ref="origin/main", path=tmp_path / "x")
    (wt.path / "dirty.txt").write_text("uncommitted\n")
    await remove_worktree(wt)
    assert not wt.path.exists()
    await remove_worktree(wt)
    assert str(wt.path) not in git("worktree", "list", cwd=mirror.path)

    gone = await add_worktree(mirror, branch="bot/y", base_ref="origin/main", path=tmp_path / "y")
    shutil.rmtree(gone.path)
    await remove_worktree(gone)
    assert str(gone.path) not in git("worktree", "list", cwd=mirror.path)
    # The branch is free again for a new checkout.
    await add_worktree(mirror, branch="bot/y", base_ref="origin/main", path=tmp_path / "y2")


async def test_a_removal_starts_no_git_and_leaves_git_nothing_to_prune(
    mirror: Mirror, tmp_path: Path, git: Git, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `git worktree remove --force --force` does, done by the bot: git agrees afterwards."""
    kept = await add_worktree(mirror, branch="bot/kept", base_ref="origin/main", path=tmp_path / "kept")
    wt = await add_worktree(mirror, branch="bot/gone", base_ref="origin/main", path=tmp_path / "gone")
    (wt.path / "dirty.txt").write_text("uncommitted\n")
    git("worktree", "lock", str(wt.path), cwd=mirror.path)  # --force --force removes a locked one too
    admin = wt.admin

    async def no_git(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a removal started git: {args}")

    monkeypatch.setattr(worktree_module, "run_git", no_git)
    monkeypatch.setattr(mirror_module, "run_git", no_git)
    await remove_worktree(wt)
    monkeypatch.undo()
    assert not wt.path.exists() and not admin.exists()
    assert git("worktree", "prune", "--dry-run", "-v", cwd=mirror.path) == ""
    listed = git("worktree", "list", "--porcelain", cwd=mirror.path)
    assert str(wt.path) not in listed and str(kept.path) in listed
    assert git("rev-parse", "refs/heads/bot/gone", cwd=mirror.path)  # its branch stays, as with git
    again = await add_worktree(mirror, branch="bot/gone", base_ref="origin/main", path=tmp_path / "gone")
    assert (again.path / "README.md").is_file() and not (again.path / "dirty.txt").exists()


async def _branch_writing(mirror: Mirror, tmp_path: Path, *, branch: str, files: dict[str, str]) -> None:
    wt = await add_worktree(
        mirror, branch=branch, base_ref="origin/main", path=tmp_path / branch.replace("/", "-")
    )
    for name, text in files.items():
        (wt.path / name).write_text(text)
    await stage_all(wt)
    await commit_staged(wt, message=branch, author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={})
    await remove_worktree(wt)


async def test_merge_branches_skips_conflicts_and_continues(mirror: Mirror, tmp_path: Path, git: Git) -> None:
    await _branch_writing(mirror, tmp_path, branch="bot/a", files={"a.txt": "a\n"})
    await _branch_writing(mirror, tmp_path, branch="bot/b", files={"README.md": "from b\n"})
    await _branch_writing(mirror, tmp_path, branch="bot/c", files={"README.md": "from c\n", "c.txt": "c\n"})
    await _branch_writing(mirror, tmp_path, branch="bot/d", files={"d.txt": "d\n"})

    wt = await add_worktree(mirror, branch="bot/integration", base_ref="origin/main", path=tmp_path / "int")
    outcome = await merge_branches(
        wt,
        ["bot/a", "bot/b", "bot/c", "bot/d"],
        author_name=BOT_NAME,
        author_email=BOT_EMAIL,
        message_for=lambda b: f"Merge {b} into integration",
    )
    assert outcome.merged == ["bot/a", "bot/b", "bot/d"]
    assert outcome.conflicts == {"bot/c": ["README.md"]}
    assert git("status", "--porcelain", cwd=wt.path) == ""  # the conflicting merge was aborted
    assert (wt.path / "README.md").read_text() == "from b\n"
    assert not (wt.path / "c.txt").exists()
    log = git("log", "--merges", "--format=%s|%an|%P", cwd=wt.path).splitlines()
    assert [line.split("|")[0] for line in log] == [
        "Merge bot/d into integration",
        "Merge bot/b into integration",
        "Merge bot/a into integration",
    ]
    assert all(line.split("|")[1] == BOT_NAME and len(line.split("|")[2].split()) == 2 for line in log)


async def test_a_tag_named_like_a_story_branch_is_not_merged_in_its_place(
    mirror: Mirror, tmp_path: Path, planted: str
) -> None:
    """Tags come from the remote (anyone who can push makes them): a merge names the branch itself."""
    await _branch_writing(mirror, tmp_path, branch="bot/s", files={"s.txt": "s\n"})
    wt = await add_worktree(mirror, branch="bot/int", base_ref="origin/main", path=tmp_path / "int")
    outcome = await merge_branches(
        wt, ["bot/s"], author_name=BOT_NAME, author_email=BOT_EMAIL, message_for=lambda b: f"Merge {b}"
    )
    assert outcome.merged == ["bot/s"]
    assert (wt.path / "s.txt").exists() and not (wt.path / "planted.txt").exists()


async def test_merge_of_unknown_branch_is_an_error_not_a_conflict(mirror: Mirror, tmp_path: Path) -> None:
    wt = await add_worktree(mirror, branch="bot/m", base_ref="origin/main", path=tmp_path / "m")
    with pytest.raises(WorkspaceError, match="bot/missing"):
        await merge_branches(
            wt, ["bot/missing"], author_name=BOT_NAME, author_email=BOT_EMAIL, message_for=lambda b: b
        )
