from __future__ import annotations

import pytest

from bot.plan import Level, Story, StoryType
from bot.rendering import estimate_execution
from tests.rendering.samples import sample_prd

PRICES = {"price_in_per_mtok": 3.0, "price_out_per_mtok": 15.0}


def test_estimate_of_the_sample_plan() -> None:
    # 4 stories, medium complexity, low risk (15 % failure): attempts = 1 + 0.15 + 0.0225.
    # tokens: 3 features (120k + 10k/criterion) and one docs story (30k + 10k).
    estimate = estimate_execution(sample_prd(), **PRICES, max_parallel=3, max_retries=2)
    attempts = 1.1725
    expected_tokens = (140_000 + 130_000 + 140_000 + 40_000) * attempts
    assert estimate.tokens == round(expected_tokens)
    cost = expected_tokens * (0.85 * 3.0 + 0.15 * 15.0) / 1_000_000
    assert estimate.cost_usd == pytest.approx(cost, abs=1e-4)
    # three batches: (12, 11) in parallel -> 12; 12; 11 minutes per attempt; +3 per batch.
    assert estimate.minutes == 51  # ceil((12 + 12 + 11) * 1.1725 + 9) = ceil(50.04)


def test_parallelism_and_retries_change_the_estimate() -> None:
    prd = sample_prd().model_copy(
        update={
            "stories": [
                Story(id=f"STORY-{i:03d}", title="t", acceptance_criteria=["c"], type=StoryType.TEST)
                for i in range(1, 7)
            ],
            "risk": Level.HIGH,
        }
    )
    serial = estimate_execution(prd, **PRICES, max_parallel=1, max_retries=0)
    parallel = estimate_execution(prd, **PRICES, max_parallel=3, max_retries=0)
    retried = estimate_execution(prd, **PRICES, max_parallel=3, max_retries=3)
    assert serial.tokens == parallel.tokens == 6 * 70_000
    assert serial.minutes == 6 * 11 + 3 and parallel.minutes == 2 * 11 + 3
    assert retried.tokens == round(6 * 70_000 * (1 + 0.4 + 0.16 + 0.064))
    assert retried.cost_usd > parallel.cost_usd


def test_free_models_cost_nothing() -> None:
    estimate = estimate_execution(
        sample_prd(), price_in_per_mtok=0, price_out_per_mtok=0, max_parallel=2, max_retries=1
    )
    assert estimate.cost_usd == 0 and estimate.tokens > 0


def test_the_cached_share_of_the_input_is_priced_at_the_cache_rate() -> None:
    plain = estimate_execution(sample_prd(), **PRICES, max_parallel=2, max_retries=1)
    cached = estimate_execution(
        sample_prd(), **PRICES, max_parallel=2, max_retries=1, price_cache_read_per_mtok=0.3
    )
    assert cached.tokens == plain.tokens
    input_cost = plain.tokens * 0.85 * PRICES["price_in_per_mtok"] / 1_000_000
    saved = input_cost * 0.8 * (1 - 0.3 / PRICES["price_in_per_mtok"])
    assert cached.cost_usd == pytest.approx(plain.cost_usd - saved, abs=1e-4)
