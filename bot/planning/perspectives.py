"""Several viewpoints before one plan: perspective analyses and cross-checked proposals.

Multi-perspective planning asks one model for a strategic, a code and an operations
analysis in parallel. Cross-checked planning asks several models for a PRD each, in
parallel; a synthesis then lists where they agree and disagree and writes the plan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TypeVar

from pydantic import BaseModel, Field

from bot.errors import LLMError
from bot.llm import LLM, Message, complete_structured
from bot.plan import PRD, validate_prd
from bot.planning.meter import UsageMeter
from bot.planning.prompts import PERSPECTIVE_NAMES, perspective_prompt, planner_user_prompt, system_prompt
from bot.planning.strategy import StrategyHint

T = TypeVar("T")

PERSPECTIVE_TITLES = {
    "strategic": "Strategic perspective",
    "code": "Code perspective",
    "operations": "Operations perspective",
}
PERSPECTIVE_MAX_TOKENS = 2048


class Synthesis(BaseModel):
    """The final plan made from several proposals, with what they agreed and disagreed on."""

    agreements: list[str] = Field(default_factory=list, description="Points all proposals share.")
    disagreements: list[str] = Field(
        default_factory=list, description="Points where they differ, and the choice made."
    )
    prd: PRD = Field(description="The final plan.")


async def gather_all(jobs: Sequence[Awaitable[T]]) -> list[T]:
    """Run `jobs` concurrently and wait for all of them; their LLM failures become one LLMError."""
    results = await asyncio.gather(*jobs, return_exceptions=True)
    failures: list[str] = []
    values: list[T] = []
    for result in results:
        if isinstance(result, LLMError):
            failures.append(result.message)
        elif isinstance(result, BaseException):
            raise result
        else:
            values.append(result)
    if failures:
        count = f"{len(failures)} of {len(results)} parallel calls failed"
        raise LLMError(f"{count}:\n" + "\n".join(failures))
    return values


async def _analyse(llm: LLM, name: str, *, context: str, hint: StrategyHint, meter: UsageMeter) -> str:
    completion = await llm.complete(
        system=system_prompt(),
        messages=[Message(role="user", content=perspective_prompt(name, context=context, hint=hint))],
        max_tokens=PERSPECTIVE_MAX_TOKENS,
        cache_prefix=True,
    )
    meter.add(completion)
    if not completion.text.strip():
        raise LLMError(f"{llm.provider} {llm.model} gave an empty {name} analysis")
    return completion.text.strip()


async def gather_perspectives(
    llm: LLM, *, context: str, hint: StrategyHint, meter: UsageMeter
) -> dict[str, str]:
    """Title -> Markdown analysis for each perspective, asked in parallel."""
    texts = await gather_all(
        [_analyse(llm, name, context=context, hint=hint, meter=meter) for name in PERSPECTIVE_NAMES],
    )
    return {PERSPECTIVE_TITLES[name]: text for name, text in zip(PERSPECTIVE_NAMES, texts, strict=True)}


def model_label(llm: LLM) -> str:
    """How a model is named in prompts and reports: provider/model."""
    return f"{llm.provider}/{llm.model}"


async def _propose(llm: LLM, *, prompt: str, max_stories: int, meter: UsageMeter) -> tuple[str, PRD]:
    result = await complete_structured(
        llm,
        system=system_prompt(),
        prompt=prompt,
        model_cls=PRD,
        schema_name="prd",
        validate=lambda prd: validate_prd(prd, max_stories=max_stories),
        cache_prefix=True,
    )
    meter.record(result)
    return model_label(llm), result.value


async def propose_plans(
    llms: Sequence[LLM],
    *,
    context: str,
    hint: StrategyHint,
    max_stories: int,
    perspectives: dict[str, str],
    meter: UsageMeter,
) -> list[tuple[str, PRD]]:
    """(model label, PRD) proposed by each model, asked in parallel."""
    prompt = planner_user_prompt(
        context=context, hint=hint, max_stories=max_stories, perspectives=perspectives
    )
    return await gather_all(
        [_propose(llm, prompt=prompt, max_stories=max_stories, meter=meter) for llm in llms],
    )


def _item(point: str) -> str:
    return "- " + " ".join(point.split())


CROSS_CHECK_CHARS = 6000
"""The cross-check is shown in the plan comment (and kept in its state): at most this long."""


def cross_check_markdown(synthesis: Synthesis, proposals: Sequence[tuple[str, PRD]]) -> str:
    """The agreements and disagreements of a cross-checked plan, as Markdown."""
    lines = [
        "Proposals by "
        + ", ".join(f"{label} ({len(prd.stories)} stories)" for label, prd in proposals)
        + ".",
        "",
        "**Agreements**",
        *([_item(point) for point in synthesis.agreements] or ["- (none listed)"]),
        "",
        "**Disagreements**",
        *([_item(point) for point in synthesis.disagreements] or ["- (none listed)"]),
        "",
        f"**The synthesis** kept {len(synthesis.prd.stories)} stories: "
        + ", ".join(f"{s.id} {s.title}" for s in synthesis.prd.stories)
        + ".",
    ]
    text = "\n".join(lines)
    return text if len(text) <= CROSS_CHECK_CHARS else text[: CROSS_CHECK_CHARS - 1] + "…"
