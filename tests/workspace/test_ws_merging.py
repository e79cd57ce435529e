"""Merging in the mirror (`merge_in_mirror`) against merging in a worktree (`merge_branches`):
the same commits where it merges, and None (nothing moved) wherever they could differ."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.errors import WorkspaceError
from bot.workspace import (
    Mirror,
    add_worktree,
    commit_staged,
    merge_branches,
    merging,
    remove_worktree,
    stage_all,
)
from bot.workspace.merging import Merging, merge_in_mirror

BOT_NAME = "plan-cascade[bot]"
BOT_EMAIL = "123+plan-cascade[bot]@users.noreply.github.com"
Git = Callable[..., str]


def _git_version() -> tuple[int, ...]:
    said = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout
    return tuple(int(x) for x in said.split()[2].split(".")[:2])


async def _branch(
    mirror: Mirror, tmp_path: Path, branch: str, files: dict[str, str], base: str = "origin/main"
) -> str:
    wt = await add_worktree(mirror, branch=branch, base_ref=base, path=tmp_path / branch.replace("/", "-"))
    for name, text in files.items():
        (wt.path / name).parent.mkdir(parents=True, exist_ok=True)
        (wt.path / name).write_text(text)
    await stage_all(wt)
    sha = await commit_staged(wt, message=branch, author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={})
    await remove_worktree(wt)
    assert sha
    return sha


async def _in_worktree(mirror: Mirror, tmp_path: Path, branches: list[str]) -> tuple[str, list[str]]:
    wt = await add_worktree(mirror, branch="bot/by-worktree", base_ref="origin/main", path=tmp_path / "by-wt")
    outcome = await merge_branches(
        wt, branches, author_name=BOT_NAME, author_email=BOT_EMAIL, message_for=lambda b: f"Merge {b}"
    )
    head = (await wt.git("rev-parse", "HEAD")).stdout.strip()
    await remove_worktree(wt)
    return head, outcome.merged


async def _in_mirror(mirror: Mirror, branches: list[str], ahead: Merging | None = None) -> str | None:
    return await merge_in_mirror(
        mirror,
        await mirror.resolve("origin/main"),
        branches,
        author_name=BOT_NAME,
        author_email=BOT_EMAIL,
        message_for=lambda b: f"Merge {b}",
        ahead=ahead,
    )


def _commits(git: Git, mirror: Mirror, head: str) -> list[str]:
    """Each commit from `head` back: tree, parents' trees, message, author and committer. In
    graph order (`--topo-order`), never by date: two histories of the same shape made a second
    apart would interleave their side branches differently by date."""
    lines = git(
        "log", "--topo-order", "--format=%T|%s|%an <%ae>|%cn <%ce>|%P", head, cwd=mirror.path
    ).splitlines()
    out = []
    for line in lines:
        tree, subject, author, committer, parents = line.split("|")
        parent_trees = [git("rev-parse", f"{p}^{{tree}}", cwd=mirror.path) for p in parents.split()]
        out.append("|".join([tree, subject, author, committer, *parent_trees]))
    return out


async def test_clean_merges_make_the_commits_a_worktree_merge_makes(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    await _branch(mirror, tmp_path, "bot/a", {"a.txt": "a\n"})
    await _branch(mirror, tmp_path, "bot/b", {"README.md": "from b\n", "src/b.py": "b = 1\n"})
    await _branch(mirror, tmp_path, "bot/c", {"src/app.py": "print('v2')\n"})
    branches = ["bot/a", "bot/b", "bot/c"]
    refs_before = git("for-each-ref", cwd=mirror.path)
    head = await _in_mirror(mirror, branches)
    assert head is not None
    assert git("for-each-ref", cwd=mirror.path) == refs_before, "no ref moves: the caller moves its branch"
    by_worktree, merged = await _in_worktree(mirror, tmp_path, branches)
    assert merged == branches
    assert _commits(git, mirror, head) == _commits(git, mirror, by_worktree)
    assert git("log", "--merges", "--format=%s", head, cwd=mirror.path).splitlines() == [
        "Merge bot/c",
        "Merge bot/b",
        "Merge bot/a",
    ]
    assert git("cat-file", "-p", head, cwd=mirror.path).count("\nparent ") == 2


async def test_a_branch_already_in_the_head_makes_no_commit_as_in_a_worktree(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    """`git merge` says "Already up to date" for a branch the head holds: no empty merge commit."""
    first = await _branch(mirror, tmp_path, "bot/a", {"a.txt": "a\n"})
    await _branch(mirror, tmp_path, "bot/again", {"b.txt": "b\n"}, base=first)
    head = await _in_mirror(mirror, ["bot/again", "bot/a"])
    by_worktree, merged = await _in_worktree(mirror, tmp_path, ["bot/again", "bot/a"])
    assert merged == ["bot/again", "bot/a"]
    assert head is not None and _commits(git, mirror, head) == _commits(git, mirror, by_worktree)
    assert git("log", "--merges", "--format=%s", head, cwd=mirror.path).splitlines() == ["Merge bot/again"]


async def test_a_conflict_gives_way_to_the_worktree_and_moves_nothing(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    await _branch(mirror, tmp_path, "bot/b", {"README.md": "from b\n"})
    await _branch(mirror, tmp_path, "bot/c", {"README.md": "from c\n"})
    refs_before = git("for-each-ref", cwd=mirror.path)
    assert await _in_mirror(mirror, ["bot/b", "bot/c"]) is None
    assert git("for-each-ref", cwd=mirror.path) == refs_before


async def test_an_unknown_branch_is_an_error_not_a_conflict(mirror: Mirror) -> None:
    with pytest.raises(WorkspaceError, match="bot/missing"):
        await _in_mirror(mirror, ["bot/missing"])


async def test_a_tag_named_like_the_branch_is_never_merged_in_its_place(
    mirror: Mirror, tmp_path: Path, git: Git, planted: str
) -> None:
    await _branch(mirror, tmp_path, "bot/s", {"s.txt": "s\n"})
    head = await _in_mirror(mirror, ["bot/s"])
    assert head is not None
    names = git("ls-tree", "-r", "--name-only", head, cwd=mirror.path).splitlines()
    assert "s.txt" in names and "planted.txt" not in names


NEWS = "".join(f"line {n}\n" for n in range(1, 8))
BINARY = "NEWS merge=binary\n"
"""Attributes that make a worktree's merge conflict where a merge reading none is clean."""


async def _attributes_in(where: str, mirror: Mirror, tmp_path: Path, git: Git, seed: Path) -> None:
    """Two stories changing far apart lines of NEWS, whose merge `BINARY` (in the base, or
    brought by the first story) makes a conflict."""
    (seed / "NEWS").write_text(NEWS)
    if where == "base":
        (seed / ".gitattributes").write_text(BINARY)
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "news", cwd=seed)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=seed)
    await mirror.fetch()
    first = {"NEWS": NEWS.replace("line 1\n", "line one\n")}
    if where == "story":
        first[".gitattributes"] = BINARY
    await _branch(mirror, tmp_path, "bot/one", first)
    await _branch(mirror, tmp_path, "bot/two", {"NEWS": NEWS.replace("line 7\n", "line seven\n")})


@pytest.mark.parametrize("where", ["base", "story"])
async def test_attributes_a_bare_repository_cannot_read_leave_the_merge_to_a_worktree(
    mirror: Mirror, tmp_path: Path, git: Git, seed: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Before git 2.43 a merge in a bare repository reads no `.gitattributes`: where the base or
    a story has one, a worktree merges (which here sees the conflict `merge=binary` makes)."""
    monkeypatch.setitem(merging._versions, "git", (2, 39))
    await _attributes_in(where, mirror, tmp_path, git, seed)
    assert await _in_mirror(mirror, ["bot/one", "bot/two"]) is None
    _head, merged = await _in_worktree(mirror, tmp_path, ["bot/one", "bot/two"])
    assert merged == ["bot/one"], "the worktree's merge read the attributes"


async def test_without_attributes_an_older_git_merges_in_the_mirror(
    mirror: Mirror, tmp_path: Path, git: Git, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(merging._versions, "git", (2, 39))
    await _branch(mirror, tmp_path, "bot/a", {"a.txt": "a\n"})
    head = await _in_mirror(mirror, ["bot/a"])
    by_worktree, _ = await _in_worktree(mirror, tmp_path, ["bot/a"])
    assert head is not None and _commits(git, mirror, head) == _commits(git, mirror, by_worktree)


@pytest.mark.skipif(
    _git_version() < merging.ATTR_TREE,
    reason="git before 2.43 has no attr.tree: such merges go to a worktree (tested above)",
)
@pytest.mark.parametrize("where", ["base", "story"])
async def test_a_newer_git_reads_the_heads_attributes_in_the_mirror(
    mirror: Mirror, tmp_path: Path, git: Git, seed: Path, where: str
) -> None:
    await _attributes_in(where, mirror, tmp_path, git, seed)
    assert await _in_mirror(mirror, ["bot/one", "bot/two"]) is None, "the conflict the attributes make"


async def test_a_git_whose_merge_tree_writes_no_tree_leaves_every_merge_to_a_worktree(
    mirror: Mirror, tmp_path: Path, git: Git, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(merging._versions, "git", (2, 37))
    await _branch(mirror, tmp_path, "bot/a", {"a.txt": "a\n"})
    refs_before = git("for-each-ref", cwd=mirror.path)
    assert await _in_mirror(mirror, ["bot/a"]) is None
    assert git("for-each-ref", cwd=mirror.path) == refs_before
