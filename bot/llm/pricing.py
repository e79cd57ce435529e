"""Token prices and the cost of a call.

Prices are US dollars per million tokens. Models are matched by the longest
prefix, so dated snapshots (`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`)
find their family. Unknown models cost 0.0; `is_known` tells the caller so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from bot.llm.base import Usage

#: Providers that run on the operator's own hardware: every model is free.
LOCAL_PROVIDERS = frozenset({"ollama"})


class Price(BaseModel):
    """What one model costs, in US dollars per million tokens."""

    input_per_mtok: float = Field(description="Uncached input tokens.")
    output_per_mtok: float = Field(description="Output tokens.")
    cache_read_per_mtok: float | None = Field(default=None, description="Cache hits; None = input price.")
    cache_write_per_mtok: float | None = Field(default=None, description="Cache writes; None = input price.")

    def cost(self, usage: Usage) -> float:
        """Dollars for `usage` at this price."""
        read = self.input_per_mtok if self.cache_read_per_mtok is None else self.cache_read_per_mtok
        write = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        total = (
            usage.input_tokens * self.input_per_mtok
            + usage.output_tokens * self.output_per_mtok
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
        )
        return total / 1_000_000


def _anthropic(inp: float, out: float) -> Price:
    # Anthropic: 5-minute cache writes cost 1.25x input, cache reads 0.1x input.
    return Price(
        input_per_mtok=inp,
        output_per_mtok=out,
        cache_read_per_mtok=round(inp * 0.1, 6),
        cache_write_per_mtok=round(inp * 1.25, 6),
    )


def _openai(inp: float, out: float, cached: float) -> Price:
    # OpenAI caches automatically: writes are free (billed as input), reads are discounted.
    return Price(input_per_mtok=inp, output_per_mtok=out, cache_read_per_mtok=cached)


DEFAULT_PRICES: dict[str, Price] = {
    # Anthropic
    # Opus 4 and 4.1 cost 15/75; from Opus 4.5 on, Opus 4.x costs 5/25.
    "claude-opus-4-0": _anthropic(15.0, 75.0),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4-2025": _anthropic(15.0, 75.0),
    "claude-opus-4": _anthropic(5.0, 25.0),
    "claude-sonnet-5": _anthropic(2.0, 10.0),  # Sonnet 5 and 5.5
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-haiku-4": _anthropic(1.0, 5.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-3-5-haiku": _anthropic(0.8, 4.0),
    # OpenAI
    "gpt-4o-mini": _openai(0.15, 0.60, 0.075),
    "gpt-4o": _openai(2.50, 10.0, 1.25),
    "gpt-4.1-nano": _openai(0.10, 0.40, 0.025),
    "gpt-4.1-mini": _openai(0.40, 1.60, 0.10),
    "gpt-4.1": _openai(2.0, 8.0, 0.50),
    "gpt-5-nano": _openai(0.05, 0.40, 0.005),
    "gpt-5-mini": _openai(0.25, 2.0, 0.025),
    "gpt-5": _openai(1.25, 10.0, 0.125),
    "o3-mini": _openai(1.10, 4.40, 0.55),
    "o3": _openai(2.0, 8.0, 0.50),
    "o4-mini": _openai(1.10, 4.40, 0.275),
    # DeepSeek (cache hits are billed at the cache rate, misses at the input rate)
    "deepseek-chat": Price(input_per_mtok=0.28, output_per_mtok=0.42, cache_read_per_mtok=0.028),
    "deepseek-reasoner": Price(input_per_mtok=0.28, output_per_mtok=0.42, cache_read_per_mtok=0.028),
}


class PriceTable:
    """Prices by model-name prefix; the longest matching prefix wins."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self._prices: dict[str, Price] = dict(DEFAULT_PRICES if prices is None else prices)

    def with_overrides(self, overrides: Mapping[str, Price]) -> PriceTable:
        """A new table with `overrides` added or replacing entries (self is unchanged)."""
        return PriceTable({**self._prices, **overrides})

    def price(self, model: str) -> Price | None:
        """The price of `model`, or None when no prefix matches."""
        name = model.rsplit("/", 1)[-1].lower()  # "openai/gpt-4o" -> "gpt-4o"
        best: str | None = None
        for prefix in self._prices:
            if name.startswith(prefix.lower()) and (best is None or len(prefix) > len(best)):
                best = prefix
        return None if best is None else self._prices[best]

    def is_known(self, model: str, *, provider: str | None = None) -> bool:
        """Whether `cost` knows what `model` costs (local providers are always known)."""
        return provider in LOCAL_PROVIDERS or self.price(model) is not None

    def cost(self, model: str, usage: Usage, *, provider: str | None = None) -> float:
        """Dollars for `usage` on `model`; 0.0 for local providers and unknown models."""
        if provider in LOCAL_PROVIDERS:
            return 0.0
        price = self.price(model)
        return 0.0 if price is None else price.cost(usage)


def repo_price_table(overrides: Mapping[str, Any] | None) -> PriceTable:
    """The default table plus a repository's `llm.prices` (entries with `input_per_mtok` and
    `output_per_mtok`)."""
    table = PriceTable()
    if not overrides:
        return table
    return table.with_overrides(
        {
            name: Price(input_per_mtok=p.input_per_mtok, output_per_mtok=p.output_per_mtok)
            for name, p in overrides.items()
        }
    )
