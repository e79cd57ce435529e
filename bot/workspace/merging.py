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
from typing import TypeVar

from bot.errors import WorkspaceError
from bot.workspace.git import run_git
from bot.workspace.mirror import Mirror, read_ref

WRITE_TREE = (2, 38)
"""The first git whose `merge-tree` writes a merge's tree (`--write-tree`); before it, worktrees."""
ATTR_TREE = (2, 43)
"""The first git whose merges in a bare repository read attributes from a tree (`attr.tree`)."""
_versions: dict[str, tuple[int, int]] = {}
T = TypeVar("T")


async def merge_in_mirror(
    mirror: Mirror,
    onto: str,
    branches: Sequence[str],
    *,
    author_name: str,
    author_email: str,
    message_for: Callable[[str], str],
    ahead: Merging | None = None,
) -> str | None:
    """The commit that merging each of `branches` (`refs/heads/<branch>`, in order) onto the
    commit `onto` makes, as `merge_branches` would in a worktree on `onto`: a merge commit each,
    none for a branch already in it. None when one conflicts, or when this git would not see the
    attributes a checkout would (see the module): nothing is lost then, since no ref moved (only
    objects were written); the caller moves its branch to what is returned.

    `ahead`: the same merges begun earlier (`Merging.start`, while the batch's last stories still
    ran); taken up where it is when it merged a first part of these branches onto `onto`, each at
    the commit it holds now, with the same author and messages; else it is not used."""
    author = (author_name, author_email)
    merging = None
    if ahead is not None and await ahead.leads_to(onto, branches, author=author, message_for=message_for):
        merging = ahead
    if merging is None:
        merging = await Merging.start(
            mirror, onto, author_name=author_name, author_email=author_email, message_for=message_for
        )
    if merging is None:
        return None
    rest = list(branches)[len(merging.merged) :]
    for n, branch in enumerate(rest, start=1):
        if not await merging.add(branch, last=n == len(rest)):
            return None
    return await merging.result()


class Merging:
    """Merges in the mirror, one branch at a time (`add`), onto a commit: `merge_in_mirror`'s steps,
    which a caller may begin before it knows every branch (`merge_in_mirror`'s `ahead`)."""

    def __init__(
        self,
        mirror: Mirror,
        onto: str,
        head_tree: str,
        *,
        attr_tree: bool,
        env: dict[str, str],
        message_for: Callable[[str], str],
    ) -> None:
        self.mirror, self.onto, self.attr_tree, self.env = mirror, onto, attr_tree, env
        self.message_for = message_for
        self.head, self.head_tree = onto, head_tree
        self.merged: list[tuple[str, str]] = []
        """(branch, the commit it held) of each branch merged, in order."""
        self.conflicted = False
        self._checked: asyncio.Future[bool] | None = None

    @classmethod
    async def start(
        cls,
        mirror: Mirror,
        onto: str,
        *,
        author_name: str,
        author_email: str,
        message_for: Callable[[str], str],
    ) -> Merging | None:
        """Merges onto `onto` made as `author`; None where this git cannot make them (see the module)."""
        version = await git_version(mirror)
        if version < WRITE_TREE:
            return None
        attr_tree = version >= ATTR_TREE
        if attr_tree or (str(mirror.path), onto) in _TREES:  # known: the batch before, merged here
            head_tree = await _tree(mirror, onto)
            attributes = not attr_tree and await _has_attributes(mirror, head_tree)
        else:  # both asked of git, side by side
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
        return cls(mirror, onto, head_tree, attr_tree=attr_tree, env=env, message_for=message_for)

    async def leads_to(
        self,
        onto: str,
        branches: Sequence[str],
        *,
        author: tuple[str, str],
        message_for: Callable[[str], str],
    ) -> bool:
        """Whether these merges are the first of merging `branches` onto `onto` as `author` (name,
        email) with these messages: the same base, a first part of the same branches, each still
        at the commit it was merged at."""
        if self.conflicted or self.onto != onto or len(self.merged) > len(branches):
            return False
        if (self.env["GIT_AUTHOR_NAME"], self.env["GIT_AUTHOR_EMAIL"]) != author:
            return False
        for (branch, commit), wanted in zip(self.merged, branches, strict=False):
            if branch != wanted or message_for(branch) != self.message_for(branch):
                return False
            if await _commit(self.mirror, branch) != commit:
                return False
        return True

    async def add(self, branch: str, *, last: bool = False) -> bool:
        """Merge `branch` (`refs/heads/<branch>`) onto the head; False when it conflicts (then no
        more can be added). `last`: the result's attributes are listed beside its commit."""
        commit = await _commit(self.mirror, branch)
        attrs = ("-c", f"attr.tree={self.head}") if self.attr_tree else ()
        merged = await run_git(
            [*attrs, "merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", self.head, commit],
            cwd=self.mirror.path,
            env=self.env,
            check=False,
        )
        if merged.returncode == 1:
            self.conflicted = True
            return False
        if merged.returncode != 0:
            raise WorkspaceError(f"merging {branch} failed: {merged.stderr.strip()[-2000:]}")
        tree = merged.stdout.split("\0", 1)[0]
        if tree == self.head_tree:  # nothing new: `git merge` makes no commit for a branch already in
            inside = await self.mirror.git("merge-base", "--is-ancestor", commit, self.head, check=False)
            if inside.returncode == 0:
                self.merged.append((branch, commit))
                return True
        if not self.attr_tree and last:  # the result's attributes, read beside its commit
            self.forget_check()
            self._checked = asyncio.ensure_future(_has_attributes(self.mirror, tree))
        try:
            made = await run_git(
                [
                    "commit-tree",
                    "--no-gpg-sign",
                    "-p",
                    self.head,
                    "-p",
                    commit,
                    "-m",
                    self.message_for(branch),
                    tree,
                ],
                cwd=self.mirror.path,
                env=self.env,
            )
        except BaseException:
            self.forget_check()
            raise
        self.head, self.head_tree = made.stdout.strip(), tree
        _remember(_TREES, (str(self.mirror.path), self.head), tree)
        self.merged.append((branch, commit))
        return True

    async def result(self) -> str | None:
        """The merged head; None when a story brought attributes this git would not read in the
        mirror (then its batch-mates' merges must be made in a worktree, which reads them)."""
        checked, self._checked = self._checked, None
        if checked is not None:
            brought = await checked
        else:
            brought = (
                not self.attr_tree
                and self.head != self.onto
                and await _has_attributes(self.mirror, self.head_tree)
            )
        return None if brought else self.head

    def forget_check(self) -> None:
        """Stop reading the result's attributes (merges not taken up, or given up)."""
        if self._checked is not None:
            self._checked.cancel()
            self._checked = None


async def _commit(mirror: Mirror, branch: str) -> str:
    """The commit local `branch` holds (the branch itself, never a tag of the same name), as
    `Run.commit_of` reads it: from git's files, else asked of git (WorkspaceError: none)."""
    ref = f"refs/heads/{branch}"
    return read_ref(mirror.path, ref) or await mirror.resolve(ref)


async def _tree(mirror: Mirror, commit: str) -> str:
    key = (str(mirror.path), commit)
    found = _TREES.get(key)
    if found is None:
        result = await mirror.git("rev-parse", "--verify", "--end-of-options", f"{commit}^{{tree}}")
        found = _remember(_TREES, key, result.stdout.strip())
    return found


async def _has_attributes(mirror: Mirror, name: str) -> bool:
    """Whether the tree of `name` (a commit or a tree) has a `.gitattributes` file anywhere."""
    key = (str(mirror.path), name)
    found = _ATTRIBUTES.get(key)
    if found is None:
        listed = await mirror.git(
            "ls-tree", "-r", "-z", "--name-only", "--end-of-options", name, max_output=2**30
        )
        names = listed.stdout.split("\0")
        found = _remember(_ATTRIBUTES, key, any(n.rsplit("/", 1)[-1] == ".gitattributes" for n in names))
    return found


_TREES: dict[tuple[str, str], str] = {}
"""(mirror, commit) → its tree: a fact of the commit, which never changes (a batch's base is the
batch before it, merged here: its tree is known, and not asked of git again)."""
_ATTRIBUTES: dict[tuple[str, str], bool] = {}
"""(mirror, commit or tree) → whether its tree has a `.gitattributes` anywhere (likewise)."""
KNOWN_KEEP = 2048
"""Facts kept at most of each kind (the oldest forgotten first)."""


def _remember(known: dict[tuple[str, str], T], key: tuple[str, str], value: T) -> T:
    if len(known) >= KNOWN_KEEP:
        known.pop(next(iter(known)))
    known[key] = value
    return value


async def git_version(mirror: Mirror) -> tuple[int, int]:
    """(major, minor) of the git the bot runs, asked once."""
    found = _versions.get("git")
    if found is None:
        said = (await mirror.git("--version")).stdout
        match = re.search(r"(\d+)\.(\d+)", said)
        found = _versions["git"] = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    return found
