"""The plan's state machine and its canonical state: pure, no I/O.

The state travels in a signed hidden block inside the plan comment (GitHub is the
source of truth, STYLE §4; see `bot.plan.state_block`) and is cached in the database.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from bot.errors import StateError
from bot.plan import PRD, compute_batches, revision_hash, transitive_dependents
from bot.plan.baseline import BaseCheck
from bot.plan.blocked import BlockedRequest
from bot.plan.records import DependencyRecord, ToolUse
from bot.plan.scheduled import ScheduledBy

PlanSource = Literal["prd-block", "llm", "plan-pr", "reflection"]


class PlanStatus(StrEnum):
    """Where a plan is in its life."""

    DRAFT = "draft"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


S = PlanStatus
TRANSITIONS: dict[PlanStatus, set[PlanStatus]] = {
    S.DRAFT: {S.AWAITING_APPROVAL, S.CANCELLED},
    S.AWAITING_APPROVAL: {S.AWAITING_APPROVAL, S.APPROVED, S.CANCELLED},
    S.APPROVED: {S.AWAITING_APPROVAL, S.RUNNING, S.CANCELLED},
    S.RUNNING: {S.RUNNING, S.AWAITING_APPROVAL, S.PAUSED, S.COMPLETED, S.FAILED, S.CANCELLED},
    S.PAUSED: {S.RUNNING, S.AWAITING_APPROVAL, S.CANCELLED},
    S.FAILED: {S.RUNNING, S.AWAITING_APPROVAL, S.COMPLETED, S.CANCELLED},
    S.COMPLETED: set(),
    S.CANCELLED: {S.AWAITING_APPROVAL},
}
TERMINAL = {S.COMPLETED, S.CANCELLED}


class StoryStatus(StrEnum):
    """Where a story is in its life."""

    PENDING = "pending"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class Approval(BaseModel):
    """Who approved which revision, when and how, and what it covers."""

    user: str = Field(description="GitHub login of the approver.")
    at: datetime = Field(description="When the approval was seen.")
    via: Literal["reaction", "command", "review"] = Field(description="How the approval was given.")
    plan_hash: str = Field(description="The plan revision hash the approval binds to.")
    scope: list[str] = Field(default_factory=list, description="Story ids approved; empty means all.")
    revision: int | None = Field(
        default=None,
        description="The revision number approved: a new revision with the same PRD (a reflection "
        "that only retries) needs a fresh approval. None only in state written before it was recorded.",
    )


Verdict = Literal["met", "not_met", "unknown"]


class CriterionCheck(BaseModel):
    """The acceptance review's verdict on one acceptance criterion."""

    verdict: Verdict = Field(description="met, not_met, or unknown (the reviewer cannot tell).")
    evidence: str = Field(default="", max_length=400, description="Where it shows: file:line or gate output.")


class StoryState(BaseModel):
    """Execution record of one story."""

    status: StoryStatus = StoryStatus.PENDING
    attempts: int = 0
    branch: str | None = None
    commit: str | None = None
    agent: str | None = None
    model: str | None = None
    tokens: int = Field(default=0, description="Tokens at full price: uncached input, cache writes, output.")
    cached_tokens: int = Field(default=0, description="Input tokens read from the prompt cache (cheaper).")
    cost_usd: float = 0.0
    reason: str | None = Field(default=None, description="Why the story failed or was skipped.")
    gates: dict[str, str] = Field(default_factory=dict, description="Gate name → last conclusion.")
    check_runs: dict[str, int] = Field(default_factory=dict, description="Gate name → check run id.")
    summary: str | None = Field(default=None, description="What the agent says it did.")
    acceptance: list[CriterionCheck] = Field(
        default_factory=list,
        description="The acceptance review's verdicts, one per criterion in order; empty = not reviewed.",
    )
    review_rounds: int = Field(default=0, description="Times the acceptance review sent the story back.")
    dependencies: list[DependencyRecord] = Field(
        default_factory=list,
        description="Package versions the story adds or upgrades (those with advisories first, at most 20).",
    )
    dependencies_more: int = Field(default=0, description="Further package versions, checked but not kept.")
    blocked: list[BlockedRequest] = Field(
        default_factory=list,
        description="Network requests of its agent and setup that the egress proxy refused (bounded).",
    )
    mcp_tools: dict[str, ToolUse] = Field(
        default_factory=dict, description="MCP tool (`<server>__<tool>`) → its calls, over every attempt."
    )


class BatchState(BaseModel):
    """Publishing record of one batch."""

    number: int
    branch: str | None = None
    pr_number: int | None = None
    pr_url: str | None = None
    head_sha: str | None = None
    merged: bool = Field(
        default=False, description="Delivered: its pull request was merged into the plan's base branch."
    )
    merged_head: str | None = Field(
        default=None, description="The head GitHub merged: what the next batch is rebuilt from."
    )
    merged_into: str | None = Field(
        default=None, description="The branch its PR was merged into when that was not the base branch."
    )
    stack_note: str | None = Field(
        default=None, description="What the bot last did to keep the PR on its base (restack, conflicts)."
    )
    rebased_onto: str | None = Field(
        default=None, description="The base commit the branch was last rebuilt on (auto_rebase: once each)."
    )
    draft: bool = False
    hands_off: bool = Field(
        default=False, description="Someone else pushed to the branch: the bot leaves it."
    )
    gates: dict[str, str] = Field(default_factory=dict, description="Integration gate → conclusion.")
    reviewed_head: str | None = Field(
        default=None, description="The batch head whose acceptance verdicts the stories hold."
    )
    ci_reruns: list[int] = Field(default_factory=list, description="Workflow runs re-run for infrastructure.")
    ci_fixes: int = Field(default=0, description="Fix commits pushed for the repository's CI.")
    ci_actions: list[str] = Field(default_factory=list, description="What the bot did about CI, in order.")
    ci_stopped: str | None = Field(default=None, description="Why the CI loop stopped on this PR.")
    ci_comment: int | None = Field(default=None, description="The sticky CI comment on the PR.")
    ci_timer: str | None = Field(default=None, description="The head whose pending-checks timer is set.")


class PlanState(BaseModel):
    """Everything needed to resume a plan, carried in the plan comment."""

    format: int = Field(default=1, description="Version of this state format.")
    version: int = Field(
        default=0, description="+1 on every write: writes are compare-and-swap on it, so none is lost."
    )
    repo: str = Field(description="owner/name.")
    issue: int = Field(description="The issue the plan belongs to.")
    status: PlanStatus = PlanStatus.AWAITING_APPROVAL
    revision: int = Field(default=1, description="1 for the first plan, +1 per revise.")
    plan_hash: str = Field(description="sha256 of the PRD's canonical JSON.")
    prd: PRD
    approvals: list[Approval] = Field(default_factory=list)
    required_approvals: int = 1
    approved_scope: list[str] = Field(default_factory=list, description="Story ids allowed to run.")
    ignored_reactions: list[int] = Field(
        default_factory=list, description="Reaction ids given to earlier revisions: they approve nothing."
    )
    stories: dict[str, StoryState] = Field(default_factory=dict)
    batches: list[BatchState] = Field(default_factory=list)
    planning_tokens: int = 0
    planning_cost_usd: float = 0.0
    review_tokens: int = Field(default=0, description="Tokens the acceptance reviews of batches used.")
    review_cost_usd: float = Field(default=0.0, description="What the acceptance reviews of batches cost.")
    changelog: list[str] = Field(default_factory=list, description="What the last revise changed.")
    warnings: list[str] = Field(default_factory=list)
    perspectives: dict[str, str] = Field(default_factory=dict, description="Planning perspectives.")
    cross_check: str | None = Field(
        default=None,
        description="Cross-checked planning: where the models agreed and disagreed and what the "
        "synthesis chose (Markdown).",
    )
    looked_at: str | None = Field(
        default=None, description="Exploration before planning: files read, conventions, cost (Markdown)."
    )
    clarifications: str | None = Field(
        default=None,
        description="The questions asked before planning and the maintainer's answers (Markdown).",
    )
    source: Literal["prd-block", "llm", "plan-pr", "reflection"] = "llm"
    plan_pr: int | None = None
    setup: list[str] = Field(
        default_factory=list,
        description="Setup commands every story's worktree runs (approved with the plan).",
    )
    setup_source: Literal["configured", "detected", "none"] = Field(
        default="none", description="Where the setup commands came from."
    )
    setup_read: list[str] = Field(
        default_factory=list, description="The files detected setup was based on (shown with it)."
    )
    setup_notes: list[str] = Field(
        default_factory=list, description="What the approver should know about detected setup."
    )
    base_check: BaseCheck | None = Field(
        default=None, description="Setup and gates on the unchanged base, run before the first story."
    )
    plan_pr_head: str | None = Field(
        default=None, description="The commit the bot pushed to the plan PR (later ones need a writer)."
    )
    revised_at: datetime | None = Field(
        default=None,
        description="When this revision was posted: approvals written before it count for nothing.",
    )
    note: str | None = Field(default=None, description="A one-line status note shown in the comment.")
    summary_posted: bool = Field(default=False, description="The final summary comment was written.")
    finished_by: str | None = Field(
        default=None, description="The execute job that brought the last run to its end (a redone job stops)."
    )
    children: list[int] = Field(default_factory=list, description="Child issues of an epic (mega plan).")
    child_features: dict[str, int] = Field(
        default_factory=dict,
        description="An epic within one repository: feature id → its child issue (kept across revisions).",
    )
    child_issues: dict[str, str] = Field(
        default_factory=dict,
        description="An epic across repositories: feature id → its child issue `owner/name#number`.",
    )
    epic_problems: list[str] = Field(
        default_factory=list,
        description="Why an epic across repositories cannot open its children (no approval until fixed).",
    )
    scheduled: ScheduledBy | None = Field(
        default=None, description="The schedule that opened the issue (`schedules:`); never an approval."
    )
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def key(self) -> str:
        """`owner/repo#issue`."""
        return f"{self.repo}#{self.issue}"

    def batches_ids(self) -> list[list[str]]:
        """The dependency batches of the current PRD."""
        return compute_batches(self.prd)

    def current_approvals(self) -> list[Approval]:
        """Approvals that bind to the current revision (older ones are stale)."""
        return [a for a in self.approvals if self.binds(a)]

    def binds(self, approval: Approval) -> bool:
        """Whether `approval` is for this revision: the same PRD and the same revision number."""
        return approval.plan_hash == self.plan_hash and approval.revision in (None, self.revision)


# -- transitions --------------------------------------------------------------------
def transition(state: PlanState, to: PlanStatus, *, at: datetime, note: str | None = None) -> PlanState:
    """A copy of `state` in status `to`; StateError when the move is not allowed."""
    if to not in TRANSITIONS[state.status]:
        raise StateError(
            f"a plan that is {state.status.value.replace('_', ' ')} cannot become "
            f"{to.value.replace('_', ' ')}"
        )
    return state.model_copy(update={"status": to, "updated_at": at, "note": note})


def new_plan(
    *,
    repo: str,
    issue: int,
    prd: PRD,
    at: datetime,
    required_approvals: int = 1,
    source: Literal["prd-block", "llm", "plan-pr", "reflection"] = "llm",
) -> PlanState:
    """A fresh plan awaiting approval."""
    return PlanState(
        repo=repo,
        issue=issue,
        prd=prd,
        plan_hash=revision_hash(prd),
        required_approvals=required_approvals,
        stories={s.id: StoryState() for s in prd.stories},
        batches=[BatchState(number=i + 1) for i in range(len(compute_batches(prd)))],
        source=source,
        created_at=at,
        updated_at=at,
        revised_at=at,
    )


def revise(
    state: PlanState,
    prd: PRD,
    *,
    at: datetime,
    changelog: list[str],
    source: Literal["prd-block", "llm", "plan-pr", "reflection"] = "llm",
) -> PlanState:
    """A new revision awaiting approval; every earlier approval becomes stale."""
    if state.status == PlanStatus.RUNNING:
        raise StateError("the plan is running: `/plan-cascade cancel` it before revising")
    if state.status == PlanStatus.COMPLETED:
        raise StateError(
            "the plan is completed: label the issue again or comment `/plan-cascade plan` to start a new one"
        )
    moved = transition(state, PlanStatus.AWAITING_APPROVAL, at=at) if state.status != S.DRAFT else state
    # Approvals name the revision they were given for, so a new revision with the same PRD
    # (a reflection that only retries) does not inherit them.
    stamped = [
        a if a.revision is not None else a.model_copy(update={"revision": state.revision})
        for a in state.approvals
    ]
    kept = {sid: st for sid, st in state.stories.items() if st.status == StoryStatus.PASSED}
    stories = {s.id: kept.get(s.id, StoryState()) for s in prd.stories}
    return moved.model_copy(
        update={
            "prd": prd,
            "plan_hash": revision_hash(prd),
            "revision": state.revision + 1,
            "approvals": stamped,
            "approved_scope": [],
            "stories": stories,
            "batches": [BatchState(number=i + 1) for i in range(len(compute_batches(prd)))],
            "changelog": changelog,
            "source": source,
            "status": PlanStatus.AWAITING_APPROVAL,
            "revised_at": at,
        }
    )


def skip_dependents(state: PlanState, failed_id: str, *, at: datetime) -> PlanState:
    """Mark every story that depends on `failed_id` (directly or not) as skipped."""
    stories = dict(state.stories)
    for sid in sorted(transitive_dependents(state.prd, failed_id)):
        if stories[sid].status in (StoryStatus.PENDING, StoryStatus.RUNNING):
            stories[sid] = stories[sid].model_copy(
                update={"status": StoryStatus.SKIPPED, "reason": f"depends on {failed_id}, which failed"}
            )
    return state.model_copy(update={"stories": stories, "updated_at": at})


def update_story(state: PlanState, story_id: str, **changes: object) -> PlanState:
    """A copy with one story's record changed."""
    stories = dict(state.stories)
    stories[story_id] = stories.get(story_id, StoryState()).model_copy(update=changes)
    return state.model_copy(update={"stories": stories})


def totals(state: PlanState) -> tuple[int, float]:
    """Tokens and cost so far: planning, every story and the acceptance reviews."""
    tokens = state.planning_tokens + state.review_tokens + sum(s.tokens for s in state.stories.values())
    cost = state.planning_cost_usd + state.review_cost_usd + sum(s.cost_usd for s in state.stories.values())
    return tokens, cost


def batch_record(state: PlanState, batch: int) -> BatchState:
    """Batch `batch`'s record, or a fresh one when the state has none yet."""
    return state.batches[batch - 1] if batch - 1 < len(state.batches) else BatchState(number=batch)


def with_batch(state: PlanState, record: BatchState) -> PlanState:
    """A copy with batch `record.number`'s record replaced (earlier missing ones added)."""
    batches = list(state.batches)
    while len(batches) < record.number:
        batches.append(BatchState(number=len(batches) + 1))
    batches[record.number - 1] = record
    return state.model_copy(update={"batches": batches})
