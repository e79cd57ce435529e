"""Merging a batch: passed story branches into `plan-cascade/<issue>/batch-<k>`, conflicts
re-run by their agent on top of the merged branch (refactor phase), integration gates on
the merged head. Shared by every front door; pushing and PRs are the publisher's part.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import WorkspaceError
from bot.gates.detect import GateSpec
from bot.gates.report import GateResult
from bot.gates.run import run_gates
from bot.orchestration.judging import base_judge
from bot.orchestration.run import Run, batch_base
from bot.orchestration.scheduler import batch_branch, story_branch
from bot.orchestration.setup import gate_confinement, prepare, report_setup, tool_env
from bot.orchestration.story import gate_specs, run_story
from bot.plan.state import StoryStatus
from bot.workspace.merging import Merging, merge_in_mirror
from bot.workspace.worktree import Worktree, add_worktree, head_sha, merge_branches, remove_worktree

log = logging.getLogger(__name__)


@dataclass
class BatchOutcome:
    """What merging a batch produced."""

    branch: str
    head_sha: str
    merged: list[str]
    failed: dict[str, str] = field(default_factory=dict)
    integration: list[GateResult] = field(default_factory=list)
    hands_off: bool = False
    """The branch holds someone else's work: nothing was pushed and no gate ran."""

    @property
    def gates_passed(self) -> bool:
        """Every integration gate passed."""
        return all(r.passed for r in self.integration)


PushHead = Callable[[str], Awaitable[bool]]
"""Publishes the merged head before its integration gates run; False leaves the branch alone."""


async def merge_batch(
    run: Run, batch: int, story_ids: list[str], *, push: PushHead | None = None
) -> BatchOutcome:
    """Build the batch branch from its base and the passed stories; re-run conflicting ones.

    With `push`, the merged head is pushed before the integration gates run, so their check
    runs name a commit GitHub has (it refuses check runs on unknown commits).
    """
    branch = batch_branch(run.branch_prefix, batch)
    base = batch_base(run, batch)
    path = run.work_root / f"batch-{batch}"
    await run.untidied(path)  # this batch's last worktree, when it is still going
    done = await _already_merged(run, batch, base, story_ids) if push is not None else None
    if done is not None:  # a publish redone after a crash: what was merged and pushed stands
        await run.mirror.git("update-ref", f"refs/heads/{branch}", done)
        return await _finish_merge(run, branch, batch, story_ids, head=done, failed={}, push=push)
    author = (run.author.name, run.author.email)
    branches = [story_branch(run.branch_prefix, sid) for sid in story_ids]
    ahead = run.merges_ahead.pop(batch, None)
    merged_head = await merge_in_mirror(
        run.mirror,
        await run.commit_of(base),
        branches,
        author_name=author[0],
        author_email=author[1],
        message_for=functools.partial(_message, batch=batch),
        ahead=await ahead() if ahead is not None else None,
    )
    if merged_head is not None:  # merged cleanly: no worktree (the integration gates make one)
        if (path / ".git").exists():  # one an interrupted run left at the batch's path: not kept
            await run.tidy(path, remove_batch_worktree(Worktree(path=path, branch=branch, mirror=run.mirror)))
        await run.mirror.git("update-ref", f"refs/heads/{branch}", merged_head)
        return await _finish_merge(run, branch, batch, story_ids, head=merged_head, failed={}, push=push)
    wt = await add_worktree(run.mirror, branch=branch, base_ref=base, path=path, reset=True)
    try:
        outcome = await merge_branches(
            wt,
            branches,
            author_name=author[0],
            author_email=author[1],
            message_for=functools.partial(_message, batch=batch),
        )
        merged = [sid for sid in story_ids if story_branch(run.branch_prefix, sid) in outcome.merged]
        failed: dict[str, str] = {}
        for sid in story_ids:
            files = outcome.conflicts.get(story_branch(run.branch_prefix, sid))
            if files is None:
                continue
            if await _refactor(run, sid, batch_head=branch, files=files):
                again = await merge_branches(
                    wt,
                    [story_branch(run.branch_prefix, sid)],
                    author_name=author[0],
                    author_email=author[1],
                    message_for=functools.partial(_rebased_message, sid=sid, batch=batch),
                )
                if again.merged:
                    merged.append(sid)
                    continue
            reason = "conflicts with the rest of the batch in " + ", ".join(files[:10])
            failed[sid] = reason
            await run.story(sid, important=True, status=StoryStatus.FAILED, reason=reason)
        head = await head_sha(wt)
        return await _finish_merge(run, branch, batch, merged, head=head, failed=failed, push=push, wt=wt)
    finally:
        run.protected.pop(path, None)
        await run.tidy(path, remove_batch_worktree(wt))  # the next batch goes on meanwhile


class MergeAhead:
    """A batch's merges in the mirror, begun while its stories run: each story is merged, in the
    batch's order (the order `merge_batch` merges in), once it passed and every story before it
    is done, so that little is left to merge when the last one is. `merge_batch` takes them up
    only where they lead to its own merge (`merge_in_mirror`'s `ahead`: the same base, branches
    and commits); a conflict or an error stops them, and the merge is made from the base then."""

    def __init__(self, run: Run, batch: int, order: list[str], base: str, *, done: list[str]) -> None:
        self.run, self.batch, self.order, self.base = run, batch, order, base
        self.done = set(done)
        """The batch's stories done already (each passed or not), `finished` ones added."""
        self.merging: Merging | None = None
        self._next = 0
        self._stopped = False
        self._task: asyncio.Task[None] | None = None

    def finished(self, sid: str) -> None:
        """`sid` is done (passed or not): merge what is ready in the background."""
        self.done.add(sid)
        if not self._stopped and (self._task is None or self._task.done()):
            self._task = asyncio.ensure_future(self._advance())

    async def taken(self) -> Merging | None:
        """The merges made so far, once the one under way is made; None when none could be made."""
        self._stopped = True  # nothing more is begun
        if self._task is not None:
            try:
                await asyncio.shield(self._task)
            except asyncio.CancelledError:
                if not self._task.cancelled():  # it is this wait that is cancelled
                    raise
                return None
        return self.merging  # `merge_in_mirror` takes up only what still leads to its merge

    def close(self) -> None:
        """The batch stopped: whatever is under way is cancelled (its objects are never used)."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
        if self.merging is not None:
            self.merging.forget_check()

    async def _advance(self) -> None:
        run = self.run
        try:
            while not self._stopped and self._next < len(self.order) and self.order[self._next] in self.done:
                sid = self.order[self._next]
                self._next += 1
                if run.state.stories[sid].status != StoryStatus.PASSED:
                    continue
                if self.merging is None:
                    self.merging = await Merging.start(
                        run.mirror,
                        await run.commit_of(self.base),
                        author_name=run.author.name,
                        author_email=run.author.email,
                        message_for=functools.partial(_message, batch=self.batch),
                    )
                last = self._next == len(self.order)  # the result's attributes read beside its commit
                branch = story_branch(run.branch_prefix, sid)
                if self.merging is None or not await self.merging.add(branch, last=last):
                    self._stopped = True
        except WorkspaceError as exc:  # the batch's own merge meets it again, and says it
            log.info("merging batch %s ahead stopped: %s", self.batch, exc.message)
            self._stopped, self.merging = True, None


def _message(branch: str, *, batch: int) -> str:
    return f"Merge {branch.rsplit('/', 1)[-1].upper()} into batch {batch}"


async def remove_batch_worktree(wt: Worktree) -> None:
    """Remove a batch's worktree; a failure is logged, never raised (nothing is lost with it)."""
    try:
        await remove_worktree(wt)
    except WorkspaceError as exc:
        log.warning("could not remove batch worktree: %s", exc.message)


async def _finish_merge(
    run: Run,
    branch: str,
    batch: int,
    merged: list[str],
    *,
    head: str,
    failed: dict[str, str],
    push: PushHead | None,
    wt: Worktree | None = None,
) -> BatchOutcome:
    """Push the merged head `head` of `branch` (when publishing), then run the integration gates
    on it: in `wt` when the merge had one, else in a worktree made for them when they need one."""
    integration: list[GateResult] = []
    await run.reached("merged", f"batch-{batch}")
    if push is not None and merged:
        if not await push(head):
            return BatchOutcome(branch=branch, head_sha=head, merged=merged, failed=failed, hands_off=True)
        head = await run.commit_of(f"refs/heads/{branch}")  # GitHub's own commit when it made the merge
    if run.config.gates.integration and merged:
        if wt is not None:
            integration = await integration_gates(run, wt, head, batch)
        elif run.state.setup or run.config.gates.detect or _integration_specs(run, run.work_root):
            # Setup or a gate to run in its files, or gates to detect from them: a worktree for
            # them (without detection the configured gates are known, and no file is read).
            integration = await integration_in_worktree(run, batch, branch, head)
    return BatchOutcome(branch=branch, head_sha=head, merged=merged, failed=failed, integration=integration)


async def integration_in_worktree(run: Run, batch: int, branch: str, head: str) -> list[GateResult]:
    """The integration gates on `head` of `branch`, in a worktree made for them at the batch's
    path once the last one there is gone, and removed after (`Run.tidy`)."""
    path = run.work_root / f"batch-{batch}"
    await run.untidied(path)
    wt = await add_worktree(run.mirror, branch=branch, base_ref=head, path=path, reset=True)
    try:
        return await integration_gates(run, wt, head, batch)
    finally:
        run.protected.pop(path, None)
        await run.tidy(path, remove_batch_worktree(wt))


def _integration_specs(run: Run, root: Path) -> list[GateSpec]:
    """The gates every story shares (no story's own verification), found in the tree at `root`."""
    specs = gate_specs(run, run.state.prd.stories[0], root)
    return [s for s in specs if s.name != "verification"]


async def _already_merged(run: Run, batch: int, base: str, story_ids: list[str]) -> str | None:
    """The remote batch branch, when the bot already merged exactly these stories onto this base."""
    branch = batch_branch(run.branch_prefix, batch)
    remote = f"refs/remotes/origin/{branch}"
    head = await run.mirror.git("rev-parse", "--verify", "--quiet", f"{remote}^{{commit}}", check=False)
    if head.returncode != 0:
        return None
    sha = head.stdout.strip()
    recorded = next((b.head_sha for b in run.state.batches if b.number == batch), None)
    if sha != recorded and not run.mirror.pushed(branch, sha):
        return None  # a head the bot did not push (whoever its author): the hands-off rule decides
    needed = [base, *(f"refs/heads/{story_branch(run.branch_prefix, sid)}" for sid in story_ids)]
    for ref in needed:
        inside = await run.mirror.git("merge-base", "--is-ancestor", ref, sha, check=False)
        if inside.returncode != 0:
            return None
    return sha


def _rebased_message(branch: str, *, sid: str, batch: int) -> str:
    return f"Merge {sid} (rebased) into batch {batch}"


async def _refactor(run: Run, story_id: str, *, batch_head: str, files: list[str]) -> bool:
    """Re-run the story on top of the merged batch branch; True when it passes its gates again."""
    return await redo_story(
        run,
        story_id,
        f"refs/heads/{batch_head}",
        why=f"conflicted in {', '.join(files[:5])}; re-running on the merged batch",
        feedback="Your earlier change conflicted with the merged batch in: " + ", ".join(files),
    )


async def redo_story(run: Run, story_id: str, base_ref: str, *, why: str, feedback: str) -> bool:
    """The story again, by its agent, on top of `base_ref` (the refactor phase), because its
    earlier work conflicts there; True when it passed its gates again."""
    log.info("%s: %s (refactor phase)", story_id, why)
    await run.story(story_id, status=StoryStatus.PENDING, attempts=0, commit=None, reason=why)
    await run_story(run, story_id, base_ref, phase="refactor", feedback=feedback)
    return run.state.stories[story_id].status == StoryStatus.PASSED


async def integration_gates(run: Run, wt: Worktree, head: str, batch: int) -> list[GateResult]:
    """Setup and the shared gates on a batch's merged head `head`, checked out in `wt`."""
    root = wt.path
    specs = await asyncio.to_thread(_integration_specs, run, root)  # lists the tree
    if not specs and not run.state.setup:
        return []  # nothing to run: no worktree listing, no environment
    home = run.work_root / f".home-batch-{batch}"
    home.mkdir(parents=True, exist_ok=True)
    scope = f"batch-{batch}"
    setup = await prepare(run, wt, home)
    if setup is not None:
        await report_setup(run, setup, scope=scope, head=head)
        if not setup.passed:  # no environment: the gates would fail for the wrong reason
            return [setup]
    if not specs:
        return []  # setup alone: no sandbox, nor a copy of the repository's git, for gates

    async def started(spec: GateSpec) -> object:
        return await run.reporter.gate_started(scope=scope, gate=spec, head_sha=head, attempt=1)

    async def finished(spec: GateSpec, handle: object, result: GateResult, annotations: list) -> None:  # type: ignore[type-arg]
        await run.reporter.gate_finished(
            handle, scope=scope, gate=spec, result=result, annotations=annotations, head_sha=head
        )

    return await run_gates(
        specs,
        cwd=root,
        env=tool_env(run, wt, home),
        default_timeout=run.config.gates.timeout_seconds,
        attempt=1,
        started=started,
        finished=finished,
        confinement=await gate_confinement(run, wt, home),
        judge=base_judge(run, root),
    )
