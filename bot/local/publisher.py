"""The user's repository: what local mode reads from it, and how batch branches land in it.

Every git command runs with an explicit environment (no global or system config, no
prompt). Nothing here checks anything out, writes the working tree or moves the user's
current branch: batch branches arrive with `git fetch <mirror> +<ref>:<ref>`, and a batch
branch someone changed by hand (or has checked out) is left alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.environment.node import NODE_TOOLS
from bot.environment.setup import planned_setup as choose_setup
from bot.errors import WorkspaceError
from bot.gates.report import conclusion
from bot.orchestration.acceptance import merge_and_review
from bot.orchestration.batch import merge_batch
from bot.orchestration.run import Run, batch_base
from bot.orchestration.scheduler import batch_branch
from bot.plan.state import BatchState, PlanState, batch_record, with_batch
from bot.sandbox.process import tools_on_path, uv_program
from bot.workspace.git import OUTPUT_LIMIT, GitResult, git_env, run_git

log = logging.getLogger(__name__)


async def user_git(
    repo: Path, *args: str, check: bool = True, max_output: int = OUTPUT_LIMIT, partial: bool = False
) -> GitResult:
    """`git <args>` in the user's repository, with our explicit environment (stdout bounded)."""
    return await run_git(
        ["--no-optional-locks", *args],
        cwd=repo,
        env=git_env(),
        check=check,
        max_output=max_output,
        partial=partial,
    )


def existing_dir(path: Path) -> Path:
    """`path` made absolute; WorkspaceError when it is not a directory."""
    if not path.is_dir():
        raise WorkspaceError(f"{path} is not a directory: pass --repo with the path of a git repository")
    return path.expanduser().resolve()


async def repo_root(path: Path) -> Path:
    """The top directory of the work tree `path` is in; WorkspaceError with the fix when none."""
    path = existing_dir(path)
    found = await user_git(path, "rev-parse", "--show-toplevel", check=False)
    if found.returncode != 0 or not found.stdout.strip():
        raise WorkspaceError(
            f"{path} is not a git repository: run `git init` there (and commit), or pass --repo PATH"
        )
    root = Path(found.stdout.strip())
    head = await user_git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    if head.returncode != 0:
        raise WorkspaceError(f"{root} has no commits yet: commit your code first, the run starts from HEAD")
    return root


async def planned_setup(
    root: Path, ref: str, configured: list[str] | None, *, tool_path: str | None
) -> dict[str, Any]:
    """The plan's `setup` fields: the configured commands, else detected from the tree at `ref`."""

    async def tree() -> list[str]:
        listed = await user_git(root, "ls-tree", "-r", "--name-only", "-z", ref, check=False)
        return [n for n in listed.stdout.split("\0") if n]

    async def read(name: str) -> str | None:
        shown = await user_git(root, "show", f"{ref}:{name}", check=False)
        return shown.stdout if shown.returncode == 0 else None

    planned = await choose_setup(
        configured,
        tree,
        read,
        uv=uv_program(tool_path) is not None,
        node_tools=tools_on_path(NODE_TOOLS, tool_path),
    )
    return planned.state_fields()


async def current_branch(root: Path) -> str:
    """The branch checked out in the user's repository; WorkspaceError on a detached HEAD."""
    found = await user_git(root, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if found.returncode != 0 or not found.stdout.strip():
        raise WorkspaceError(f"{root} has a detached HEAD: check out the branch the plan should start from")
    return found.stdout.strip()


async def dirty_files(root: Path) -> list[str]:
    """Tracked files with uncommitted changes (staged or not); untracked files do not count."""
    status = await user_git(root, "status", "--porcelain", "--untracked-files=no", "-z")
    return [entry[3:] for entry in status.stdout.split("\0") if len(entry) > 3]


async def file_at_head(root: Path, path: str) -> str | None:
    """The committed text of `path` at HEAD, or None when HEAD has no such file."""
    listed = await user_git(root, "ls-tree", "--name-only", "HEAD", "--", path)
    if not listed.stdout.strip():
        return None
    return (await user_git(root, "show", f"HEAD:{path}")).stdout


async def git_dir(root: Path) -> Path:
    """The repository's (common) git directory: `.git`, also for linked worktrees."""
    found = await user_git(root, "rev-parse", "--git-common-dir")
    path = Path(found.stdout.strip())
    return (path if path.is_absolute() else root / path).resolve()


async def push_remote(root: Path) -> str | None:
    """The remote batch branches would be pushed to: `origin`, else the first one; None without any."""
    names = (await user_git(root, "remote", check=False)).stdout.split()
    return "origin" if "origin" in names else (names[0] if names else None)


async def ref_sha(root: Path, branch: str) -> str | None:
    """The commit a local branch of the user's repository points at, or None."""
    found = await user_git(root, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    return found.stdout.strip() or None


async def copy_branch(
    root: Path, *, source: Path, branch: str, expected: str | None, bot_email: str
) -> str | None:
    """Fetch `branch` from the mirror at `source` into the user's repository.

    `expected` is what we put there last time (None: nothing). A branch whose head is
    neither that nor a commit of ours (`bot_email`) was changed by hand and is left alone, as
    is a checked-out one. Returns None when copied, else why the branch was left alone.
    """
    have = await ref_sha(root, branch)
    if have is not None and have != expected:
        author = await user_git(root, "log", "-1", "--format=%ae", have, check=False)
        if author.stdout.strip().lower() != bot_email.lower():
            return f"{branch} was changed in {root} since Plan Cascade wrote it: left as it is"
    head = await user_git(root, "symbolic-ref", "--quiet", "HEAD", check=False)
    if head.stdout.strip() == f"refs/heads/{branch}":
        return f"{branch} is checked out in {root}: not updated (check out another branch and resume)"
    ref = f"refs/heads/{branch}"
    await user_git(
        root, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", str(source), f"+{ref}:{ref}"
    )
    return None


@dataclass
class LocalPublisher:
    """Merges a batch with the engine's `merge_batch`, then copies its branch to the user's repo."""

    repo: Path
    notes: list[str] = field(default_factory=list)
    """Why a batch branch was not copied (shown in the summary)."""

    async def publish_batch(self, run: Run, batch: int, story_ids: list[str]) -> PlanState:
        """Merge (unless the branch already holds every story), copy, record the branch."""
        record = batch_record(run.state, batch)
        branch = batch_branch(run.branch_prefix, batch)
        if await self._up_to_date(run, batch, record, story_ids):
            head, integration = record.head_sha, record.gates
        else:
            if run.review_llm is not None:  # the same acceptance review a batch PR gets
                outcome, review = await merge_and_review(run, batch, story_ids)
                if review is not None and review.error:
                    note = f"batch {batch}: acceptance criteria not reviewed ({review.error})"
                    await run.reporter.message(note)
            else:
                outcome = await merge_batch(run, batch, story_ids)
            if not outcome.merged:
                return run.state
            head = outcome.head_sha
            integration = {r.name: conclusion(r) for r in outcome.integration}
        copied = await self._copy(run, branch, expected=record.head_sha if record.branch else None)
        updated = record.model_copy(
            update={"branch": branch, "head_sha": head, "gates": integration, "hands_off": not copied}
        )
        return await run.update(lambda s: with_batch(s, updated), important=True)

    async def _up_to_date(self, run: Run, batch: int, record: BatchState, story_ids: list[str]) -> bool:
        """The mirror's batch branch is the recorded one and already has its base and every story."""
        if record.head_sha is None:
            return False
        branch = batch_branch(run.branch_prefix, batch)
        try:
            if await run.mirror.resolve(f"refs/heads/{branch}") != record.head_sha:
                return False
            wanted = [await run.mirror.resolve(batch_base(run, batch))]
        except WorkspaceError:
            return False
        wanted += [c for sid in story_ids if (c := run.state.stories[sid].commit)]
        for sha in wanted:
            found = await run.mirror.git("merge-base", "--is-ancestor", sha, record.head_sha, check=False)
            if found.returncode != 0:
                return False
        return True

    async def _copy(self, run: Run, branch: str, *, expected: str | None) -> bool:
        reason = await copy_branch(
            self.repo,
            source=run.mirror.path,
            branch=branch,
            expected=expected,
            bot_email=run.author.email,
        )
        if reason is not None:
            self.notes.append(reason)
            await run.reporter.message(reason)
            return False
        return True
