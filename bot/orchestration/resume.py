"""Picking a story up after a crash: find the work it already committed instead of redoing it.

Every story commit carries two trailers, `Plan-Cascade-Plan: <revision hash>` and
`Plan-Cascade-Story: <id>`, and its sha is saved in the plan state before it is pushed. A
story found running after a restart whose branch (in the mirror, or on the remote) holds such
a commit goes straight to pushing (if the remote lacks it) and its gates: the agent, a paid
session, does not run again.
"""

from __future__ import annotations

from bot.orchestration.run import Run

PLAN_TRAILER = "Plan-Cascade-Plan"
STORY_TRAILER = "Plan-Cascade-Story"


def story_trailers(run: Run, story_id: str) -> dict[str, str]:
    """The trailers of a story's commit."""
    return {PLAN_TRAILER: run.state.plan_hash, STORY_TRAILER: story_id}


async def committed_work(run: Run, story_id: str, branch: str, base_ref: str) -> str | None:
    """The commit holding this story's work for this revision, if one was made before a crash."""
    record = run.state.stories[story_id]
    base = await run.mirror.resolve(base_ref)
    candidates = [record.commit, f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"]
    for candidate in candidates:
        if not candidate:
            continue
        found = await run.mirror.git(
            "log", "-1", f"--format=%H%x1f%(trailers:key={PLAN_TRAILER},valueonly,separator=%x1e)"
            f"%x1f%(trailers:key={STORY_TRAILER},valueonly,separator=%x1e)",
            "--end-of-options", candidate, "--",
            check=False,
        )  # fmt: skip
        fields = found.stdout.strip().split("\x1f")
        if found.returncode != 0 or len(fields) != 3 or fields[0] == base:
            continue
        sha, plans, stories = fields
        if run.state.plan_hash in plans.split("\x1e") and story_id in stories.split("\x1e"):
            return sha
    return None
