"""An in-memory Reporter and Publisher for the engine: records what a front door would show."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.gates.annotations import Annotation
from bot.gates.detect import GateSpec
from bot.gates.report import GateResult, conclusion
from bot.plan.state import PlanState


@dataclass
class RecordingReporter:
    """Keeps every saved state, gate event and message."""

    states: list[PlanState] = field(default_factory=list)
    gates: list[dict[str, Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    async def save(self, state: PlanState, *, important: bool = False) -> None:
        self.states.append(state)

    async def gate_started(self, *, scope: str, gate: GateSpec, head_sha: str, attempt: int) -> object:
        self.gates.append(
            {"scope": scope, "gate": gate.name, "sha": head_sha, "attempt": attempt, "event": "started"}
        )
        return len(self.gates)

    async def gate_finished(
        self,
        handle: object,
        *,
        scope: str,
        gate: GateSpec,
        result: GateResult,
        annotations: list[Annotation],
        head_sha: str,
    ) -> None:
        self.gates.append(
            {
                "scope": scope,
                "gate": gate.name,
                "sha": head_sha,
                "attempt": result.attempt,
                "event": "finished",
                "conclusion": conclusion(result),
                "output": result.output,
            }
        )

    async def message(self, body: str, *, key: str | None = None) -> None:
        self.messages.append(body)

    async def flush(self) -> None:
        return None

    def conclusions(self, scope: str, gate: str) -> list[str]:
        """Conclusions of one gate of one story, in order."""
        return [
            g["conclusion"]
            for g in self.gates
            if g["event"] == "finished" and g["scope"] == scope and g["gate"] == gate
        ]
