"""The workspace edge: git alone. Bare mirrors, worktrees, the git view a sandbox gets, commits
made locally or again through GitHub's API, and what a push would carry.

Every git call here names its ``cwd`` and ``env`` explicitly; nothing reads or changes
process-wide state, so many worktrees can be used at once. Confined processes are
`bot.sandbox`'s, what leaves the machine `bot.network`'s.
"""

from bot.workspace.git import GitResult, PushRejected, git_env, redact, run_git
from bot.workspace.mirror import Mirror, mirror_slug
from bot.workspace.worktree import (
    MergeOutcome,
    Worktree,
    add_worktree,
    changed_files,
    commit_staged,
    head_sha,
    merge_branches,
    remove_worktree,
    stage_all,
)

__all__ = [
    "GitResult",
    "MergeOutcome",
    "Mirror",
    "PushRejected",
    "Worktree",
    "add_worktree",
    "changed_files",
    "commit_staged",
    "git_env",
    "head_sha",
    "merge_branches",
    "mirror_slug",
    "redact",
    "remove_worktree",
    "run_git",
    "stage_all",
]
