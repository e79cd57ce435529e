"""What the engine needs from its front door: somewhere to save state and report results."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from bot.gates.annotations import Annotation
from bot.gates.detect import GateSpec
from bot.gates.report import GateResult
from bot.plan.state import PlanState

if TYPE_CHECKING:
    from bot.orchestration.run import Run


class Reporter(Protocol):
    """Where state and gate results go: the plan comment and check runs, or the terminal."""

    async def save(self, state: PlanState, *, important: bool = False) -> PlanState | None:
        """Persist the state; returns it as written (its new version), or None when deferred.

        `important` transitions are written at once; progress may be batched. Raises
        `StalePlan` when someone else wrote the plan since it was read.
        """

    async def gate_started(self, *, scope: str, gate: GateSpec, head_sha: str, attempt: int) -> object:
        """A gate begins on `head_sha`; returns a handle for `gate_finished` (a check run id)."""

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
        """A gate ended."""

    async def message(self, body: str, *, key: str | None = None) -> None:
        """Tell the maintainers something (a comment, a line on the terminal).

        With `key`, the same message is said once: a job redone after a crash says nothing twice.
        """


class Publisher(Protocol):
    """Turns a finished batch into something reviewable (a PR, a local branch)."""

    async def publish_batch(self, run: Run, batch: int, story_ids: list[str]) -> PlanState:
        """Merge the batch's passed stories, run integration gates, publish; returns the new state."""
