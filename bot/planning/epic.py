"""The epic of a mega plan: features that become child issues (the caller creates them), each in
the repository it names among the candidates it was shown."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from bot.llm import LLM, complete_structured
from bot.plan import PRD, Strategy
from bot.plan.epic import allows, feature_problems
from bot.plan.model import FEATURE_ID_PATTERN, Feature
from bot.planning.meter import UsageMeter
from bot.planning.prompts import epic_prompt, system_prompt

__all__ = [
    "FEATURE_ID_PATTERN",
    "Epic",
    "EpicFeature",
    "RepoCandidate",
    "Targets",
    "plan_epic",
    "validate_epic",
]

EpicFeature = Feature
"""One feature of an epic (the PRD's `features` entries)."""


class Epic(BaseModel):
    """The features of a mega plan, in order."""

    features: list[Feature] = Field(description="The features, in the order they are listed.")


class RepoCandidate(BaseModel):
    """A repository an epic's feature may be planned in, as the planning model is shown it."""

    repo: str = Field(description="owner/name.")
    description: str = Field(default="", description="GitHub's description of the repository.")
    tree: list[str] = Field(default_factory=list, description="Some of its default branch's paths.")


class Targets(BaseModel):
    """Where an epic's features may go: its own repository, the allowed patterns, the candidates shown."""

    own: str = Field(description="The epic's repository.")
    patterns: list[str] = Field(
        default_factory=list, description="`epics.repositories` of the epic's repository."
    )
    candidates: list[RepoCandidate] = Field(
        default_factory=list, description="Shown to the model, own first."
    )

    def allowed(self, repo: str) -> bool:
        """Whether a feature may name `repo`: on the allowed list and among the candidates shown."""
        shown = {c.repo.lower() for c in self.candidates}
        return allows(self.patterns, repo, own=self.own) and (
            repo.lower() == self.own.lower() or repo.lower() in shown
        )


def validate_epic(epic: Epic, prd: PRD, *, targets: Targets | None = None) -> list[str]:
    """Every problem of `epic` for `prd`, one line each; empty means valid."""
    problems: list[str] = [] if epic.features else ["the epic has no features"]
    problems += feature_problems(
        prd.model_copy(update={"features": epic.features, "strategy": Strategy.MEGA})
    )
    own = targets.own if targets is not None else None
    for feature in epic.features:
        repo = feature.repository
        if repo is None or own is None or repo.lower() == own.lower():
            continue
        if targets is not None and not targets.allowed(repo):
            listed = ", ".join(c.repo for c in targets.candidates) or own
            problems.append(
                f"{feature.id} names {repo}, which is not a candidate repository; use one of {listed}"
            )
    if targets is None:  # no candidates were shown: every feature stays in the epic's repository
        problems += [
            f"{f.id} names {f.repository}: this epic has no other candidate repositories; "
            "leave repository out"
            for f in epic.features
            if f.repository is not None
        ]
    return problems


async def plan_epic(
    llm: LLM,
    *,
    prd: PRD,
    context: str,
    meter: UsageMeter | None = None,
    targets: Targets | None = None,
) -> Epic:
    """Ask `llm` for the Epic of a mega `prd` (one structured call, one repair)."""
    candidates: Sequence[RepoCandidate] = targets.candidates if targets is not None else ()
    result = await complete_structured(
        llm,
        system=system_prompt(),
        prompt=epic_prompt(
            context=context,
            prd=prd,
            own=targets.own if targets is not None else None,
            repositories=[c.model_dump() for c in candidates],
        ),
        model_cls=Epic,
        schema_name="epic",
        validate=lambda epic: validate_epic(epic, prd, targets=targets),
        cache_prefix=True,
    )
    if meter is not None:
        meter.record(result)
    return result.value
