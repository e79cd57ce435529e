"""Price lookup by prefix and cost arithmetic."""

from __future__ import annotations

import pytest

from bot.llm import Price, PriceTable, Usage


@pytest.mark.parametrize(
    ("model", "input_price", "output_price"),
    [
        ("claude-sonnet-4-5-20250929", 3.0, 15.0),
        ("claude-sonnet-4-6", 3.0, 15.0),
        ("claude-opus-4-1-20250805", 15.0, 75.0),
        ("claude-opus-4-20250514", 15.0, 75.0),
        ("claude-opus-4-5", 5.0, 25.0),
        ("claude-haiku-4-5-20251001", 1.0, 5.0),
        ("gpt-4o-2024-08-06", 2.5, 10.0),
        ("gpt-4o-mini", 0.15, 0.60),
        ("gpt-4.1", 2.0, 8.0),
        ("gpt-4.1-mini-2025-04-14", 0.40, 1.60),
        ("o3", 2.0, 8.0),
        ("o4-mini", 1.10, 4.40),
        ("gpt-5", 1.25, 10.0),
        ("gpt-5-mini", 0.25, 2.0),
        ("deepseek-chat", 0.28, 0.42),
        ("deepseek-reasoner", 0.28, 0.42),
        ("openai/gpt-4o", 2.5, 10.0),
    ],
)
def test_longest_prefix_wins(model: str, input_price: float, output_price: float) -> None:
    price = PriceTable().price(model)

    assert price is not None
    assert (price.input_per_mtok, price.output_per_mtok) == (input_price, output_price)


def test_cost_counts_every_kind_of_token() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_read_tokens=1_000_000,
        cache_write_tokens=1_000_000,
    )

    # haiku 4.5: 1 in, 5 out, 0.1 cache read, 1.25 cache write
    assert PriceTable().cost("claude-haiku-4-5", usage) == pytest.approx(7.35)


def test_missing_cache_prices_fall_back_to_input_price() -> None:
    price = Price(input_per_mtok=2.0, output_per_mtok=4.0)

    assert price.cost(Usage(cache_read_tokens=500_000, cache_write_tokens=500_000)) == pytest.approx(2.0)


def test_unknown_models_cost_nothing_and_are_flagged() -> None:
    table = PriceTable()

    assert table.cost("mystery-model", Usage(input_tokens=10**6)) == 0.0
    assert not table.is_known("mystery-model")
    assert table.is_known("gpt-4o")


def test_local_providers_are_free() -> None:
    table = PriceTable()

    assert table.cost("llama3.1", Usage(input_tokens=10**6), provider="ollama") == 0.0
    assert table.is_known("llama3.1", provider="ollama")
    assert table.cost("gpt-4o", Usage(input_tokens=10**6), provider="ollama") == 0.0


def test_overrides_return_a_new_table() -> None:
    base = PriceTable()
    custom = base.with_overrides(
        {
            "gpt-4o": Price(input_per_mtok=1.0, output_per_mtok=1.0),
            "my-model": Price(input_per_mtok=9.0, output_per_mtok=9.0),
        }
    )

    assert custom.cost("gpt-4o-2024-08-06", Usage(input_tokens=10**6)) == pytest.approx(1.0)
    assert custom.cost("gpt-4o-mini", Usage(input_tokens=10**6)) == pytest.approx(0.15)
    assert custom.is_known("my-model")
    assert not base.is_known("my-model")
    assert base.cost("gpt-4o", Usage(input_tokens=10**6)) == pytest.approx(2.5)


def test_usage_adds_up() -> None:
    total = Usage(input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4) + Usage(
        input_tokens=10, output_tokens=20, cache_read_tokens=30, cache_write_tokens=40
    )

    assert total == Usage(input_tokens=11, output_tokens=22, cache_read_tokens=33, cache_write_tokens=44)
    assert total.total_input_tokens == 11 + 33 + 44
