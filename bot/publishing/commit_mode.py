"""How a repository's commits reach GitHub: `publishing.commits` (`api`, `git` or `auto`).

- `git`: `git push` of the bot's local commits (unsigned: GitHub shows them "Unverified").
- `api`: GitHub makes every commit through its API and signs it (`bot.publishing.verified`).
- `auto` (the default): `api` where a ruleset requires signed commits on the branch pushed or on
  the default branch (where the batch pull requests end up: GitHub refuses to merge unsigned
  commits there), read from `GET /rules/branches/{branch}` once per branch; `git` elsewhere. A
  `git push` GitHub still refuses for want of verified signatures (a classic branch protection
  rule, which the rules endpoint does not list) is made again through the API, and so is
  every later push of the repository in this job.

Every push of the bot goes through `Mirror.push`, so this decides for story branches, batch
merges, review and CI fixes and restacks alike.
"""

from __future__ import annotations

import logging
from typing import Literal

from bot.errors import GitHubError
from bot.github.port import GitHubPort
from bot.publishing.verified import ApiPusher
from bot.workspace.git import PushRejected
from bot.workspace.mirror import Mirror, read_ref

log = logging.getLogger(__name__)
CommitMode = Literal["api", "git", "auto"]
SIGNATURE_REFUSALS = ("verified signature", "must be signed", "signed commits")
"""What GitHub says when it refuses a push of unsigned commits (GH006 for a protected branch,
GH013 for a ruleset: "Commits must have verified signatures")."""


def refused_for_signatures(message: str) -> bool:
    """Whether a push was refused because its commits are not signed."""
    text = message.lower()
    return any(words in text for words in SIGNATURE_REFUSALS)


class CommitPublisher:
    """The `Pusher` of a repository's mirror: `git push` or GitHub-made commits, as configured."""

    def __init__(self, port: GitHubPort, repo: str, *, mode: CommitMode, default_branch: str) -> None:
        self.port = port
        self.repo = repo
        self.mode = mode
        self.default_branch = default_branch
        self.api = ApiPusher(port, repo)
        self._rules: dict[str, bool] = {}
        self._refused = False
        """A `git push` was refused for its signatures: every push goes through the API now."""

    async def push(self, mirror: Mirror, branch: str, *, expected_remote_sha: str | None, force: bool) -> str:
        """Publish local `branch` (see `Mirror.push`)."""
        if await self.through_api(branch):
            return await self.api.push(mirror, branch, expected_remote_sha=expected_remote_sha, force=force)
        try:
            await mirror.git_push(branch, expected_remote_sha=expected_remote_sha, force=force)
        except PushRejected as exc:
            if self.mode != "auto" or not refused_for_signatures(exc.message):
                raise
            log.info("GitHub wants verified signatures on %s: its commits are made through the API", branch)
            self._refused = True
            return await self.api.push(mirror, branch, expected_remote_sha=expected_remote_sha, force=force)
        return read_ref(mirror.path, f"refs/heads/{branch}") or await mirror.resolve(f"refs/heads/{branch}")

    async def through_api(self, branch: str) -> bool:
        """Whether GitHub makes the commits of `branch` (see the module's docstring)."""
        if self.mode != "auto":
            return self.mode == "api"
        if self._refused:
            return True
        for name in dict.fromkeys([self.default_branch, branch]):
            if await self.requires_signatures(name):
                return True
        return False

    async def requires_signatures(self, branch: str) -> bool:
        """Whether a ruleset requires signed commits on `branch` (asked once; an error: no)."""
        if branch not in self._rules:
            try:
                rules = await self.port.branch_rules(self.repo, branch)
            except GitHubError as exc:
                log.warning("could not read the rules of %s in %s: %s", branch, self.repo, exc.message)
                return False  # a refused push still says so, and is made through the API then
            self._rules[branch] = "required_signatures" in rules
        return self._rules[branch]
