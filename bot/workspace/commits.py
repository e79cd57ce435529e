"""A branch's new commits as GitHub must make them again, and GitHub's commits taken back.

When GitHub makes the bot's commits through its API (so that it signs them), it needs, for
each local commit the remote does not have, oldest first: the message, the parents (GitHub's
own for those it just made), and the tree as changes against the first parent's tree (blobs
only for the files that changed). Git objects are named by their content, so a tree GitHub
builds from the same entries has the same sha as the local one; only commits differ (GitHub's
carry its signature and its dates).

Afterwards the mirror holds exactly what GitHub made: the branch is fetched back and every
local branch that pointed at a commit GitHub made again points at GitHub's commit, so later
merges, restacks and resumes build on the signed commits. Nothing here talks to GitHub.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.errors import WorkspaceError
from bot.workspace.mirror import Mirror, read_ref

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
BLOB_LIMIT = 100 * 2**20
"""Bytes of one file GitHub's blob API takes at most."""


@dataclass(frozen=True)
class Change:
    """One path of a commit's tree that differs from its first parent's."""

    path: str
    mode: str
    """`100644`, `100755`, `120000` (a symlink), `160000` (a submodule); the old one when removed."""
    sha: str | None
    """The blob (or submodule commit) at `path`; None when removed."""
    known: bool
    """The blob is in the parent's tree already (a move, a mode change): no need to send it."""


@dataclass(frozen=True)
class LocalCommit:
    """A commit of the mirror GitHub does not have, as GitHub must make it again."""

    sha: str
    tree: str
    parents: tuple[str, ...]
    parent_trees: tuple[str, ...]
    message: str
    signed: bool
    """It carries a signature (the bot's git never signs: it came from GitHub)."""
    changes: tuple[Change, ...]

    @property
    def base_tree(self) -> str | None:
        """The tree its changes apply to: its first parent's (None for a root commit)."""
        return self.parent_trees[0] if self.parent_trees else None


def _header(raw: str) -> tuple[dict[str, list[str]], str]:
    """A commit object's headers (continuation lines folded in) and its message."""
    head, _, message = raw.partition("\n\n")
    headers: dict[str, list[str]] = {}
    last = ""
    for line in head.split("\n"):
        if line.startswith(" ") and last:
            headers[last][-1] += "\n" + line[1:]
            continue
        key, _, value = line.partition(" ")
        headers.setdefault(key, []).append(value)
        last = key
    return headers, message


async def read_commit(mirror: Mirror, sha: str) -> tuple[str, tuple[str, ...], str, bool]:
    """(tree, parents, message, signed) of commit `sha`, read from its object."""
    found = await mirror.git("cat-file", "commit", sha)
    headers, message = _header(found.stdout)
    signed = bool(headers.get("gpgsig") or headers.get("gpgsig-sha256"))
    return headers["tree"][0], tuple(headers.get("parent", [])), message, signed


async def changes(mirror: Mirror, old_tree: str, new_tree: str) -> tuple[Change, ...]:
    """What differs from `old_tree` to `new_tree`, path by path (no rename detection)."""
    listed = await mirror.git("diff-tree", "-r", "-z", "--no-renames", "--raw", old_tree, new_tree)
    fields = listed.stdout.split("\0")
    out: list[Change] = []
    before: set[str] = set()
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(":") or not path:
            continue
        old_mode, new_mode, old_sha, new_sha, status = meta[1:].split()
        if old_mode != "000000":
            before.add(old_sha)
        if status.startswith("D"):
            out.append(Change(path=path, mode=old_mode, sha=None, known=True))
        else:
            out.append(Change(path=path, mode=new_mode, sha=new_sha, known=False))
    return tuple(
        Change(c.path, c.mode, c.sha, known=c.sha is None or c.sha in before or c.mode == "160000")
        for c in out
    )


async def to_publish(mirror: Mirror, tip: str) -> list[LocalCommit]:
    """The commits of `tip` the remote does not have (none of its branches as last fetched
    holds them), parents before children."""
    listed = await mirror.git("rev-list", "--topo-order", "--reverse", tip, "--not", "--remotes=origin", "--")
    commits: list[LocalCommit] = []
    trees: dict[str, str] = {}
    for sha in listed.stdout.split():
        tree, parents, message, signed = await read_commit(mirror, sha)
        parent_trees = []
        for parent in parents:
            if parent not in trees:
                trees[parent] = (await mirror.git("rev-parse", f"{parent}^{{tree}}")).stdout.strip()
            parent_trees.append(trees[parent])
        trees[sha] = tree
        diff = await changes(mirror, parent_trees[0] if parent_trees else EMPTY_TREE, tree)
        for other in parent_trees[1:]:  # a merge: what its other parents hold GitHub has already
            differ = await mirror.git("diff-tree", "-r", "-z", "--no-renames", "--name-only", other, tree)
            kept = {path for path in differ.stdout.split("\0") if path}
            diff = tuple(
                c if c.known or c.path in kept else Change(c.path, c.mode, c.sha, True) for c in diff
            )
        commits.append(LocalCommit(sha, tree, parents, tuple(parent_trees), message, signed, diff))
    return commits


async def blob(mirror: Mirror, sha: str) -> bytes:
    """A blob's bytes (at most `BLOB_LIMIT`)."""
    found = await mirror.git("cat-file", "blob", sha, raw=True, max_output=BLOB_LIMIT)
    return found.raw


async def take_back(mirror: Mirror, branch: str, head: str, made: dict[str, str]) -> None:
    """After GitHub moved `branch` to `head` (its commits `made` of the local ones, remembered by
    the mirror before): fetch the branch, check the mirror has `head`, and point every local branch
    that held a commit GitHub made again at GitHub's commit (a compare-and-swap per ref), `branch`
    itself at `head`."""
    await mirror.git(
        "fetch", "--no-tags", "--force", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}",
        remote=True,
    )  # fmt: skip
    present = await mirror.git("cat-file", "-e", f"{head}^{{commit}}", check=False)
    if present.returncode != 0:
        raise WorkspaceError(
            f"GitHub moved {branch} to {head[:12]}, but the commit could not be fetched back (someone "
            "pushed over it at once?): the mirror keeps its own commits"
        )
    if made:
        refs = await mirror.git("for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/")
        for line in refs.stdout.splitlines():
            sha, _, ref = line.partition(" ")
            if sha in made and ref != f"refs/heads/{branch}":
                await mirror.git("update-ref", ref, made[sha], sha, check=False)
    local = f"refs/heads/{branch}"
    current = read_ref(mirror.path, local)
    if current != head:
        await mirror.git("update-ref", local, head)
