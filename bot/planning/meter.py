"""Usage, cost and call count summed over every model call of one planning run."""

from __future__ import annotations

from typing import Any

from bot.llm import Completion, StructuredResult, Usage


class UsageMeter:
    """Adds up what each completion used; `record` takes raw or structured results."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.cost_usd = 0.0
        self.calls = 0

    def add(self, completion: Completion) -> None:
        """Count one completion."""
        self.usage = self.usage + completion.usage
        self.cost_usd += completion.cost_usd
        self.calls += 1

    def record(self, result: StructuredResult[Any] | Completion) -> None:
        """Count a completion, or every completion (repair included) of a structured result."""
        if isinstance(result, Completion):
            self.add(result)
            return
        for completion in result.completions:
            self.add(completion)
