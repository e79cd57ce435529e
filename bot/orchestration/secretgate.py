"""The secret scan before every push of agent-made work: what a story, a review or CI fix, or a
conflict redo committed is scanned (`bot.workspace.outgoing`) before it may leave.

Each push is scanned once: a head scanned clean (with every commit since what the remote
already had) is noted in `Run.scanned`, which the server shares between its runs, and a push of
it again (a job run again, a resumed story) scans nothing; a head with new commits on top is
scanned from where the last scan stopped, by the caller's `since`. A story's commit of what its
agent left (when the agent committed nothing itself) is scanned from the index it is made of,
read beside the commit (`StagedRead`): the same change, and no `git log` between the commit and
its push.

A finding undoes the commits (their changes stay in the worktree, staged) and the attempt fails
with the findings fed back to the agent; the story fails when they survive its retries. The
server's own secrets are always looked for; `paths.secret_scan_ignore` exempts a repository's
known fixtures from the other rules.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from bot.network.secretscan import Finding
from bot.orchestration.run import Run
from bot.redaction import known_secrets
from bot.tasks import forget
from bot.workspace.outgoing import outgoing_secrets, staged_diff, uncommit
from bot.workspace.worktree import Worktree, head_sha

log = logging.getLogger(__name__)


SCANNED_KEEP = 10_000
"""Clean heads remembered at most (then the set starts over: a push is scanned again, never skipped)."""


class StagedRead:
    """The change a commit of `wt`'s index on `since` (its HEAD) will make, read beside that
    commit (`staged_diff`): the scan of the commit then starts no `git log` before its push."""

    def __init__(self, wt: Worktree, *, since: str) -> None:
        self.since = since
        self.task = asyncio.ensure_future(staged_diff(wt, since=since))

    def cancel(self) -> None:
        """Not wanted (nothing committed, or the attempt ended): stop it, never raise its error."""
        forget(self.task)


async def with_staged_read(
    wt: Worktree, *, since: str, commit: Coroutine[Any, Any, str | None]
) -> tuple[str | None, StagedRead | None]:
    """Run `commit` (of `wt`'s index); when the agent committed nothing itself (HEAD is still
    `since`), with its change read beside it. The commit made (None: nothing was), and that read
    when there is one to scan."""
    try:
        moved = await head_sha(wt) != since
    except BaseException:
        commit.close()
        raise
    if moved:
        return await commit, None
    staged = StagedRead(wt, since=since)
    try:
        sha = await commit
    except BaseException:
        staged.cancel()
        raise
    if sha is None:  # nothing committed: nothing of it to scan
        staged.cancel()
        return None, None
    return sha, staged


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
        listed = "; ".join(f"{f.where()} ({f.rule})" for f in findings[:10])
        log.warning("%s: its commits add credentials, not pushed and undone: %s", story_id, listed)
        await uncommit(wt, to=since)
        return findings
    if len(run.scanned) >= SCANNED_KEEP:
        run.scanned.clear()
    run.scanned.add(key)
    return findings
