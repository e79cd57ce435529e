"""How a repository's commits reach GitHub: `publishing.commits` (`api`, `git` or `auto`).

- `git`: `git push` of the bot's local commits (unsigned: GitHub shows them "Unverified").
- `api`: GitHub makes every commit through its API and signs it (`bot.publishing.verified`).
- `auto` (the default): `api` where a ruleset requires signed commits on the default branch
  (where the batch pull requests end up: GitHub refuses to merge unsigned commits there), read
  from `GET /rules/branches/{branch}` and kept per repository and branch for `RULES_TTL`
  (`BranchRules`, shared by the process: a plan's pushes, and the next plans', ask once);
  `git` elsewhere. Any other branch's rules are learnt from GitHub's answer to the push: a
  `git push` refused for want of verified signatures (a ruleset on the branch pushed, or a
  classic branch protection rule, which the rules endpoint does not list) is made again
  through the API, and so is every later push of the repository for `RULES_TTL`.

Why a time-to-live and not the `repository_ruleset` / `branch_protection_rule` webhooks: GitHub
sends those only to Apps holding the Administration permission, which the App does not ask
for. A stale answer costs little and breaks nothing: "not required" where a ruleset was just
added costs one refused push (then the API), "required" where it was just removed makes
signed commits through the API for a few more minutes.

Every push of the bot goes through `Mirror.push`, so this decides for story branches, batch
merges, review and CI fixes and restacks alike.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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


RULES_TTL = 600.0
"""Seconds a branch's rules (and a refusal for signatures) are believed without asking again."""


@dataclass
class BranchRules:
    """Whether each (repository, branch) requires signed commits, as GitHub last said, for `ttl`
    seconds; and the repositories whose pushes GitHub refused for want of signatures. One per
    process (`Services`), so every job's `CommitPublisher` shares it."""

    ttl: float = RULES_TTL
    clock: Callable[[], float] = time.monotonic
    limit: int = 10_000
    _known: dict[tuple[str, str], tuple[float, bool]] = field(default_factory=dict)
    _refused: dict[str, float] = field(default_factory=dict)
    _asking: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict)

    def asking(self, repo: str, branch: str) -> asyncio.Lock:
        """Held while GitHub is asked about `branch`: stories pushing at once ask once."""
        if len(self._asking) >= self.limit:
            self._asking = {key: lock for key, lock in self._asking.items() if lock.locked()}
        return self._asking.setdefault((repo, branch), asyncio.Lock())

    def get(self, repo: str, branch: str) -> bool | None:
        """The answer kept for `branch` of `repo`, or None (never asked, or too old)."""
        entry = self._known.get((repo, branch))
        if entry is None or self.clock() - entry[0] > self.ttl:
            return None
        return entry[1]

    def put(self, repo: str, branch: str, required: bool) -> None:
        if len(self._known) >= self.limit:
            self._known.clear()
        self._known[(repo, branch)] = (self.clock(), required)

    def refused(self, repo: str) -> bool:
        """Whether GitHub refused a `git push` to `repo` for its signatures within `ttl`."""
        at = self._refused.get(repo)
        return at is not None and self.clock() - at <= self.ttl

    def note_refusal(self, repo: str) -> None:
        if len(self._refused) >= self.limit:
            self._refused.clear()
        self._refused[repo] = self.clock()

    def forget(self, repo: str) -> None:
        """Drop what is known of `repo` (its rulesets changed)."""
        self._refused.pop(repo, None)
        for key in [k for k in self._known if k[0] == repo]:
            del self._known[key]


def refused_for_signatures(message: str) -> bool:
    """Whether a push was refused because its commits are not signed."""
    text = message.lower()
    return any(words in text for words in SIGNATURE_REFUSALS)


class CommitPublisher:
    """The `Pusher` of a repository's mirror: `git push` or GitHub-made commits, as configured."""

    def __init__(
        self,
        port: GitHubPort,
        repo: str,
        *,
        mode: CommitMode,
        default_branch: str,
        rules: BranchRules | None = None,
    ) -> None:
        self.port = port
        self.repo = repo
        self.mode = mode
        self.default_branch = default_branch
        self.api = ApiPusher(port, repo)
        self.rules = rules if rules is not None else BranchRules()
        """The process's answers (a publisher made without one keeps its own)."""

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
            self.rules.note_refusal(self.repo)
            return await self.api.push(mirror, branch, expected_remote_sha=expected_remote_sha, force=force)
        return read_ref(mirror.path, f"refs/heads/{branch}") or await mirror.resolve(f"refs/heads/{branch}")

    async def through_api(self, branch: str) -> bool:
        """Whether GitHub makes the commits of `branch` (see the module's docstring): the
        default branch's rules decide; `branch`'s own are learnt from a refused push."""
        if self.mode != "auto":
            return self.mode == "api"
        if self.rules.refused(self.repo):
            return True
        return await self.requires_signatures(self.default_branch)

    async def requires_signatures(self, branch: str) -> bool:
        """Whether a ruleset requires signed commits on `branch` (kept `RULES_TTL`; an error: no,
        not kept)."""
        known = self.rules.get(self.repo, branch)
        if known is not None:
            return known
        async with self.rules.asking(self.repo, branch):
            known = self.rules.get(self.repo, branch)  # another story's push asked meanwhile
            if known is not None:
                return known
            try:
                rules = await self.port.branch_rules(self.repo, branch)
            except GitHubError as exc:
                log.warning("could not read the rules of %s in %s: %s", branch, self.repo, exc.message)
                return False  # a refused push still says so, and is made through the API then
            required = "required_signatures" in rules
            self.rules.put(self.repo, branch, required)
            return required
