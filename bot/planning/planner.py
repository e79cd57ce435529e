"""Turn an issue into a validated PRD: the orchestration over an injected `LLM`.

Flow: strategy hint -> optional perspective analyses (three parallel calls) ->
the plan (one structured call; or, with two or more planning models, one proposal
each and a synthesis) -> quality checks and review -> the epic of a mega plan.
No GitHub calls and no files: the caller passes the issue and repository data and
posts the result. Every structured call gets one repair round; a failure raises
`LLMError` whose message says which step failed (the caller comments it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from bot.errors import LLMError
from bot.llm import LLM, Usage, complete_structured
from bot.plan import PRD, Strategy, validate_prd
from bot.planning.context import IssueContext, RepoContext, build_context
from bot.planning.epic import Epic, Targets, plan_epic
from bot.planning.meter import UsageMeter
from bot.planning.perspectives import (
    Synthesis,
    cross_check_markdown,
    gather_perspectives,
    propose_plans,
)
from bot.planning.prompts import planner_user_prompt, synthesis_prompt, system_prompt
from bot.planning.quality import (
    apply_fixes,
    describe_fix,
    llm_quality_review,
    missing_files,
    quality_warnings,
)
from bot.planning.strategy import StrategyHint, analyse_strategy

T = TypeVar("T")

MultiPerspective = Literal["auto", "always", "never"]


class PlanningResult(BaseModel):
    """The validated plan and everything learnt and spent while making it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    prd: PRD = Field(description="The final, validated plan.")
    hint: StrategyHint = Field(description="The heuristic strategy hint given to the model.")
    perspectives: dict[str, str] = Field(
        default_factory=dict, description="Perspective title -> Markdown analysis (empty if none)."
    )
    cross_check: str | None = Field(
        default=None, description="Markdown agreements/disagreements of cross-checked planning."
    )
    warnings: list[str] = Field(default_factory=list, description="Quality findings for the maintainer.")
    usage: Usage = Field(default_factory=Usage, description="Tokens of every call, summed.")
    cost_usd: float = Field(default=0.0, description="Cost of every call in US dollars, summed.")
    calls: int = Field(default=0, description="Number of model calls made, repairs included.")
    epic: Epic | None = Field(default=None, description="Features of a mega plan, for child issues.")
    looked_at: str | None = Field(
        default=None, description="What exploration before planning read and found (Markdown)."
    )


async def _step(stage: str, job: Awaitable[T]) -> T:
    """Await `job`, naming `stage` in any LLMError."""
    try:
        return await job
    except LLMError as exc:
        raise LLMError(f"Planning failed while {stage}: {exc.message}") from exc


async def _review(
    llm: LLM, prd: PRD, *, context: str, max_stories: int, meter: UsageMeter
) -> tuple[PRD, list[str]]:
    """The PRD with the review's minor fixes applied, and the review's warnings."""
    try:
        review = await llm_quality_review(llm, prd, context, meter=meter)
    except LLMError as exc:
        return prd, [f"quality review skipped: {exc.message}"]
    warnings = list(review.warnings)
    if review.verdict == "minor_issues":
        prd, dropped = apply_fixes(prd, review.fixes, max_stories=max_stories)
        warnings += dropped
    elif review.verdict == "major_issues":
        warnings.insert(0, "the quality review found major issues: read the plan closely before approving")
        warnings += [describe_fix(fix) for fix in review.fixes]
    return prd, warnings


async def plan_issue(
    *,
    llm: LLM,
    issue: IssueContext,
    repo: RepoContext,
    max_stories: int,
    multi_perspective: MultiPerspective = "auto",
    planning_llms: Sequence[LLM] = (),
    quality_review: bool = True,
    context_tokens: int = 12000,
    explored: str = "",
    epic_targets: Callable[[], Awaitable[Targets | None]] | None = None,
) -> PlanningResult:
    """Plan `issue` with `llm` (and `planning_llms` for cross-checking when there are two or more).

    `epic_targets`: reads the repositories an epic's features may be planned in, called only when
    the plan is an epic (None, or None read: its own repository only)."""
    if max_stories < 1:
        raise ValueError(f"max_stories must be at least 1, got {max_stories}")
    hint = analyse_strategy(issue, repo)
    context = build_context(issue, repo, token_budget=context_tokens)
    if explored:  # what exploring the code found (bot.planning.exploration.planner_notes)
        context = f"{context}\n\n{explored}"
    meter = UsageMeter()
    warnings: list[str] = []

    def valid(prd: PRD) -> list[str]:
        return validate_prd(prd, max_stories=max_stories)

    perspectives: dict[str, str] = {}
    if multi_perspective == "always" or (multi_perspective == "auto" and hint.multi_perspective):
        perspectives = await _step(
            "analysing the issue from several perspectives",
            gather_perspectives(llm, context=context, hint=hint, meter=meter),
        )

    cross_check: str | None = None
    if len(planning_llms) >= 2:
        proposals = await _step(
            "collecting the cross-checked proposals",
            propose_plans(
                planning_llms,
                context=context,
                hint=hint,
                max_stories=max_stories,
                perspectives=perspectives,
                meter=meter,
            ),
        )
        prompt = synthesis_prompt(
            context=context,
            hint=hint,
            max_stories=max_stories,
            perspectives=perspectives,
            proposals=proposals,
        )
        synthesis = await _step(
            "synthesising the proposals",
            complete_structured(
                llm,
                system=system_prompt(),
                prompt=prompt,
                model_cls=Synthesis,
                schema_name="synthesis",
                validate=lambda s: valid(s.prd),
                cache_prefix=True,
            ),
        )
        meter.record(synthesis)
        prd = synthesis.value.prd
        cross_check = cross_check_markdown(synthesis.value, proposals)
    else:
        if planning_llms:
            warnings.append("cross-checked planning needs two or more planning models; planned with one")
        if perspectives:
            prompt = synthesis_prompt(
                context=context, hint=hint, max_stories=max_stories, perspectives=perspectives
            )
        else:
            prompt = planner_user_prompt(context=context, hint=hint, max_stories=max_stories)
        planned = await _step(
            "writing the plan",
            complete_structured(
                llm,
                system=system_prompt(),
                prompt=prompt,
                model_cls=PRD,
                schema_name="prd",
                validate=valid,
                cache_prefix=True,
            ),
        )
        meter.record(planned)
        prd = planned.value

    if quality_review:
        prd, review_warnings = await _review(llm, prd, context=context, max_stories=max_stories, meter=meter)
        warnings += review_warnings
    warnings += quality_warnings(prd) + missing_files(prd, repo.file_tree)

    epic: Epic | None = None
    if prd.strategy is Strategy.MEGA:
        targets = await epic_targets() if epic_targets is not None else None
        epic = await _step(
            "splitting the epic into features",
            plan_epic(llm, prd=prd, context=context, meter=meter, targets=targets),
        )
        prd = prd.model_copy(update={"features": epic.features})

    return PlanningResult(
        prd=prd,
        hint=hint,
        perspectives=perspectives,
        cross_check=cross_check,
        warnings=warnings,
        usage=meter.usage,
        cost_usd=meter.cost_usd,
        calls=meter.calls,
        epic=epic,
    )
