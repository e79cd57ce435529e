"""A rough forecast of what executing a plan costs in tokens, dollars and minutes.

The heuristic, in full (numbers are deliberately round - this is a forecast shown to
people deciding whether to approve, not a budget):

* **Tokens per story attempt** = base tokens of the story's type (a feature reads and
  writes more code than a docs change, see ``BASE_TOKENS``) x the plan's complexity
  factor (``COMPLEXITY_FACTOR``) + ``TOKENS_PER_CRITERION`` for each acceptance
  criterion (each one is something the agent must check).
* **Retry allowance**: a story fails its gates with probability ``FAILURE_RATE[risk]``
  per attempt, so the expected number of extra attempts with at most ``max_retries``
  retries is ``p + p² + … + p^max_retries``; every story is scaled by ``1 +`` that.
* **Cost**: ``INPUT_SHARE`` of the tokens are input (agents mostly re-read context),
  the rest output. The agent resends its growing conversation each step with a cache
  breakpoint on the newest message, so ``CACHED_INPUT_SHARE`` of the input is read from the
  prompt cache at the cache price (when the model has one), the rest at the input price.
* **Minutes**: one attempt takes ``MINUTES_PER_ATTEMPT[complexity]`` plus a minute per
  criterion; inside a batch at most ``max_parallel`` stories run at once, so the batch
  takes the longest worker's share (longest stories first), plus ``BATCH_OVERHEAD_MINUTES``
  for integration gates and publishing. Batches run one after another.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from bot.plan import PRD, Level, StoryType, compute_batches

BASE_TOKENS: dict[StoryType, int] = {
    StoryType.FEATURE: 120_000,
    StoryType.BUGFIX: 80_000,
    StoryType.REFACTOR: 100_000,
    StoryType.TEST: 60_000,
    StoryType.DOCS: 30_000,
    StoryType.INFRA: 70_000,
}
"""Tokens one attempt of a story of medium complexity uses, by story type."""
COMPLEXITY_FACTOR: dict[Level, float] = {Level.LOW: 0.6, Level.MEDIUM: 1.0, Level.HIGH: 1.8}
"""Multiplier of the base tokens by the plan's complexity."""
TOKENS_PER_CRITERION = 10_000
"""Extra tokens per acceptance criterion."""
FAILURE_RATE: dict[Level, float] = {Level.LOW: 0.15, Level.MEDIUM: 0.25, Level.HIGH: 0.4}
"""Chance that one attempt fails its gates, by the plan's risk."""
INPUT_SHARE = 0.85
"""Share of the tokens that are input tokens."""
CACHED_INPUT_SHARE = 0.8
"""Share of the input read from the prompt cache (bench/tokens.py measures what the agent reaches)."""
MINUTES_PER_ATTEMPT: dict[Level, int] = {Level.LOW: 5, Level.MEDIUM: 10, Level.HIGH: 18}
"""Wall-clock minutes of one attempt, by the plan's complexity (plus a minute per criterion)."""
BATCH_OVERHEAD_MINUTES = 3
"""Integration gates and publishing of one batch."""


class ExecutionEstimate(BaseModel):
    """A forecast of executing a whole plan."""

    model_config = ConfigDict(frozen=True)

    tokens: int = Field(description="Tokens all stories are expected to use, retries included.")
    cost_usd: float = Field(description="Expected cost in US dollars.")
    minutes: int = Field(description="Expected wall-clock minutes from start to the last batch.")


def _expected_retries(failure_rate: float, max_retries: int) -> float:
    return sum(failure_rate**k for k in range(1, max_retries + 1))


def _makespan(durations: list[float], workers: int) -> float:
    """Longest worker's total when the longest jobs are handed out first."""
    loads = [0.0] * max(1, workers)
    for duration in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += duration
    return max(loads)


def estimate_execution(
    prd: PRD,
    *,
    price_in_per_mtok: float,
    price_out_per_mtok: float,
    max_parallel: int,
    max_retries: int,
    price_cache_read_per_mtok: float | None = None,
) -> ExecutionEstimate:
    """Forecast tokens, dollars and minutes for `prd` with the heuristic in this module's docstring."""
    attempts = 1 + _expected_retries(FAILURE_RATE[prd.risk], max(0, max_retries))
    factor = COMPLEXITY_FACTOR[prd.complexity]
    total_tokens = 0.0
    minutes_of: dict[str, float] = {}
    for story in prd.stories:
        criteria = len(story.acceptance_criteria)
        per_attempt = BASE_TOKENS[story.type] * factor + TOKENS_PER_CRITERION * criteria
        total_tokens += per_attempt * attempts
        minutes_of[story.id] = (MINUTES_PER_ATTEMPT[prd.complexity] + criteria) * attempts
    cached = CACHED_INPUT_SHARE if price_cache_read_per_mtok is not None else 0.0
    input_tokens = total_tokens * INPUT_SHARE
    cost = (
        input_tokens * (1 - cached) * price_in_per_mtok
        + input_tokens * cached * (price_cache_read_per_mtok or 0.0)
        + total_tokens * (1 - INPUT_SHARE) * price_out_per_mtok
    ) / 1_000_000
    minutes = sum(
        _makespan([minutes_of[sid] for sid in batch], max_parallel) + BATCH_OVERHEAD_MINUTES
        for batch in compute_batches(prd)
    )
    return ExecutionEstimate(tokens=round(total_tokens), cost_usd=round(cost, 4), minutes=math.ceil(minutes))
