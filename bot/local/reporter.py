"""The engine's Reporter on the terminal: the run file saved on every change, progress shown.

On a terminal a rich Live table follows every story (status, attempts, gates, tokens, cost)
with event lines above it; elsewhere (a pipe, a test, CI) the same events come as plain
lines. Every `save` writes the run file at once, so Ctrl-C, SIGTERM or even SIGKILL leave a
state `plan-cascade resume` can go on from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from rich.console import Console
from rich.live import Live
from rich.text import Text

from bot.clock import utcnow
from bot.gates.annotations import Annotation
from bot.gates.detect import GateSpec
from bot.gates.report import GateResult
from bot.local.render import STATUS_STYLE, progress_table
from bot.local.store import LocalRun, RunStore
from bot.plan.state import PlanState, StoryStatus

OUTPUT_TAIL = 200
"""Characters of a failed gate's last output line shown on the terminal."""


def events(before: PlanState, after: PlanState) -> list[Text]:
    """One line per visible change between two states: stories, batches and the plan."""
    lines: list[Text] = []
    if after.status != before.status:
        note = f" ({after.note})" if after.note else ""
        lines.append(Text(f"plan {after.status.value}{note}", style="bold"))
    for story in after.prd.stories:
        old, new = before.stories.get(story.id), after.stories[story.id]
        if old is not None and old.attempts != new.attempts and new.attempts > 1:
            lines.append(Text(f"  {story.id} attempt {new.attempts}", style="yellow"))
        if old is not None and old.status == new.status:
            continue
        mark, style = STATUS_STYLE[new.status]
        text = f"{mark} {story.id} {new.status.value}"
        if new.status == StoryStatus.RUNNING:
            text += f": {story.title}"
        elif new.status == StoryStatus.PASSED:
            text += f" after {new.attempts} attempt(s), {new.tokens:,} tokens, ${new.cost_usd:.2f}"
        elif new.reason:
            text += f": {new.reason}"
        lines.append(Text(text, style=style))
    for batch in after.batches:
        old_batch = before.batches[batch.number - 1] if batch.number <= len(before.batches) else None
        if batch.head_sha and (old_batch is None or old_batch.head_sha != batch.head_sha):
            gates = ", ".join(f"{n} {c}" for n, c in batch.gates.items())
            lines.append(
                Text(
                    f"batch {batch.number} -> {batch.branch} ({batch.head_sha[:9]})"
                    + (f"; {gates}" if gates else "")
                )
            )
    return lines


class LocalReporter:
    """Saves the run file on every change and shows progress on `console`."""

    def __init__(
        self,
        store: RunStore,
        record: LocalRun,
        *,
        console: Console,
        clock: Callable[[], datetime] = utcnow,
        live: bool | None = None,
    ) -> None:
        self.store = store
        self.record = record
        self.console = console
        self.clock = clock
        self.use_live = console.is_terminal if live is None else live
        self.messages: list[str] = []
        self._live: Live | None = None

    @contextmanager
    def showing(self) -> Iterator[None]:
        """Show the live table (on a terminal) while the engine runs."""
        if not self.use_live:
            yield
            return
        with Live(progress_table(self.record.state), console=self.console, refresh_per_second=4) as live:
            self._live = live
            try:
                yield
            finally:
                self._live = None

    def _print(self, line: Text | str) -> None:
        self.console.print(line, highlight=False, soft_wrap=True)

    async def save(self, state: PlanState, *, important: bool = False) -> None:
        """Write the run file now (every change, not only `important` ones) and show what changed."""
        before = self.record.state
        self.record = self.record.model_copy(update={"state": state, "updated_at": self.clock()})
        self.store.save(self.record)
        for line in events(before, state):
            self._print(line)
        if self._live is not None:
            self._live.update(progress_table(state))

    async def gate_started(self, *, scope: str, gate: GateSpec, head_sha: str, attempt: int) -> object:
        """A line saying the gate runs; the handle is the start of nothing (unused)."""
        self._print(Text(f"  {scope} gate {gate.name} (attempt {attempt}): {gate.command}", style="dim"))
        return None

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
        """Passed or failed, how long it took, and the last line of a failure's output."""
        took = f"{result.duration_s:.1f}s"
        if result.judged == "neutral":
            note = f"  ○ {scope} {gate.name} no worse than the base in {took}: {result.judgement}"
            self._print(Text(note, style="yellow"))
            return
        if result.passed:
            self._print(Text(f"  ✓ {scope} {gate.name} passed in {took}", style="green"))
            return
        why = "timed out" if result.timed_out else f"exit {result.exit_code}"
        if result.judgement:
            why += f"; {result.judgement}"
        tail = next((line for line in reversed(result.output.splitlines()) if line.strip()), "")
        self._print(
            Text(f"  ✗ {scope} {gate.name} failed ({why}) in {took}: {tail[-OUTPUT_TAIL:]}", style="red")
        )

    async def message(self, body: str, *, key: str | None = None) -> None:
        """The first line of an engine message; its GitHub follow-up commands do not apply here."""
        self.messages.append(body)
        first = next((line for line in body.splitlines() if line.strip()), "")
        self._print(Text(re.sub(r"\*\*|`", "", first).strip(), style="bold"))

    async def flush(self) -> None:
        """Nothing is batched: every save was written."""
        return None
