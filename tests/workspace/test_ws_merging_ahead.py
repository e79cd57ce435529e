"""Merges begun ahead (`Merging`, while a batch's last stories still run) and taken up by the
batch's merge (`merge_in_mirror`'s `ahead`): taken up only where they lead to the same commits a
merge from the base makes, never where a branch moved, the base differs or one conflicted."""

from __future__ import annotations

from pathlib import Path

from bot.workspace import Mirror
from bot.workspace.merging import Merging
from tests.workspace.test_ws_merging import BOT_EMAIL, BOT_NAME, Git, _branch
from tests.workspace.test_ws_merging import _in_mirror as _merge

OLD = "2001-02-03T04:05:06+00:00"
"""The committer date of merges made ahead here: what tells them from merges made again now."""


def _message(branch: str) -> str:
    return f"Merge {branch}"


async def _ahead(mirror: Mirror, branches: list[str], *, onto: str = "origin/main") -> Merging:
    merging = await Merging.start(
        mirror, await mirror.resolve(onto), author_name=BOT_NAME, author_email=BOT_EMAIL, message_for=_message
    )
    assert merging is not None
    merging.env["GIT_COMMITTER_DATE"] = OLD
    for branch in branches:
        assert await merging.add(branch)
    return merging


def _chain(git: Git, mirror: Mirror, head: str) -> list[str]:
    """Each merge down the first parents from `head`: its tree, message, author, committer and
    parents' trees (its dates aside)."""
    out = []
    merges = int(git("rev-list", "--count", "--merges", "--first-parent", head, cwd=mirror.path))
    for n in range(merges):
        commit = f"{head}~{n}"
        said = git("log", "-1", "--format=%T|%s|%an <%ae>|%cn <%ce>|%P", commit, cwd=mirror.path)
        *fields, parents = said.split("|")
        trees = [git("rev-parse", f"{p}^{{tree}}", cwd=mirror.path) for p in parents.split()]
        out.append("|".join([*fields, *trees]))
    return out


def _dates(git: Git, mirror: Mirror, head: str) -> list[str]:
    return git("log", "--merges", "--format=%s %cI", head, cwd=mirror.path).splitlines()


async def test_merges_made_ahead_are_taken_up_and_make_the_same_commits(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    await _branch(mirror, tmp_path, "bot/a", {"a.txt": "a\n"})
    await _branch(mirror, tmp_path, "bot/b", {"README.md": "from b\n"})
    await _branch(mirror, tmp_path, "bot/c", {"src/app.py": "print('v2')\n"})
    branches = ["bot/a", "bot/b", "bot/c"]
    ahead = await _ahead(mirror, branches[:2])
    made = ahead.head
    head = await _merge(mirror, branches, ahead)
    fresh = await _merge(mirror, branches, None)
    assert head is not None and fresh is not None
    assert _chain(git, mirror, head) == _chain(git, mirror, fresh)
    dates = _dates(git, mirror, head)
    assert dates[1:] == [f"Merge bot/b {OLD}", f"Merge bot/a {OLD}"]
    assert git("rev-parse", f"{head}^1", cwd=mirror.path) == made, "the last one merged onto them"


async def test_every_branch_merged_ahead_leaves_nothing_to_merge(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    await _branch(mirror, tmp_path, "bot/a", {"a.txt": "a\n"})
    await _branch(mirror, tmp_path, "bot/b", {"b.txt": "b\n"})
    ahead = await _ahead(mirror, ["bot/a", "bot/b"])
    assert await _merge(mirror, ["bot/a", "bot/b"], ahead) == ahead.head


async def test_a_branch_that_moved_since_it_was_merged_ahead_is_merged_again_from_the_base(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    """A story redone (or its commit made again by GitHub) after its merge ahead: what is merged
    is what the branch holds now, and nothing made ahead is kept."""
    await _branch(mirror, tmp_path, "bot/a", {"a.txt": "a\n"})
    await _branch(mirror, tmp_path, "bot/b", {"b.txt": "b\n"})
    ahead = await _ahead(mirror, ["bot/a"])
    await _branch(mirror, tmp_path, "bot/a", {"a.txt": "a, again\n"})
    head = await _merge(mirror, ["bot/a", "bot/b"], ahead)
    assert head is not None
    assert git("show", f"{head}:a.txt", cwd=mirror.path) == "a, again"
    assert not any(line.endswith(OLD) for line in _dates(git, mirror, head))


async def test_merges_ahead_onto_another_base_or_other_branches_or_messages_are_not_used(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    first = await _branch(mirror, tmp_path, "bot/a", {"a.txt": "a\n"})
    await _branch(mirror, tmp_path, "bot/b", {"b.txt": "b\n"})
    elsewhere = await _ahead(mirror, ["bot/b"], onto=first)
    other_order = await _ahead(mirror, ["bot/b"])
    worded = await _ahead(mirror, ["bot/a"])
    worded.message_for = lambda branch: f"Merged {branch}"
    for ahead in (elsewhere, other_order, worded):
        head = await _merge(mirror, ["bot/a", "bot/b"], ahead)
        assert head is not None
        assert git("log", "--merges", "--format=%s", head, cwd=mirror.path).splitlines() == [
            "Merge bot/b",
            "Merge bot/a",
        ]
        assert not any(line.endswith(OLD) for line in _dates(git, mirror, head))


async def test_merges_ahead_that_conflicted_are_not_taken_up(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    await _branch(mirror, tmp_path, "bot/b", {"README.md": "from b\n"})
    await _branch(mirror, tmp_path, "bot/c", {"README.md": "from c\n"})
    ahead = await _ahead(mirror, ["bot/b"])
    assert not await ahead.add("bot/c")
    assert ahead.conflicted
    assert await _merge(mirror, ["bot/b", "bot/c"], ahead) is None


async def test_the_next_batchs_base_merged_here_is_not_read_again(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    """A batch's base is the batch before it, merged here: its tree (and, on git before 2.43,
    whether it has a `.gitattributes`) is known, and asked of no git process again."""
    from tests.support import audit_threads

    await _branch(mirror, tmp_path, "bot/a", {"a.txt": "a\n"})
    await _branch(mirror, tmp_path, "bot/b", {"b.txt": "b\n"})
    first = await _merge(mirror, ["bot/a"], None)
    assert first is not None
    asked = audit_threads(
        "subprocess.Popen", lambda args: any(w in args[1] for w in ("rev-parse", "ls-tree"))
    )
    with asked as reads:
        merging = await Merging.start(
            mirror, first, author_name=BOT_NAME, author_email=BOT_EMAIL, message_for=_message
        )
    assert merging is not None and reads == []
    assert merging.head_tree == git("rev-parse", f"{first}^{{tree}}", cwd=mirror.path)
    assert await merging.add("bot/b", last=True) and await merging.result() is not None
