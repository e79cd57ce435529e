"""Publishing a story's commit: its branch pushed (ours alone), and the commit GitHub holds recorded.

Where GitHub makes the bot's commits through its API (`publishing.commits`, see
`bot.publishing.verified`), the commit on GitHub is GitHub's signed copy of the local one (same
tree and message, a new sha) and the mirror's branch holds it too: the story's record then names
GitHub's commit, which its check runs, the batch merge and a resume all use.
"""

from __future__ import annotations

from bot.orchestration.run import Run
from bot.workspace.git import PushRejected


async def publish_story(run: Run, story_id: str, branch: str, head: str) -> str:
    """Push `branch` at `head`; the commit the remote holds, recorded as the story's commit."""
    pushed = await push_branch(run, branch, head)
    if pushed != head:
        await run.story(story_id, important=True, commit=pushed)
    return pushed


async def push_branch(run: Run, branch: str, head: str) -> str:
    """Push a story branch (ours alone), unless the remote has it; the commit the remote holds.

    The lease is what the mirror last saw of the remote branch (its fetch or our last push),
    so a push costs one round trip to the remote; only when that lease fails (the remote
    moved, e.g. after a crash) is the remote asked what it holds, and the push made on that.
    """
    seen = await run.mirror.tracking_sha(branch)
    if seen == head:
        return head
    try:
        return await run.mirror.push(branch, expected_remote_sha=seen, force=seen is not None)
    except PushRejected:
        remote = await run.mirror.remote_sha(branch)
        if remote != head:
            return await run.mirror.push(branch, expected_remote_sha=remote, force=True)
        return head
