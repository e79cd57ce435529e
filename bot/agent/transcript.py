"""The transcript of one agent run: every message, tool call, observation and usage, as JSON lines.

Records are kept in memory and written once, by :meth:`Transcript.save`, which agents call
in ``finally`` so a run that crashed still leaves its transcript behind (STYLE.md §9). What is
written goes through `bot.redaction` like everything else that leaves the bot.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.llm import Message, Usage
from bot.redaction import redact_value


class Transcript:
    """Records of one run, each stamped with seconds since the run started."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        self._clock = clock
        self._started = clock()

    def record(self, kind: str, **fields: Any) -> None:
        """Append one record of type ``kind`` with JSON-serialisable ``fields``."""
        self.records.append({"type": kind, "t": round(self._clock() - self._started, 3), **fields})

    def message(self, message: Message) -> None:
        """Record a conversation message (tool calls and tool_call_id included)."""
        self.record("message", **message.model_dump(mode="json", exclude_defaults=True))

    def usage(self, usage: Usage, *, cost_usd: float, model: str) -> None:
        """Record the usage and cost of one model call."""
        self.record("usage", model=model, cost_usd=cost_usd, **usage.model_dump(mode="json"))

    def save(self) -> Path:
        """Write all records as JSON lines to ``path`` (parents created); return the path."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(redact_value(record), ensure_ascii=False, default=str) for record in self.records]
        self.path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return self.path


def load_transcript(path: Path) -> list[dict[str, Any]]:
    """The records of a saved transcript, in order."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
