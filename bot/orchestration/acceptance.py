"""The acceptance review of a batch: after its gates pass, a read-only reviewer judges every
acceptance criterion against the batch diff; a story with a criterion not met goes back to
its agent (at most `publishing.acceptance_retries` times) and the batch is merged again.

The verdicts are saved in each story's record (`acceptance`), the review's cost in the plan's
(`review_cost_usd`, counted in the budget). The publisher shows them: ticked boxes in the PR
body, a pull request review with comments on the lines cited, a draft when a criterion is
still not met.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field

from bot.agent.readonly import DIFF_BYTES, GitTree, Investigation, ReadOnlyLimits, Unfinished, investigate
from bot.errors import AgentError, WorkspaceError
from bot.gates.report import conclusion
from bot.orchestration.batch import BatchOutcome, PushHead, merge_batch
from bot.orchestration.run import Run, batch_base
from bot.orchestration.scheduler import story_branch
from bot.orchestration.story import run_story
from bot.orchestration.verdicts import (
    SYSTEM,
    AcceptanceAnswer,
    answer_problems,
    checks_of,
    expected,
    not_met,
    review_prompt,
    send_back_feedback,
)
from bot.plan.state import CriterionCheck, PlanState, StoryStatus, batch_record, update_story, with_batch

log = logging.getLogger(__name__)
LIMITS = ReadOnlyLimits()


@dataclass
class BatchReview:
    """What the acceptance review of one batch head found."""

    head: str
    checks: dict[str, list[CriterionCheck]] = field(default_factory=dict)
    answer: AcceptanceAnswer | None = None
    diff: str = ""
    cost_usd: float = 0.0
    tokens: int = 0
    error: str | None = None
    """Why the review did not give verdicts (its cost still counts)."""
    sent_back: list[str] = field(default_factory=list)


def wanted(run: Run, outcome: BatchOutcome) -> bool:
    """Whether this merged batch gets an acceptance review."""
    return (
        run.config.publishing.acceptance_review
        and bool(outcome.merged)
        and not outcome.hands_off
        and outcome.gates_passed
    )


async def merge_and_review(
    run: Run, batch: int, story_ids: list[str], *, push: PushHead | None = None
) -> tuple[BatchOutcome, BatchReview | None]:
    """Merge the batch; review it; send back stories with criteria not met; merge again."""
    outcome = await merge_batch(run, batch, story_ids, push=push)
    review: BatchReview | None = None
    sent_back: list[str] = []
    while wanted(run, outcome):
        review = await review_batch(run, batch, outcome)
        again = [
            sid
            for sid in not_met(review.checks)
            if run.state.stories[sid].review_rounds < run.config.publishing.acceptance_retries
        ]
        if not again or run.over_budget():
            break
        for sid in again:
            await _send_back(run, sid, send_back_feedback(run.state, sid, review.checks[sid]))
        sent_back += again
        passed = [sid for sid in story_ids if run.state.stories[sid].status == StoryStatus.PASSED]
        outcome = await merge_batch(run, batch, passed, push=push)
    if review is not None:
        review.sent_back = sent_back
    return outcome, review


async def review_batch(run: Run, batch: int, outcome: BatchOutcome) -> BatchReview:
    """Judge the merged stories' criteria on `outcome.head_sha`, and save the verdicts."""
    record = batch_record(run.state, batch)
    wanted_ids = expected(run.state, outcome.merged)
    saved = {sid: run.state.stories[sid].acceptance for sid in outcome.merged}
    if record.reviewed_head == outcome.head_sha and all(saved.values()):
        log.info("batch %s was reviewed at %s already: its verdicts stand", batch, outcome.head_sha[:12])
        return BatchReview(outcome.head_sha, checks=saved)
    llm = run.review_llm
    if llm is None:
        return BatchReview(outcome.head_sha, error="no model is configured for reviews on this server")
    base = await run.mirror.resolve(batch_base(run, batch))
    tree = GitTree(run.mirror.git, outcome.head_sha)
    diff, cut = await tree.diff_from(base)
    if cut:
        diff += f"\n[... the diff is longer than {DIFF_BYTES:,} bytes: it was cut here; read the files ...]\n"
    review = BatchReview(outcome.head_sha, diff=diff)
    gates = {sid: dict(run.state.stories[sid].gates) for sid in outcome.merged}
    gates["integration"] = {r.name: conclusion(r) for r in outcome.integration}
    prompt = review_prompt(run.state, outcome.merged, diff=diff, gates=gates)
    try:
        found: Investigation[AcceptanceAnswer] = await investigate(
            llm,
            tree,
            system=SYSTEM,
            prompt=prompt,
            answer=AcceptanceAnswer,
            limits=LIMITS,
            validate=functools.partial(answer_problems, wanted=wanted_ids),
        )
    except Unfinished as exc:
        log.warning("the acceptance review of batch %s did not finish: %s", batch, exc.message)
        review.error = exc.message
        review.cost_usd = exc.cost_usd
        review.tokens = exc.usage.total_input_tokens + exc.usage.output_tokens
        await _save(run, batch, review)
        return review
    review.answer, review.cost_usd, review.tokens = found.value, found.cost_usd, found.tokens
    review.checks = checks_of(found.value, wanted_ids)
    await _save(run, batch, review)
    return review


async def _save(run: Run, batch: int, review: BatchReview) -> None:
    def change(state: PlanState) -> PlanState:
        for sid, checks in review.checks.items():
            state = update_story(state, sid, acceptance=checks)
        record = batch_record(state, batch).model_copy(
            update={"reviewed_head": review.head if review.checks else None}
        )
        return with_batch(state, record).model_copy(
            update={
                "review_cost_usd": state.review_cost_usd + review.cost_usd,
                "review_tokens": state.review_tokens + review.tokens,
            }
        )

    await run.update(change, important=True)


async def _send_back(run: Run, sid: str, feedback: str) -> None:
    """Run the story's agent again on its own branch with the reviewer's reasoning.

    When that does not pass its gates, the story keeps the work that did (its branch is put
    back), and the verdict stands.
    """
    before = run.state.stories[sid]
    branch = story_branch(run.branch_prefix, sid)
    await run.story(sid, important=True, review_rounds=before.review_rounds + 1)
    log.info("%s: the acceptance review found criteria not met; sending it back to its agent", sid)
    try:
        await run_story(run, sid, before.commit or f"refs/heads/{branch}", phase="retry", feedback=feedback)
    except (WorkspaceError, AgentError) as exc:
        log.warning("%s could not be sent back: %s", sid, exc.message)
    if run.state.stories[sid].status == StoryStatus.PASSED or before.commit is None:
        return
    await run.mirror.git("update-ref", f"refs/heads/{branch}", before.commit)
    commit = before.commit
    if run.push:
        remote = await run.mirror.remote_sha(branch)
        if remote != before.commit:
            commit = await run.mirror.push(branch, expected_remote_sha=remote, force=True)
    await run.story(
        sid,
        important=True,
        status=StoryStatus.PASSED,
        commit=commit,
        gates=before.gates,
        summary=before.summary,
        reason=None,
        attempts=before.attempts,
    )
