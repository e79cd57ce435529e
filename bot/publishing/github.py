"""The engine's ports on GitHub: state in the plan comment, gates as check runs, batches as PRs."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from bot.errors import GitHubError
from bot.gates.annotations import Annotation
from bot.gates.detect import GateSpec
from bot.gates.report import (
    GateResult,
    annotation_batches,
    check_output,
    check_run_name,
    conclusion,
    gate_external_id,
)
from bot.github.port import GitHubPort
from bot.orchestration.acceptance import BatchReview, merge_and_review
from bot.orchestration.run import Run
from bot.orchestration.scheduler import batch_branch
from bot.orchestration.verdicts import REVIEW_MARKER, diff_lines, draft_reason, line_comments, review_body
from bot.plan.stack import expected_base
from bot.plan.state import BatchState, PlanState, batch_record, with_batch
from bot.publishing.rollup import post_rollup
from bot.rendering import messages
from bot.rendering.pr_body import pr_body, pr_title
from bot.store.trust import same_login

log = logging.getLogger(__name__)


def written_by_bot(body: str | None, author: str | None, marker: str, bot_login: str | None) -> bool:
    """Whether a body is the bot's own carrying `marker`: its author is the bot (when the bot's
    login is known) and the marker is its last line, where the bot writes it; a marker anywhere
    else (a model's text quoted in it, someone else's comment or review) does not count."""
    ours = bot_login is None or same_login(author, bot_login)
    return ours and (body or "").rstrip().endswith(marker)


SaveComment = Callable[[PlanState], Awaitable[PlanState]]


class GitHubReporter:
    """Saves state to the plan comment (progress at most every `interval` s) and the cache.

    Progress goes through `save_progress` (default `save_comment`): the server's does not wait for
    the comment's edit, which goes last in the installation's write queue, a newer one replacing it.
    """

    def __init__(
        self,
        port: GitHubPort,
        repo: str,
        issue: int,
        *,
        save_comment: SaveComment,
        save_progress: SaveComment | None = None,
        interval: float = 5.0,
        details_url: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        bot_login: str | None = None,
    ) -> None:
        self.port = port
        self.bot_login = bot_login
        self.repo = repo
        self.issue = issue
        self.save_comment = save_comment
        self.save_progress = save_progress or save_comment
        self.interval = interval
        self.details_url = details_url
        self.clock = clock
        self._last = float("-inf")
        self._dirty: PlanState | None = None
        self.open_runs: dict[int, str] = {}
        """Check runs this reporter started and has not completed yet (id → name)."""

    async def save(self, state: PlanState, *, important: bool = False) -> PlanState | None:
        """Transitions are written at once; progress edits at most once every `interval` seconds.

        Returns the state as written (with its new version), or None when the write was deferred.
        """
        now = self.clock()
        if important or now - self._last >= self.interval:
            self._last = now
            self._dirty = None
            return await (self.save_comment if important else self.save_progress)(state)
        self._dirty = state
        return None

    async def gate_started(self, *, scope: str, gate: GateSpec, head_sha: str, attempt: int) -> object:
        """Create the check run `plan-cascade / STORY-001 / test` in progress."""
        try:
            run = await self.port.create_check_run(
                self.repo,
                name=check_run_name(scope, gate.name),
                head_sha=head_sha,
                status="in_progress",
                external_id=gate_external_id(self.issue, scope, gate.name, attempt),
                details_url=self.details_url,
                output={"title": f"{gate.name}: running (attempt {attempt})", "summary": f"`{gate.command}`"},
            )
            self.open_runs[run.id] = run.name
            return run.id
        except GitHubError as exc:
            log.warning("could not create check run for %s/%s: %s", scope, gate.name, exc.message)
            return None

    async def gate_finished(
        self,
        handle: object,
        *,
        scope: str,
        gate: GateSpec,
        result: GateResult,
        annotations: list[Annotation],
        head_sha: str,
    ) -> None:
        """Complete the check run; annotations go 50 per request."""
        if not isinstance(handle, int):
            return
        batches = annotation_batches(annotations)
        output = dict(check_output(result, annotations=annotations))
        try:
            await self.port.update_check_run(
                self.repo,
                handle,
                status="completed",
                conclusion=conclusion(result),
                output={**output, "annotations": batches[0] if batches else []},
            )
            self.open_runs.pop(handle, None)
            for chunk in batches[1:]:
                await self.port.update_check_run(self.repo, handle, output={**output, "annotations": chunk})
        except GitHubError as exc:
            log.warning("could not complete check run %s: %s", handle, exc.message)

    async def close_open_runs(self, *, conclusion: str, reason: str) -> int:
        """Complete every check run this reporter left queued or in progress (the run failed,
        was cancelled or superseded, or GitHub refused the completion); how many were closed.
        GitHub errors are logged: what stays open is closed by the start-up sweep."""
        closed = 0
        for run_id, name in list(self.open_runs.items()):
            output = {"title": f"{conclusion.capitalize()}: {reason}"[:255], "summary": reason}
            try:
                await self.port.update_check_run(self.repo, run_id, conclusion=conclusion, output=output)
            except GitHubError as exc:
                log.warning("could not close check run %s (%s): %s", run_id, name, exc.message)
                continue
            self.open_runs.pop(run_id, None)
            closed += 1
        return closed

    async def message(self, body: str, *, key: str | None = None) -> None:
        """A comment on the plan's issue; with `key`, posted only if no comment of ours carries it."""
        if key is not None:
            marker = f"<!-- plan-cascade:notice {key} -->"
            for comment in await self.port.list_issue_comments(self.repo, self.issue):
                if written_by_bot(comment.body, comment.user_login, marker, self.bot_login):
                    log.info("message %s was already posted: not again", key)
                    return
            body = f"{body.rstrip()}\n{marker}\n"
        await self.port.create_issue_comment(self.repo, self.issue, body=body)


class GitHubPublisher:
    """One pull request per batch, stacked on the previous batch or on the default branch."""

    def __init__(self, port: GitHubPort, repo: str, *, plan_url: str, bot_login: str | None = None) -> None:
        self.port = port
        self.repo = repo
        self.plan_url = plan_url
        self.bot_login = bot_login

    async def publish_batch(self, run: Run, batch: int, story_ids: list[str]) -> PlanState:
        """Merge, push (never over someone else's work), open or update the PR, roll-up check."""
        record = batch_record(run.state, batch)
        branch = batch_branch(run.branch_prefix, batch)
        if record.hands_off:
            return run.state

        async def push(head: str) -> bool:
            remote = await run.mirror.remote_sha(branch)
            if remote is not None and remote != record.head_sha and not run.mirror.pushed(branch, remote):
                return False  # a head the bot cannot show it pushed is a person's, whoever its author
            if remote != head:
                await run.mirror.push(branch, expected_remote_sha=remote, force=True)
            return True

        outcome, review = await merge_and_review(run, batch, story_ids, push=push)
        if outcome.hands_off:
            return await self._hands_off(run, batch, record, branch)
        if not outcome.merged:
            return run.state
        integration = {r.name: conclusion(r) for r in outcome.integration}
        failed_gate = not outcome.gates_passed
        unmet = draft_reason(run.state, review.checks) if review is not None else None
        draft = (failed_gate and run.config.publishing.draft_on_failure) or unmet is not None
        reason = "an integration gate failed" if failed_gate else unmet
        # The previous batch's branch, unless that batch is merged already: then the base branch.
        stacked = run.config.execution.stacking == "stacked"
        base = expected_base(run.state, batch, base_branch=run.base_branch, stacked=stacked)

        def body(draft: bool) -> str:
            return pr_body(
                run.state,
                batch,
                outcome.merged,
                plan_url=self.plan_url,
                integration=integration,
                draft_reason=reason if draft else None,
                review_note=_review_note(review),
            )

        title = pr_title(run.state, batch, outcome.merged)
        pr = await self.port.find_pull_request(self.repo, branch, state="open")
        await run.reached("opening-pr", f"batch-{batch}")
        if pr is None:
            pr = await self.port.create_pull_request(
                self.repo, title=title, body=body(draft), head=branch, base=base, draft=draft
            )
            cfg = run.config.publishing
            if cfg.reviewers or cfg.team_reviewers:
                try:
                    await self.port.request_reviewers(
                        self.repo, pr.number, reviewers=cfg.reviewers, team_reviewers=cfg.team_reviewers
                    )
                except GitHubError as exc:
                    log.warning("could not request reviewers: %s", exc.message)
            if cfg.labels:
                try:
                    await self.port.add_labels(self.repo, pr.number, cfg.labels)
                except GitHubError as exc:
                    log.warning("could not label PR #%s: %s", pr.number, exc.message)
        else:
            if pr.draft != draft and pr.node_id:  # first, so that the body says what the PR is
                draft = await self._set_draft(pr.number, pr.node_id, draft=draft, was=pr.draft)
            await self.port.update_pull_request(self.repo, pr.number, title=title, body=body(draft))
        if review is not None and review.checks:
            await self._post_review(run, batch, pr.number, review)
        await post_rollup(
            self.port, self.repo, run.state, batch=batch, head=outcome.head_sha, merged=outcome.merged,
            integration=integration, unmet=unmet,
        )  # fmt: skip
        updated = record.model_copy(
            update={
                "branch": branch,
                "pr_number": pr.number,
                "pr_url": pr.html_url,
                "head_sha": outcome.head_sha,
                "draft": draft,
                "gates": integration,
            }
        )
        return await run.update(lambda s: with_batch(s, updated), important=True)

    async def _set_draft(self, number: int, node_id: str, *, draft: bool, was: bool) -> bool:
        """Make an existing PR a draft or ready for review, as this publication says; what it is now.

        A PR that a failed gate or an unmet criterion made a draft is ready again once a retry
        passes, and the other way round. GitHub changes this only over GraphQL; if that fails, the
        PR keeps its state (logged), and its body says what it is (the roll-up check says why).
        """
        try:
            if draft:
                await self.port.convert_to_draft(self.repo, node_id)
            else:
                await self.port.mark_ready_for_review(self.repo, node_id)
        except GitHubError as exc:
            log.warning("could not %s PR #%s: %s", "draft" if draft else "mark ready", number, exc.message)
            return was
        return draft

    async def _post_review(self, run: Run, batch: int, number: int, review: BatchReview) -> None:
        """The acceptance review as a pull request review, once per batch head."""
        marker = REVIEW_MARKER.format(batch=batch, head=review.head)
        try:
            reviews = await self.port.list_reviews(self.repo, number)
            if any(written_by_bot(r.body, r.user_login, marker, self.bot_login) for r in reviews):
                return
            if review.error:
                body = (
                    f"The acceptance review of batch {batch} did not give verdicts: {review.error}.\n{marker}"
                )
                await self.port.create_review(self.repo, number, commit_id=review.head, body=body)
                return
            body = review_body(
                run.state,
                batch,
                review.head,
                review.checks,
                summary=review.answer.summary if review.answer else "",
                cost_usd=run.state.review_cost_usd,
                tokens=run.state.review_tokens,
                sent_back=review.sent_back,
            )
            comments = line_comments(review.answer, diff_lines(review.diff)) if review.answer else []
            lines = [{"path": c.path, "line": c.line, "side": "RIGHT", "body": c.body} for c in comments]
            await self.port.create_review(self.repo, number, commit_id=review.head, body=body, comments=lines)
        except GitHubError as exc:
            log.warning("could not post the acceptance review on #%s: %s", number, exc.message)

    async def _hands_off(self, run: Run, batch: int, record: BatchState, branch: str) -> PlanState:
        note = messages.hands_off(branch)
        if record.pr_number is not None:
            await self.port.create_issue_comment(self.repo, record.pr_number, body=note)
        else:
            await run.reporter.message(note)
        updated = record.model_copy(update={"hands_off": True, "branch": branch})
        return await run.update(lambda s: with_batch(s, updated), important=True)


def _review_note(review: BatchReview | None) -> str | None:
    if review is None:
        return None
    if review.error:
        return f"Acceptance criteria not reviewed ({review.error}): a box is ticked when its story passed."
    if review.sent_back:
        return (
            f"The acceptance review sent {', '.join(review.sent_back)} back with its reasoning before this."
        )
    return None
