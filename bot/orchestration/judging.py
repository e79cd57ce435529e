"""Which gates are judged against the plan's base check, and the judge a gate runner calls.

With `gates.strict: true` the configured gates (`typecheck`, `test`, `lint`, `custom`) must pass
outright: they are neither run on the base nor judged against it, whatever a base check holds.
Detected gates, and every gate without `strict`, are judged (`gates.baseline.judge`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from bot.gates.baseline import judge
from bot.gates.report import GateResult
from bot.orchestration.run import Run


def passed_outright(run: Run) -> set[str]:
    """The gates never judged against the base: with `gates.strict`, the configured ones."""
    g = run.config.gates
    if not g.strict:
        return set()
    configured = {"typecheck": g.typecheck, "test": g.test, "lint": g.lint}
    return {name for name, command in configured.items() if command is not None} | {c.name for c in g.custom}


def base_judge(run: Run, root: Path) -> Callable[[GateResult], Awaitable[GateResult]] | None:
    """How results in the worktree at `root` are judged against the plan's base check (None: not).
    While the base check's gates still run (beside the first batch), a result waits for them."""
    check = run.state.base_check
    if run.base_pending is None and (check is None or check.setup_failed):
        return None

    outright = passed_outright(run)

    async def judged(result: GateResult) -> GateResult:
        if result.name in outright:
            return result  # whatever a base check kept, a gate that must pass outright is not judged
        base = await run.base_check()
        if base is None or base.setup_failed:
            return result
        return judge(result, base.gate(result.name), root=str(root), label=base.base_label or "the base")

    return judged
