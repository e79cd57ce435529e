"""The workspace edge: bare mirrors, worktrees, git and confined subprocesses.

Every git and process call here names its ``cwd`` and ``env`` explicitly; nothing reads
or changes process-wide state, so many worktrees can be used at once.
"""

from bot.config.globs import is_denied
from bot.workspace.git import GitResult, PushRejected, git_env, redact, run_git
from bot.workspace.mirror import Mirror, mirror_slug
from bot.workspace.paths import resolve_path
from bot.workspace.process import ProcessResult, run_process, scrubbed_env
from bot.workspace.sandbox import Confinement, Sandbox, SandboxUnavailable, bwrap_problem
from bot.workspace.worktree import (
    MergeOutcome,
    Worktree,
    add_worktree,
    changed_files,
    commit_all,
    head_sha,
    merge_branches,
    remove_worktree,
)

__all__ = [
    "Confinement",
    "GitResult",
    "MergeOutcome",
    "Mirror",
    "ProcessResult",
    "PushRejected",
    "Sandbox",
    "SandboxUnavailable",
    "Worktree",
    "add_worktree",
    "bwrap_problem",
    "changed_files",
    "commit_all",
    "git_env",
    "head_sha",
    "is_denied",
    "merge_branches",
    "mirror_slug",
    "redact",
    "remove_worktree",
    "resolve_path",
    "run_git",
    "run_process",
    "scrubbed_env",
]
