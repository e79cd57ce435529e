"""Keeping the batch pull requests on their base: retarget after merges, restack after squash and
rebase merges, fixes lower in the stack and moves of the base branch. The GitHub side of
`bot.orchestration.restack`.

Rules: a batch branch is rebuilt only when the bot's recorded head is still what the remote
holds (a person's push is never overwritten: the bot says what to run instead); each push is
a lease on that head; the gates run again only when the tree changed (otherwise the roll-up
check carries over to the new head); a conflict the agent cannot redo leaves the branch as it
was and the pull request a draft that names the files.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from bot.errors import GitHubError, WorkspaceError
from bot.gates.report import conclusion
from bot.github.port import GitHubPort
from bot.orchestration.batch import integration_in_worktree
from bot.orchestration.restack import Rebuild, rebuild_batch
from bot.orchestration.run import Run
from bot.orchestration.scheduler import batch_branch, story_branch
from bot.plan.stack import batch_of_branch, expected_base, is_open, lowest_open
from bot.plan.state import PlanState, StoryState, StoryStatus, with_batch
from bot.publishing.rollup import carry_rollup, post_rollup
from bot.rendering import stack as say
from bot.rendering.pr_body import pr_body, pr_title
from bot.workspace.git import PushRejected

log = logging.getLogger(__name__)
Update = Callable[[Callable[[PlanState], PlanState]], Awaitable[PlanState]]
"""Writes a change to the plan (compare-and-swap, applied again on a conflict); the state saved."""
Reason = Literal["merged", "rebase", "fix", "auto"]


@dataclass
class StackKeeper:
    """The open batch pull requests of one plan, kept on their base."""

    port: GitHubPort
    repo: str
    run: Run
    """A run over the plan whose reporter saves nothing: stories redone here change only it;
    what counts is written through `update`."""
    update: Update
    plan_url: str = ""
    wanted: Callable[[int], Callable[[], Awaitable[str | None]]] | None = None
    """What asks, before the agent redoes a story of batch N, whether the plan still wants it."""
    done: list[tuple[int, str]] = field(default_factory=list)
    """Each pull request touched and what happened to it, in order (the `rebase` reply)."""

    @property
    def stacked(self) -> bool:
        return self.run.config.execution.stacking == "stacked"

    async def _save(self, change: Callable[[PlanState], PlanState]) -> PlanState:
        saved = await self.update(change)
        self.run.state = saved
        return saved

    async def retarget(self) -> None:
        """Every open batch's pull request targets what it must now (the base branch for the
        lowest); a GitHub error is logged and said in the result, never raised."""
        state = self.run.state
        for record in state.batches:
            if not is_open(record) or record.pr_number is None:
                continue
            want = expected_base(state, record.number, base_branch=self.run.base_branch, stacked=self.stacked)
            try:
                pr = await self.port.get_pull_request(self.repo, record.pr_number)
                if pr.state == "open" and pr.base_ref != want:
                    await self.port.update_pull_request(self.repo, record.pr_number, base=want)
                    log.info("#%s now targets %s (was %s)", record.pr_number, want, pr.base_ref)
            except GitHubError as exc:
                log.warning("could not retarget #%s to %s: %s", record.pr_number, want, exc.message)

    async def restack(self, *, start: int, reason: Reason, cause: str) -> None:
        """Rebuild the open batches from `start` up where they no longer sit on what they must.

        `merged`: only after a merge that rewrote history (the merged head is not on the base
        branch); `fix`: on top of a fixed batch below; `rebase`/`auto`: onto the base branch's
        current head. Stops at the first batch it must leave alone (someone pushed, conflicts).
        """
        run = self.run
        await run.mirror.fetch()
        await self._replace_closed()
        if reason == "rebase":
            await self._reopen_stranded()
        tip = await run.mirror.resolve(f"refs/remotes/origin/{run.base_branch}")
        moved: tuple[str, str] | None = None  # the previous batch's (old head, new head)
        for number in range(start, len(run.state.batches) + 1):
            record = run.state.batches[number - 1]
            if record.merged:
                continue
            if not is_open(record) or not record.head_sha:
                break
            previous = run.state.batches[number - 2] if number > 1 else None
            lowest = not self.stacked or number == lowest_open(run.state)
            if lowest:
                onto, label = tip, f"`{run.base_branch}`"
                exclude = (
                    [previous.merged_head] if previous and previous.merged and previous.merged_head else []
                )
            else:
                assert previous is not None and previous.head_sha
                onto, label = (moved[1] if moved else previous.head_sha), f"batch {number - 1}"
                exclude = [moved[0]] if moved else []
            if await self._contains(record.head_sha, onto) or (
                reason == "merged"
                and lowest
                and not moved
                and exclude
                and await self._contains(tip, exclude[0])
            ):
                moved = None  # already on it, or merged with a merge commit: GitHub's diff is right
                continue
            branch = record.branch or batch_branch(run.branch_prefix, number)
            if not await self._still_ours(number, branch, onto=label, exclude=exclude):
                break
            head = run.state.batches[number - 1].head_sha
            assert head is not None
            if self.wanted is not None:
                run.still_wanted = self.wanted(number)
            try:
                rebuilt = await rebuild_batch(
                    run, number, old_head=head, onto=onto, exclude=exclude, onto_label=label
                )
            except WorkspaceError as exc:  # git itself failed: said on the PR, the branch untouched
                log.warning("could not rebuild batch %s: %s", number, exc.message)
                await self._comment(number, say.rebuild_error(onto=label, cause=cause, error=exc.message))
                break
            if not rebuilt.ok:
                await self._conflicted(number, rebuilt, onto=label, cause=cause)
                break
            if not await self._publish(number, branch, rebuilt, onto=label, cause=cause):
                break
            moved = (head, rebuilt.head)
        await self.retarget()

    async def _reopen_stranded(self) -> None:
        """Batches whose PR was merged into a branch that will never reach the base branch (a
        delivered batch's, or no batch's) get their branch back and a new pull request; the
        restack that follows puts them on the base branch."""
        state = self.run.state
        for record in state.batches:
            holder = batch_of_branch(record.merged_into or "", state.issue)
            if record.merged or record.merged_into is None or not record.merged_head or record.hands_off:
                continue
            if holder is not None and holder <= len(state.batches) and is_open(state.batches[holder - 1]):
                continue  # it reaches the base branch with the batch that holds it
            why = f"#{record.pr_number} went into `{record.merged_into}`"
            await self._open_again(record.number, head=record.merged_head, why=why)

    async def _replace_closed(self) -> None:
        """An open batch whose PR GitHub closed because its base branch was deleted (it does that
        instead of retargeting when the branch goes through the API) gets a new pull request."""
        for record in list(self.run.state.batches):
            if not is_open(record) or record.pr_number is None or not record.head_sha or record.hands_off:
                continue
            try:
                pr = await self.port.get_pull_request(self.repo, record.pr_number)
            except GitHubError as exc:
                log.warning("could not read #%s: %s", record.pr_number, exc.message)
                continue
            if pr.state != "closed" or pr.merged or await self.run.mirror.remote_sha(pr.base_ref) is not None:
                continue  # open, merged (its event counts it), or closed by a person: theirs to decide
            why = f"#{record.pr_number} was closed when `{pr.base_ref}` was deleted"
            await self._open_again(record.number, head=record.head_sha, why=why)

    async def _open_again(self, number: int, *, head: str, why: str) -> None:
        """Batch `number`'s branch at `head` (pushed back if it was deleted) and a new pull request
        into what it must target now, recorded as the batch's."""
        run, state = self.run, self.run.state
        record = state.batches[number - 1]
        branch = record.branch or batch_branch(run.branch_prefix, number)
        remote = await run.mirror.remote_sha(branch)
        if remote is not None and remote != head and not run.mirror.pushed(branch, remote):
            note = say.not_reopened(branch=branch, seen=remote, why=why)  # a person's work: never over it
            await self._save(functools.partial(_set, number=number, hands_off=True, stack_note=note))
            await self._comment(number, note)
            return
        await run.mirror.git("update-ref", f"refs/heads/{branch}", head)
        try:
            head = await run.mirror.push(branch, expected_remote_sha=remote, force=remote is not None)
        except PushRejected as exc:
            log.warning("could not push %s back: %s", branch, exc)
            return
        ids = [
            sid for sid in state.batches_ids()[number - 1] if state.stories[sid].status == StoryStatus.PASSED
        ]
        base = expected_base(state, number, base_branch=run.base_branch, stacked=self.stacked)
        body = pr_body(state, number, ids, plan_url=self.plan_url, integration=record.gates)
        try:
            pr = await self.port.create_pull_request(
                self.repo, title=pr_title(state, number, ids), body=body, head=branch, base=base
            )
        except GitHubError as exc:
            log.warning("could not open a new pull request for batch %s: %s", number, exc.message)
            return
        reopened = functools.partial(
            _set, number=number, pr_number=pr.number, pr_url=pr.html_url, head_sha=head, merged_into=None
        )
        await self._save(reopened)

        self.done.append((pr.number, f"opened for batch {number} ({why})"))

    async def _contains(self, head: str, commit: str) -> bool:
        found = await self.run.mirror.git("merge-base", "--is-ancestor", commit, head, check=False)
        return found.returncode == 0

    async def _still_ours(self, number: int, branch: str, *, onto: str, exclude: list[str]) -> bool:
        """The remote branch holds what the bot recorded (or a later head the bot pushed, after a
        crash before it was recorded, which is adopted); else the bot leaves it alone and says how,
        once. Who authored the head does not count: an amend or a rebase keeps the bot's author."""
        run = self.run
        record = run.state.batches[number - 1]
        remote = await run.mirror.remote_sha(branch)
        if remote == record.head_sha:
            return True
        if remote is not None and run.mirror.pushed(branch, remote):
            log.info("batch %s's remote head %s is the bot's: adopted", number, remote[:12])
            await self._save(functools.partial(_set, number=number, head_sha=remote))
            return True
        if record.hands_off:
            return False  # said already
        note = say.someone_pushed(
            branch=branch, seen=remote, onto=onto, exclude=exclude[0] if exclude else None
        )
        await self._save(functools.partial(_set, number=number, hands_off=True, stack_note=note))
        await self._comment(number, note)
        return False

    async def _conflicted(self, number: int, rebuilt: Rebuild, *, onto: str, cause: str) -> None:
        record = self.run.state.batches[number - 1]
        branch = record.branch or batch_branch(self.run.branch_prefix, number)
        note = say.restack_failed(onto=onto, cause=cause, conflicts=rebuilt.conflicts, branch=branch)
        spent = {
            sid: self.run.state.stories[sid] for sid in rebuilt.conflicts if sid in self.run.state.stories
        }
        await self._save(
            functools.partial(_set, number=number, stack_note=note.split("\n", 1)[0], spent=spent)
        )
        await self._draft(number)
        await self._comment(number, note)

    async def _publish(self, number: int, branch: str, rebuilt: Rebuild, *, onto: str, cause: str) -> bool:
        """Push the rebuilt branch (a lease on the recorded head), record it, then its stories,
        gates or the carried roll-up, and the pull request's note."""
        run, record = self.run, self.run.state.batches[number - 1]
        await run.mirror.git("update-ref", f"refs/heads/{branch}", rebuilt.head)
        try:
            pushed = await run.mirror.push(branch, expected_remote_sha=record.head_sha, force=True)
        except PushRejected:
            return await self._still_ours(number, branch, onto=onto, exclude=[])
        except WorkspaceError as exc:  # GitHub refused for another reason (a rule): said on the PR
            log.warning("could not publish the rebuilt batch %s: %s", number, exc.message)
            await self._comment(number, say.rebuild_error(onto=onto, cause=cause, error=exc.message))
            return False
        # GitHub's own commits when it made them through its API (the local branches hold them now).
        rebuilt.head = pushed
        rebuilt.replayed = {sid: run.mirror.published_as(sha) for sid, sha in rebuilt.replayed.items()}
        stories = self._rebuilt_stories(rebuilt)
        await self._save(
            functools.partial(
                _set,
                number=number,
                head_sha=rebuilt.head,
                rebased_onto=rebuilt.onto,
                stories=stories,
            )
        )
        for sid in rebuilt.replayed:
            await self._push_story(story_branch(run.branch_prefix, sid))
        gates = None
        if rebuilt.tree_changed:
            results = await self._gates(number, branch, rebuilt.head)
            integration: dict[str, str] = {r.name: conclusion(r) for r in results}
            gates = ", ".join(f"`{n}`: {c}" for n, c in integration.items())
            await self._save(functools.partial(_set, number=number, gates=integration))
            state = self.run.state
            merged = [
                s for s in state.batches_ids()[number - 1] if state.stories[s].status == StoryStatus.PASSED
            ]
            await post_rollup(
                self.port,
                self.repo,
                state,
                batch=number,
                head=rebuilt.head,
                merged=merged,
                integration=integration,
            )
        else:
            await carry_rollup(self.port, self.repo, batch=number, old=rebuilt.old_head, new=rebuilt.head)
        note = say.restacked(
            onto=onto, cause=cause, tree_changed=rebuilt.tree_changed, redone=rebuilt.redone, gates=gates
        )
        if record.draft and say.failed_before(record.stack_note):  # drafted for its conflicts only
            await self._draft(number, draft=False)
        await self._save(functools.partial(_set, number=number, stack_note=note))
        await self._note_in_body(number, note)
        await self._comment(number, note)
        return True

    def _rebuilt_stories(self, rebuilt: Rebuild) -> dict[str, StoryState]:
        """The stories' records after the rebuild: replayed ones point at their new commit,
        redone ones are what their agent's run left (its costs included)."""
        out: dict[str, StoryState] = {}
        for sid, sha in rebuilt.replayed.items():
            out[sid] = self.run.state.stories[sid].model_copy(update={"commit": sha})
        for sid in rebuilt.redone:
            out[sid] = self.run.state.stories[sid]
        return out

    async def _push_story(self, branch: str) -> None:
        try:
            seen = await self.run.mirror.tracking_sha(branch)
            await self.run.mirror.push(branch, expected_remote_sha=seen, force=seen is not None)
        except (PushRejected, WorkspaceError) as exc:
            log.warning("could not push the rebuilt %s: %s", branch, exc)

    async def _gates(self, number: int, branch: str, head: str) -> list:  # type: ignore[type-arg]
        if not self.run.config.gates.integration:
            return []
        return await integration_in_worktree(self.run, number, branch, head)

    async def _note_in_body(self, number: int, note: str) -> None:
        record = self.run.state.batches[number - 1]
        assert record.pr_number is not None
        try:
            pr = await self.port.get_pull_request(self.repo, record.pr_number)
            await self.port.update_pull_request(
                self.repo, record.pr_number, body=say.with_note(pr.body, note)
            )
        except GitHubError as exc:
            log.warning("could not update #%s's body: %s", record.pr_number, exc.message)

    async def _draft(self, number: int, *, draft: bool = True) -> None:
        """Make the pull request a draft (or ready again); its record says what it is now."""
        record = self.run.state.batches[number - 1]
        assert record.pr_number is not None
        try:
            pr = await self.port.get_pull_request(self.repo, record.pr_number)
            if pr.draft != draft and pr.node_id:
                if draft:
                    await self.port.convert_to_draft(self.repo, pr.node_id)
                else:
                    await self.port.mark_ready_for_review(self.repo, pr.node_id)
            await self._save(functools.partial(_set, number=number, draft=draft))
        except GitHubError as exc:
            log.warning(
                "could not make #%s %s: %s", record.pr_number, "a draft" if draft else "ready", exc.message
            )

    async def _comment(self, number: int, body: str) -> None:
        record = self.run.state.batches[number - 1]
        if record.pr_number is None:
            return
        self.done.append((record.pr_number, body.split("\n", 1)[0]))
        try:
            await self.port.create_issue_comment(self.repo, record.pr_number, body=body)
        except GitHubError as exc:
            log.warning("could not comment on #%s: %s", record.pr_number, exc.message)


def _set(
    state: PlanState,
    *,
    number: int,
    stories: dict[str, StoryState] | None = None,
    spent: dict[str, StoryState] | None = None,
    **changes: object,
) -> PlanState:
    """Batch `number`'s record with `changes`; the given stories' records; and, for `spent`
    (stories whose redo failed: they keep their earlier work), only what their redo cost."""
    state = with_batch(state, state.batches[number - 1].model_copy(update=changes))
    records = {**state.stories, **(stories or {})}
    for sid, scratch in (spent or {}).items():
        costs = {
            "tokens": scratch.tokens,
            "cached_tokens": scratch.cached_tokens,
            "cost_usd": scratch.cost_usd,
        }
        records[sid] = records[sid].model_copy(update=costs)
    return state.model_copy(update={"stories": records})
