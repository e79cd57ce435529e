"""Quality checks beyond `validate_prd`: deterministic warnings and an LLM review.

Nothing here rejects a plan. `quality_warnings` flags shapes that usually go wrong;
`llm_quality_review` asks the model; `apply_fixes` applies its small fixes, each
re-validated, and drops (with a warning) any fix that would break the plan.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from bot.llm import LLM, complete_structured
from bot.plan import PRD, Level, compute_batches, transitive_dependents, validate_prd
from bot.planning.meter import UsageMeter
from bot.planning.prompts import quality_review_prompt, system_prompt

MAX_CRITERIA = 8
MAX_STORIES_LOW_COMPLEXITY = 12

FixField = Literal["title", "description", "acceptance_criteria"]


def missing_files(prd: PRD, tree: list[str]) -> list[str]:
    """Warnings for `files` hints that name nothing in the repository and that no story creates.

    A path counts as created by a story whose title, description or criteria name it (or its
    file name), and as there for every story that depends (directly or not) on a story that
    lists it. A directory hint matches when files exist under it. Empty `tree` (not read): none.
    """
    if not tree:
        return []
    present = set(tree)
    dirs = {path.rsplit("/", 1)[0] for path in tree if "/" in path}
    dirs |= {d.rsplit("/", i)[0] for d in list(dirs) for i in range(1, d.count("/") + 1)}

    def exists(path: str) -> bool:
        clean = path.strip().strip("/")
        return clean in present or clean in dirs

    warnings: list[str] = []
    for story in prd.stories:
        text = " ".join([story.title, story.description, *story.acceptance_criteria])
        earlier = {
            path
            for other in prd.stories
            if story.id in transitive_dependents(prd, other.id)
            for path in other.files
        }
        for path in dict.fromkeys(story.files):
            named = path in text or path.rsplit("/", 1)[-1] in text
            if exists(path) or named or path in earlier:
                continue
            warnings.append(
                f"{story.id} lists `{path}` in files, but it is not in the repository and no story "
                "says it creates it: check the path, or say in the story that it creates the file"
            )
    return warnings


class StoryFix(BaseModel):
    """One replacement the reviewer proposes for one field of one story."""

    story_id: str = Field(description="Id of the story to change, e.g. STORY-002.")
    field: FixField = Field(description="Field to replace: title, description or acceptance_criteria.")
    new_value: str | list[str] = Field(
        description="New value: a string, or the complete list of criteria for acceptance_criteria."
    )


class QualityReview(BaseModel):
    """The model's judgement of a plan."""

    verdict: Literal["good", "minor_issues", "major_issues"] = Field(
        description="good: no change; minor_issues: apply the fixes; major_issues: a human should rework."
    )
    fixes: list[StoryFix] = Field(default_factory=list, description="Concrete field replacements.")
    warnings: list[str] = Field(default_factory=list, description="Findings for the maintainer, one each.")


def quality_warnings(prd: PRD) -> list[str]:
    """Warnings about a valid PRD's shape: big stories, empty descriptions, parallel file conflicts."""
    warnings: list[str] = []
    for story in prd.stories:
        if len(story.acceptance_criteria) > MAX_CRITERIA:
            warnings.append(
                f"{story.id} has {len(story.acceptance_criteria)} acceptance criteria "
                f"(more than {MAX_CRITERIA}): consider splitting it"
            )
        if not story.description.strip():
            warnings.append(f"{story.id} has no description: say what to do and why")
    for number, batch in enumerate(compute_batches(prd), start=1):
        owners: dict[str, list[str]] = {}
        for story_id in batch:
            for path in dict.fromkeys(prd.story(story_id).files):
                owners.setdefault(path, []).append(story_id)
        for path, ids in owners.items():
            if len(ids) > 1:
                warnings.append(
                    f"{', '.join(ids)} run in parallel (batch {number}) but all change {path}: "
                    "expect merge conflicts, or add a dependency"
                )
    if prd.complexity is Level.LOW and len(prd.stories) > MAX_STORIES_LOW_COMPLEXITY:
        warnings.append(
            f"{len(prd.stories)} stories for a low-complexity issue "
            f"(more than {MAX_STORIES_LOW_COMPLEXITY}): the plan may be too fine-grained"
        )
    return warnings


def _fixed(prd: PRD, fix: StoryFix) -> PRD | str:
    """`prd` with `fix` applied, or why it cannot be."""
    try:
        story = prd.story(fix.story_id)
    except KeyError:
        return f"there is no story {fix.story_id}"
    value = fix.new_value
    if fix.field == "acceptance_criteria":
        if isinstance(value, str):
            return "acceptance_criteria needs a list of criteria"
    elif not isinstance(value, str):
        return f"{fix.field} needs a string"
    changed = story.model_copy(update={fix.field: value})
    return prd.model_copy(update={"stories": [changed if s.id == story.id else s for s in prd.stories]})


def apply_fixes(prd: PRD, fixes: list[StoryFix], *, max_stories: int) -> tuple[PRD, list[str]]:
    """Apply `fixes` in order; each must keep the PRD valid. Returns the PRD and a warning per dropped fix."""
    warnings: list[str] = []
    for fix in fixes:
        result = _fixed(prd, fix)
        problems = [result] if isinstance(result, str) else validate_prd(result, max_stories=max_stories)
        if problems:
            warnings.append(f"review fix to {fix.story_id} {fix.field} dropped: {'; '.join(problems)}")
        elif isinstance(result, PRD):
            prd = result
    return prd, warnings


def describe_fix(fix: StoryFix) -> str:
    """A one-line warning for a fix that was not applied automatically."""
    value = fix.new_value if isinstance(fix.new_value, str) else "; ".join(fix.new_value)
    flat = " ".join(value.split())
    return f"review suggests {fix.story_id} {fix.field}: {flat[:200]}"


async def llm_quality_review(
    llm: LLM, prd: PRD, context: str, *, meter: UsageMeter | None = None
) -> QualityReview:
    """Ask `llm` to review `prd` against the issue `context` (one structured call, one repair)."""
    result = await complete_structured(
        llm,
        system=system_prompt(),
        prompt=quality_review_prompt(context=context, prd=prd, warnings=quality_warnings(prd)),
        model_cls=QualityReview,
        schema_name="quality_review",
        cache_prefix=True,
    )
    if meter is not None:
        meter.record(result)
    return result.value
