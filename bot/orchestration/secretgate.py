"""The secret scan before every push of agent-made work: what a story, a review or CI fix, or a
conflict redo committed is scanned (`bot.workspace.outgoing`) before it may leave.

Each push is scanned once: a head scanned clean (with every commit since what the remote
already had) is noted in `Run.scanned`, which the server shares between its runs, and a push of
it again (a job run again, a resumed story) scans nothing; a head with new commits on top is
scanned from where the last scan stopped, by the caller's `since`. A story's commit of what its
agent left (when the agent committed nothing itself) is scanned from the index it is made of,
read once before the commit (`StagedRead`): the same change, whose paths the protected-paths
check reads too, and no `git log` between the commit and its push.

A finding undoes the commits (their changes stay in the worktree, staged) and the attempt fails
with the findings fed back to the agent; the story fails when they survive its retries. The
server's own secrets are always looked for; `paths.secret_scan_ignore` exempts a repository's
known fixtures from the other rules.
"""

from __future__ import annotations

import asyncio
import logging

from bot.network.secretscan import Finding, rule_said
from bot.orchestration.run import Run
from bot.redaction import known_secrets
from bot.tasks import forget
from bot.workspace.outgoing import changed_paths, outgoing_secrets, staged_diff, uncommit
from bot.workspace.worktree import Worktree, head_sha

log = logging.getLogger(__name__)


SCANNED_KEEP = 10_000
"""Clean heads remembered at most (then the set starts over: a push is scanned again, never skipped)."""


class StagedRead:
    """The change a commit of `wt`'s index on `since` (its HEAD) will make, read from the index
    (`staged_diff`): the secret scan of that commit then starts no `git log` before its push, and
    the paths it names are the ones the protected-paths check looks at (`paths`)."""

    def __init__(self, wt: Worktree, *, since: str) -> None:
        self.since = since
        self.task = asyncio.ensure_future(staged_diff(wt, since=since))

    def paths(self) -> list[str] | None:
        """Every path the change names (both of a rename), once it is read; None when it could
        not be (too large to read whole: the caller lists the changes its own way)."""
        if not self.task.done() or self.task.cancelled() or self.task.exception() is not None:
            return None
        try:
            return list(changed_paths(self.task.result()))
        except ValueError:
            return None

    def cancel(self) -> None:
        """Not wanted (nothing committed, or the attempt ended): stop it, never raise its error."""
        forget(self.task)


async def read_staged(wt: Worktree, *, since: str) -> StagedRead | None:
    """After everything is staged: when the agent committed nothing itself (HEAD is still `since`),
    the change a commit of the index will make, read now (its error, if any, kept in it); None
    when HEAD moved (its commits are read for the scan then)."""
    if await head_sha(wt) != since:
        return None
    staged = StagedRead(wt, since=since)
    await asyncio.wait({staged.task})
    return staged


async def hold_back(
    run: Run, story_id: str, wt: Worktree, *, since: str, head: str, staged: StagedRead | None = None
) -> list[Finding]:
    """The credentials `since..head` would push; when there are any, the branch is moved back to
    `since` (nothing of it is pushed, nothing of it stays committed). `since` is the base or a
    head this run scanned (or pushed) already. `staged`: when `head` is the one commit of the
    index made on `since`, the change read beside it (its commits are read otherwise)."""
    known, ignore = known_secrets(), run.config.paths.secret_scan_ignore
    # What the scan looked for is part of the key: a secret the server learnt since is looked for.
    key = (str(run.mirror.path), head, hash((tuple(known), tuple(ignore))))
    if key in run.scanned:
        log.debug("%s: %s was scanned clean before: not again", story_id, head[:12])
        return []
    change = staged.task if staged is not None and staged.since == since else None
    findings = await outgoing_secrets(wt, since=since, head=head, known=known, ignore=ignore, staged=change)
    if findings:
        listed = "; ".join(f"{f.where()} ({rule_said(f)})" for f in findings[:10])
        log.warning("%s: its commits add credentials, not pushed and undone: %s", story_id, listed)
        await uncommit(wt, to=since)
        return findings
    if len(run.scanned) >= SCANNED_KEEP:
        run.scanned.clear()
    run.scanned.add(key)
    return findings
