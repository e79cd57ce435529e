"""The secret scan before every push of agent-made work: what a story, a review or CI fix, or a
conflict redo committed is scanned (`bot.workspace.outgoing`) before it may leave.

A finding undoes the commits (their changes stay in the worktree, staged) and the attempt fails
with the findings fed back to the agent; the story fails when they survive its retries. The
server's own secrets are always looked for; `paths.secret_scan_ignore` exempts a repository's
known fixtures from the other rules.
"""

from __future__ import annotations

import logging

from bot.network.secretscan import Finding
from bot.orchestration.run import Run
from bot.redaction import known_secrets
from bot.workspace.outgoing import outgoing_secrets, uncommit
from bot.workspace.worktree import Worktree

log = logging.getLogger(__name__)


async def hold_back(run: Run, story_id: str, wt: Worktree, *, since: str, head: str) -> list[Finding]:
    """The credentials `since..head` would push; when there are any, the branch is moved back to
    `since` (nothing of it is pushed, nothing of it stays committed)."""
    findings = await outgoing_secrets(
        wt, since=since, head=head, known=known_secrets(), ignore=run.config.paths.secret_scan_ignore
    )
    if findings:
        listed = "; ".join(f"{f.where()} ({f.rule})" for f in findings[:10])
        log.warning("%s: its commits add credentials, not pushed and undone: %s", story_id, listed)
        await uncommit(wt, to=since)
    return findings
