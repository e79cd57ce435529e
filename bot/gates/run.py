"""Running gates: each command in the story's worktree, sandboxed, scrubbed environment, timeout, group kill.

Gates run the repository's own commands (its test suite, its Makefile, a story's
`verification:`): untrusted code, confined like an agent's commands (no network).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from bot.gates.annotations import Annotation, parse_any
from bot.gates.detect import GateSpec
from bot.gates.report import GateResult
from bot.sandbox.confinement import Confinement
from bot.sandbox.process import run_process

GateStarted = Callable[[GateSpec], Awaitable[object]]
GateFinished = Callable[[GateSpec, object, GateResult, list[Annotation]], Awaitable[None]]


async def run_gate(
    spec: GateSpec,
    *,
    cwd: Path,
    env: dict[str, str],
    default_timeout: float,
    attempt: int,
    confinement: Confinement | None,
    output_limit: int = 200_000,
) -> tuple[GateResult, list[Annotation]]:
    """Run one gate in its confinement; its result and the annotations parsed from its output."""
    proc = await run_process(
        spec.command,
        cwd=cwd,
        env=env,
        timeout=spec.timeout_seconds or default_timeout,
        output_limit=output_limit,
        confinement=confinement,
    )
    result = GateResult(
        name=spec.name,
        command=spec.command,
        exit_code=proc.exit_code,
        timed_out=proc.timed_out,
        output=proc.output,
        duration_s=proc.duration_s,
        attempt=attempt,
    )
    annotations = [] if result.passed else parse_any(proc.output, root=str(cwd))
    return result, annotations


async def run_gates(
    specs: list[GateSpec],
    *,
    cwd: Path,
    env: dict[str, str],
    default_timeout: float,
    attempt: int,
    started: GateStarted,
    finished: GateFinished,
    confinement: Confinement | None,
    judge: Callable[[GateResult], Awaitable[GateResult]] | None = None,
) -> list[GateResult]:
    """Run every gate in order (all of them, so the agent sees every failure at once).

    `judge` gives each result its verdict against the plan's base before it is reported (it may
    wait for the base's result); a gate that does not hold the change back is reported without
    annotations.
    """
    results = []
    for spec in specs:
        handle = await started(spec)
        result, annotations = await run_gate(
            spec,
            cwd=cwd,
            env=env,
            default_timeout=default_timeout,
            attempt=attempt,
            confinement=confinement,
        )
        if judge is not None:
            result = await judge(result)
            if result.passed:
                annotations = []
        await finished(spec, handle, result, annotations)
        results.append(result)
    return results
