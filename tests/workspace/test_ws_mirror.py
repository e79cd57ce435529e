"""Mirror against a real bare "remote" over file://."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.errors import WorkspaceError
from bot.workspace import Mirror, PushRejected, add_worktree, commit_staged, mirror_slug, stage_all

BOT_NAME = "plan-cascade[bot]"
BOT_EMAIL = "123+plan-cascade[bot]@users.noreply.github.com"
Git = Callable[..., str]


def test_mirror_slug_drops_scheme_and_credentials() -> None:
    assert mirror_slug("https://x-access-token:abc@github.com/octo/repo.git") == "github.com_octo_repo"
    assert mirror_slug("git@github.com:octo/repo.git") == "github.com_octo_repo"
    assert mirror_slug("file:///tmp/a b/remote.git") == "tmp_a_b_remote"


async def test_ensure_clones_bare_with_local_config(mirror: Mirror, remote: Path, git: Git) -> None:
    assert mirror.path == mirror.root / "mirrors" / f"{mirror_slug(remote.as_uri())}.git"
    assert git("rev-parse", "--is-bare-repository", cwd=mirror.path) == "true"
    assert (
        git("config", "--local", "remote.origin.fetch", cwd=mirror.path)
        == "+refs/heads/*:refs/remotes/origin/*"
    )
    assert git("config", "--local", "user.useConfigOnly", cwd=mirror.path) == "true"
    assert await mirror.resolve("origin/main") == git("rev-parse", "main", cwd=remote)


async def test_ensure_is_idempotent_and_concurrent_safe(tmp_path: Path, remote: Path, home: Path) -> None:
    mirror = Mirror(root=tmp_path / "w", clone_url=remote.as_uri(), env={"HOME": str(home)})
    await asyncio.gather(mirror.ensure(), mirror.ensure(), mirror.fetch())
    await mirror.ensure()
    assert mirror.exists()
    assert [p.name for p in (tmp_path / "w" / "mirrors").iterdir()] == [mirror.path.name]


async def test_fetch_sees_new_commits_and_prunes(mirror: Mirror, seed: Path, git: Git) -> None:
    git("checkout", "-q", "-b", "feature", cwd=seed)
    (seed / "f.txt").write_text("x\n")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "feature", cwd=seed)
    git("push", "-q", "origin", "feature", cwd=seed)
    await mirror.fetch()
    assert await mirror.resolve("origin/feature") == git("rev-parse", "HEAD", cwd=seed)

    git("push", "-q", "origin", "--delete", "feature", cwd=seed)
    await mirror.fetch()
    with pytest.raises(WorkspaceError, match="does not name a commit"):
        await mirror.resolve("origin/feature")


async def test_fetch_mirrors_tags_new_moved_and_deleted(mirror: Mirror, seed: Path, git: Git) -> None:
    """A project's version comes from its tags (setuptools-scm): the mirror has them as the remote has."""
    first = git("rev-parse", "HEAD", cwd=seed)
    (seed / "f.txt").write_text("x\n")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "second", cwd=seed)
    git("tag", "-a", "v2.0", "-m", "release", cwd=seed)
    git("push", "-q", "origin", "HEAD:main", "v2.0", cwd=seed)
    await mirror.fetch()
    assert git("describe", "--tags", "origin/main", cwd=mirror.path) == "v2.0"

    git("tag", "v1.0", first, cwd=seed)  # a tag added later on a commit the mirror already has
    git("tag", "-f", "-a", "v2.0", "-m", "release, again", first, cwd=seed)  # a release re-tagged
    git("push", "-q", "--force", "origin", "v1.0", "v2.0", cwd=seed)
    git("tag", "gone", cwd=seed)
    git("push", "-q", "origin", "gone", cwd=seed)
    await mirror.fetch()
    git("push", "-q", "origin", "--delete", "gone", cwd=seed)
    await mirror.fetch()
    listed = ("for-each-ref", "--format=%(refname:short) %(objectname) %(*objectname)", "refs/tags")
    tags = git(*listed, cwd=mirror.path)
    assert tags == git(*listed, cwd=seed.parent / "remote.git")
    assert "gone" not in tags and git("rev-parse", "v2.0^{commit}", cwd=mirror.path) == first


async def test_default_branch_and_remote_sha(mirror: Mirror, remote: Path, git: Git) -> None:
    assert await mirror.default_branch() == "main"
    assert await mirror.remote_sha("main") == git("rev-parse", "main", cwd=remote)
    assert await mirror.remote_sha("nope") is None


async def _commit_on(mirror: Mirror, *, branch: str, path: Path, base_ref: str = "origin/main") -> str:
    wt = await add_worktree(mirror, branch=branch, base_ref=base_ref, path=path)
    (wt.path / f"{branch.replace('/', '-')}.txt").write_text(f"{branch}\n")
    await stage_all(wt)
    sha = await commit_staged(
        wt, message=f"work on {branch}", author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={}
    )
    assert sha is not None
    return sha


async def test_push_new_branch_then_lease_then_rejected_after_foreign_push(
    mirror: Mirror, tmp_path: Path, remote: Path, seed: Path, git: Git
) -> None:
    first = await _commit_on(mirror, branch="bot/task-1", path=tmp_path / "wt1")
    await mirror.push("bot/task-1", expected_remote_sha=None)
    assert git("rev-parse", "bot/task-1", cwd=remote) == first

    # Retrying the same push is harmless (a redelivered job).
    await mirror.push("bot/task-1", expected_remote_sha=None)

    wt = tmp_path / "wt1"
    (wt / "more.txt").write_text("more\n")
    more = await add_worktree(mirror, branch="bot/task-1", base_ref="origin/main", path=wt)
    await stage_all(more)
    second = await commit_staged(
        more,
        message="more",
        author_name=BOT_NAME,
        author_email=BOT_EMAIL,
        trailers={},
    )
    await mirror.push("bot/task-1", expected_remote_sha=first)
    assert git("rev-parse", "bot/task-1", cwd=remote) == second

    # Someone else pushes to the branch: our lease on `second` no longer holds.
    git("fetch", "-q", "origin", cwd=seed)
    git("checkout", "-q", "-b", "foreign", "origin/bot/task-1", cwd=seed)
    (seed / "foreign.txt").write_text("theirs\n")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "foreign", cwd=seed)
    git("push", "-q", "origin", "HEAD:refs/heads/bot/task-1", cwd=seed)
    foreign = git("rev-parse", "HEAD", cwd=seed)

    (wt / "third.txt").write_text("third\n")
    wt_obj = await add_worktree(mirror, branch="bot/task-1", base_ref="origin/main", path=wt)
    await stage_all(wt_obj)
    await commit_staged(wt_obj, message="third", author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={})
    with pytest.raises(PushRejected, match="bot/task-1"):
        await mirror.push("bot/task-1", expected_remote_sha=second, force=True)
    assert git("rev-parse", "bot/task-1", cwd=remote) == foreign


async def test_push_without_force_refuses_non_fast_forward(
    mirror: Mirror, tmp_path: Path, remote: Path
) -> None:
    first = await _commit_on(mirror, branch="bot/a", path=tmp_path / "wt")
    await mirror.push("bot/a", expected_remote_sha=None)
    # Rebuild the branch from scratch: the remote sha is no longer an ancestor.
    wt = await add_worktree(mirror, branch="bot/a", base_ref="origin/main", path=tmp_path / "wt", reset=True)
    (wt.path / "other.txt").write_text("other\n")
    await stage_all(wt)
    rebuilt = await commit_staged(
        wt, message="redo", author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={}
    )
    with pytest.raises(PushRejected, match="fast-forward"):
        await mirror.push("bot/a", expected_remote_sha=first)
    await mirror.push("bot/a", expected_remote_sha=first, force=True)
    assert await mirror.remote_sha("bot/a") == rebuilt


async def test_push_new_branch_refused_when_it_appeared_meanwhile(
    mirror: Mirror, tmp_path: Path, remote: Path, seed: Path, git: Git
) -> None:
    git("checkout", "-q", "-b", "bot/b", cwd=seed)
    (seed / "theirs.txt").write_text("theirs\n")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "theirs", cwd=seed)
    git("push", "-q", "origin", "bot/b", cwd=seed)
    theirs = git("rev-parse", "HEAD", cwd=seed)

    await _commit_on(mirror, branch="bot/b", path=tmp_path / "wt")
    with pytest.raises(PushRejected, match="bot/b"):
        await mirror.push("bot/b", expected_remote_sha=None)
    assert git("rev-parse", "bot/b", cwd=remote) == theirs
