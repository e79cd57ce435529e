"""Merging story branches in the mirror itself, without checking anything out.

`merge_in_mirror` makes the merge commits `merge_branches` makes in a worktree (`git merge
--no-ff`, one commit each, the same tree, parents, message and identity) with `git merge-tree
--write-tree` and `git commit-tree`: a batch merged cleanly needs no worktree of its own (its
registration under the worktree lock, its checkout, its removal), which is most of a merge's
time on a small tree and more on a large one. It gives way (None) wherever the result could
differ, and the caller merges in a worktree as before (as it does with git before 2.38, whose
`merge-tree` writes no tree):

- a conflict: the worktree's merge names the conflicting paths and the refactor phase re-runs
  the story on the merged branch;
- attributes that steer a merge (`merge=union`, `-merge`, ... in a `.gitattributes`): git 2.43
  and later read them from the head being merged into (`attr.tree`), as a checkout of it
  would; older git reads none in a bare repository, so there a batch whose base or result has
  a `.gitattributes` anywhere is merged in a worktree.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence

from bot.errors import WorkspaceError
from bot.workspace.git import run_git
from bot.workspace.mirror import Mirror, read_ref

WRITE_TREE = (2, 38)
"""The first git whose `merge-tree` writes a merge's tree (`--write-tree`); before it, worktrees."""
ATTR_TREE = (2, 43)
"""The first git whose merges in a bare repository read attributes from a tree (`attr.tree`)."""
_versions: dict[str, tuple[int, int]] = {}


async def merge_in_mirror(
    mirror: Mirror,
    onto: str,
    branches: Sequence[str],
    *,
    author_name: str,
    author_email: str,
    message_for: Callable[[str], str],
) -> str | None:
    """The commit that merging each of `branches` (`refs/heads/<branch>`, in order) onto the
    commit `onto` makes, as `merge_branches` would in a worktree on `onto`: a merge commit each,
    none for a branch already in it. None when one conflicts, or when this git would not see the
    attributes a checkout would (see the module): nothing is lost then, since no ref moved (only
    objects were written); the caller moves its branch to what is returned."""
    version = await git_version(mirror)
    if version < WRITE_TREE:
        return None
    attr_tree = version >= ATTR_TREE
    commits = [await _commit(mirror, branch) for branch in branches]
    if attr_tree:
        head_tree = await _tree(mirror, onto)
    else:
        head_tree, attributes = await asyncio.gather(_tree(mirror, onto), _has_attributes(mirror, onto))
        if attributes:
            return None
    env = mirror.local_env(
        {
            "GIT_AUTHOR_NAME": author_name,
            "GIT_AUTHOR_EMAIL": author_email,
            "GIT_COMMITTER_NAME": author_name,
            "GIT_COMMITTER_EMAIL": author_email,
        }
    )
    head, checked = onto, None
    for n, (branch, commit) in enumerate(zip(branches, commits, strict=True), start=1):
        attrs = ("-c", f"attr.tree={head}") if attr_tree else ()
        merged = await run_git(
            [*attrs, "merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", head, commit],
            cwd=mirror.path,
            env=env,
            check=False,
        )
        if merged.returncode == 1:
            return None  # a conflict
        if merged.returncode != 0:
            raise WorkspaceError(f"merging {branch} failed: {merged.stderr.strip()[-2000:]}")
        tree = merged.stdout.split("\0", 1)[0]
        if tree == head_tree:  # nothing new: `git merge` makes no commit for a branch already in
            inside = await mirror.git("merge-base", "--is-ancestor", commit, head, check=False)
            if inside.returncode == 0:
                continue
        if not attr_tree and n == len(branches):  # the result's attributes, read beside its commit
            checked = asyncio.ensure_future(_has_attributes(mirror, tree))
        try:
            made = await run_git(
                ["commit-tree", "--no-gpg-sign", "-p", head, "-p", commit, "-m", message_for(branch), tree],
                cwd=mirror.path,
                env=env,
            )
        except BaseException:
            if checked is not None:
                checked.cancel()
            raise
        head, head_tree = made.stdout.strip(), tree
    if checked is not None:
        brought = await checked
    else:
        brought = not attr_tree and head != onto and await _has_attributes(mirror, head_tree)
    return None if brought else head  # attributes a story brought: its batch-mates' merges read them


async def _commit(mirror: Mirror, branch: str) -> str:
    """The commit local `branch` holds (the branch itself, never a tag of the same name), as
    `Run.commit_of` reads it: from git's files, else asked of git (WorkspaceError: none)."""
    ref = f"refs/heads/{branch}"
    return read_ref(mirror.path, ref) or await mirror.resolve(ref)


async def _tree(mirror: Mirror, commit: str) -> str:
    result = await mirror.git("rev-parse", "--verify", "--end-of-options", f"{commit}^{{tree}}")
    return result.stdout.strip()


async def _has_attributes(mirror: Mirror, commit: str) -> bool:
    """Whether the tree of `commit` has a `.gitattributes` file anywhere."""
    listed = await mirror.git(
        "ls-tree", "-r", "-z", "--name-only", "--end-of-options", commit, max_output=2**30
    )
    return any(name.rsplit("/", 1)[-1] == ".gitattributes" for name in listed.stdout.split("\0"))


async def git_version(mirror: Mirror) -> tuple[int, int]:
    """(major, minor) of the git the bot runs, asked once."""
    found = _versions.get("git")
    if found is None:
        said = (await mirror.git("--version")).stdout
        match = re.search(r"(\d+)\.(\d+)", said)
        found = _versions["git"] = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    return found
