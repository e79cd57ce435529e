"""Verified commits: GitHub makes the bot's commits through its API, signs them, shows them Verified.

An App cannot register a GPG or SSH key: what local git commits is unsigned, "Unverified" on
GitHub, refused by a ruleset that requires signed commits. GitHub signs what it makes for an
App's installation token itself: a commit made through the Git database API
(`POST /git/commits`) with no author, committer or signature given (GitHub's "signature
verification for bots"), authored by the App's bot. `ApiPusher` publishes a mirror's branch
that way, commit for commit: the same tree (blobs only for the files that changed; small text
files go inside the tree request, the rest as blobs), the same message, the parents GitHub has
(its own for the commits it just made); then one compare-and-swap of the branch (GraphQL
`updateRefs` with the value the bot last saw, so a concurrent push is never overwritten, a
restack's non-fast-forward included). The mirror then takes GitHub's commits back, so later
merges, restacks and resumes build on them.

A crash after GitHub moved the branch but before the mirror took its commits leaves the
branch on GitHub's copy of the local head: the mirror wrote down which commit GitHub made of
which before the branch moved, so the next push adopts GitHub's copy instead of making another.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from bot.errors import WorkspaceError
from bot.github.client_git import RefUpdateRefused
from bot.github.port import GitHubPort
from bot.workspace.commits import LocalCommit, blob, take_back, to_publish
from bot.workspace.git import PushRejected
from bot.workspace.mirror import Mirror

log = logging.getLogger(__name__)
INLINE_FILE = 256 * 1024
"""Bytes of a text file sent inside the tree request (GitHub makes its blob); larger ones are blobs."""
INLINE_TOTAL = 2 * 2**20
"""Bytes of text inside one tree request at most; the rest goes as blobs."""


@dataclass
class Tally:
    """Requests an `ApiPusher` made (for the bench and the logs)."""

    blobs: int = 0
    trees: int = 0
    commits: int = 0
    ref_updates: int = 0
    unverified: list[str] = field(default_factory=list)
    """Commits GitHub made but did not sign (a token that is not an App's, a custom identity)."""

    @property
    def writes(self) -> int:
        return self.blobs + self.trees + self.commits + self.ref_updates


def _text(data: bytes) -> str | None:
    """`data` as text safe to send inside JSON unchanged: UTF-8, no NUL, no carriage return."""
    if b"\0" in data or b"\r" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


class ApiPusher:
    """Publishes branches of one repository's mirror by having GitHub make the commits."""

    def __init__(self, port: GitHubPort, repo: str) -> None:
        self.port = port
        self.repo = repo
        self.tally = Tally()
        self._repository_id: str | None = None

    async def push(self, mirror: Mirror, branch: str, *, expected_remote_sha: str | None, force: bool) -> str:
        """Publish local `branch` (see `Mirror.push`); the commit GitHub's branch holds after."""
        local = await mirror.resolve(f"refs/heads/{branch}")
        if expected_remote_sha == local:
            return local
        if expected_remote_sha is not None and mirror.published_as(local) == expected_remote_sha:
            log.info("%s on GitHub is GitHub's copy of %s (made before a crash): adopted", branch, local[:12])
            await take_back(mirror, branch, expected_remote_sha, {local: expected_remote_sha})
            return expected_remote_sha
        commits = await to_publish(mirror, local)
        if commits and commits[-1].signed and await self.port.has_commit(self.repo, local):
            commits = []  # GitHub's own commit (the mirror took it back earlier): nothing to make
        made: dict[str, str] = {}
        for commit in commits:
            made[commit.sha] = await self._commit(mirror, commit, made)
        head = made.get(local, local)
        mirror.remember(made)  # before the branch moves: a crash from here on adopts GitHub's copies
        try:
            await self.port.move_branch(
                self.repo,
                branch,
                new=head,
                old=expected_remote_sha,
                force=force,
                repository_id=await self._repo_id(),
            )
        except RefUpdateRefused as exc:
            said = f"GitHub refused to move {branch} to {head[:12]}: {exc.message}"
            remote = await mirror.remote_sha(branch)
            if remote != head:  # (at `head` already: up to date, as `git push` says)
                if remote != expected_remote_sha:
                    raise PushRejected(said) from exc  # someone pushed: the caller's lease rules apply
                raise WorkspaceError(said) from exc  # a rule of the repository (or of this GitHub)
        self.tally.ref_updates += 1
        await take_back(mirror, branch, head, made)
        if made:
            log.info("GitHub made %d commit(s) of %s (signed by GitHub): %s", len(made), branch, head[:12])
        return head

    async def _repo_id(self) -> str:
        if self._repository_id is None:
            self._repository_id = (await self.port.get_repository(self.repo)).node_id
        return self._repository_id

    async def _commit(self, mirror: Mirror, commit: LocalCommit, made: dict[str, str]) -> str:
        """GitHub's copy of `commit` (its parents mapped to GitHub's copies)."""
        tree = commit.tree
        if tree not in commit.parent_trees:  # a parent's tree is on GitHub already
            tree = await self._tree(mirror, commit)
        parents = [made.get(p, p) for p in commit.parents]
        result = await self.port.create_commit(self.repo, message=commit.message, tree=tree, parents=parents)
        self.tally.commits += 1
        if not result.verified:
            self.tally.unverified.append(result.sha)
            log.warning(
                "GitHub made %s but did not sign it (%s)", result.sha[:12], result.reason or "unsigned"
            )
        return result.sha

    async def _tree(self, mirror: Mirror, commit: LocalCommit, *, inline: bool = True) -> str:
        """The commit's tree made on GitHub from its first parent's and the changed paths; its
        sha must be the local one (the same entries give the same tree)."""
        entries: list[dict[str, Any]] = []
        budget, inlined = INLINE_TOTAL, False
        for change in commit.changes:
            kind = "commit" if change.mode == "160000" else "blob"
            entry: dict[str, Any] = {"path": change.path, "mode": change.mode, "type": kind}
            if change.sha is None or change.known or kind == "commit":
                entries.append({**entry, "sha": change.sha})
                continue
            data = await blob(mirror, change.sha)
            text = _text(data) if inline and len(data) <= min(INLINE_FILE, budget) else None
            if text is not None:
                budget -= len(data)
                inlined = True
                entries.append({**entry, "content": text})
                continue
            sha = await self.port.create_blob(self.repo, data)
            self.tally.blobs += 1
            if sha != change.sha:
                raise WorkspaceError(f"GitHub stored {change.path} as {sha[:12]}, not {change.sha[:12]}")
            entries.append({**entry, "sha": sha})
        made = await self.port.create_tree(self.repo, base_tree=commit.base_tree, entries=entries)
        self.tally.trees += 1
        if made == commit.tree:
            return made
        if inlined:  # GitHub wrote some text differently: send those files as blobs instead
            log.warning("GitHub's tree for %s differs from the local one: sending blobs", commit.sha[:12])
            return await self._tree(mirror, commit, inline=False)
        raise WorkspaceError(
            f"GitHub made tree {made[:12]} for commit {commit.sha[:12]}, not its tree {commit.tree[:12]}"
        )
