"""The epic of a mega plan: features that become child issues (the caller creates them)."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from bot.llm import LLM, complete_structured
from bot.plan import PRD, Story, dependency_problems
from bot.planning.meter import UsageMeter
from bot.planning.prompts import epic_prompt, system_prompt

FEATURE_ID_PATTERN = r"^FEAT-\d{3}$"
_FEATURE_ID = re.compile(FEATURE_ID_PATTERN)


class EpicFeature(BaseModel):
    """One feature of an epic: one child issue, planned on its own."""

    id: str = Field(
        description="Feature id such as FEAT-001.", json_schema_extra={"pattern": FEATURE_ID_PATTERN}
    )
    title: str = Field(description="Short imperative title of the child issue.")
    description: str = Field(default="", description="What the feature delivers and what it leaves out.")
    depends_on: list[str] = Field(default_factory=list, description="Ids of features to finish first.")
    stories: list[str] = Field(default_factory=list, description="Ids of the plan's stories it covers.")


class Epic(BaseModel):
    """The features of a mega plan, in order."""

    features: list[EpicFeature] = Field(description="The features, in the order they are listed.")


def validate_epic(epic: Epic, prd: PRD) -> list[str]:
    """Every problem of `epic` for `prd`, one line each; empty means valid."""
    problems: list[str] = []
    if not epic.features:
        problems.append("the epic has no features")
    known = {story.id for story in prd.stories}
    for index, feature in enumerate(epic.features):
        if not _FEATURE_ID.match(feature.id):
            problems.append(f'features[{index}].id: "{feature.id}" does not match {FEATURE_ID_PATTERN}')
        if not feature.title.strip():
            problems.append(f"{feature.id} has an empty title")
        unknown = [story_id for story_id in feature.stories if story_id not in known]
        problems.extend(f"{feature.id} covers unknown story {story_id}" for story_id in unknown)
    # The story graph checks duplicates, unknown dependencies and cycles; features have the same shape.
    as_stories = [Story(id=f.id, title=f.title, depends_on=f.depends_on) for f in epic.features]
    problems.extend(line.replace("story", "feature") for line in dependency_problems(as_stories))
    return problems


async def plan_epic(llm: LLM, *, prd: PRD, context: str, meter: UsageMeter | None = None) -> Epic:
    """Ask `llm` for the Epic of a mega `prd` (one structured call, one repair)."""
    result = await complete_structured(
        llm,
        system=system_prompt(),
        prompt=epic_prompt(context=context, prd=prd),
        model_cls=Epic,
        schema_name="epic",
        validate=lambda epic: validate_epic(epic, prd),
        cache_prefix=True,
    )
    if meter is not None:
        meter.record(result)
    return result.value
