"""Where the execution bench's engine run spends its time, step by step.

    .venv/bin/python bench/execution_profile.py [--runs 3] [--github-ms 0] [--root CHECKOUT]

Runs `bench/execution.py`'s overhead case (12 stories in 4 batches, the server's default
checks) and its plain script alternately, with timing spans wrapped around the steps of the
production path: the agent (its sandbox included), worktrees, commit, push, the protected-paths
check, the secret scan (its `git log -p`, and its rules), the dependency check (its manifest
listing and reading), every git process by subcommand, the state saves; and counts the GitHub
calls (branch rules, advisories). Prints calls and milliseconds a run, summed over the stories
(a batch's three stories run at once, so a twelfth of a step's sum is what it adds to a
batch). `--root` profiles another checkout (e.g. `git worktree add --detach ../base main`) with
this bench, for a before-and-after in the same minutes. Profiling only: the wrappers replace
module attributes in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SPANS: collections.defaultdict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
STEPS = [
    ("bot.orchestration.story", "_run_agent", "agent (its sandbox included)"),
    ("bot.orchestration.story", "add_worktree", "worktree add"),
    ("bot.orchestration.story", "cleanup", "worktree removal"),
    ("bot.orchestration.story", "commit_staged", "commit"),
    ("bot.orchestration.story", "publish_story", "push (branch rules included)"),
    ("bot.orchestration.story", "policy_violations", "protected paths check"),
    ("bot.orchestration.story", "hold_back", "secret scan"),
    ("bot.workspace.outgoing", "commits_diff", "secret scan: git log -p"),
    ("bot.workspace.outgoing", "scan", "secret scan: rules"),
    ("bot.orchestration.story", "check_dependencies", "dependency check"),
    ("bot.orchestration.depcheck", "changed_dependencies", "dependency check: manifests"),
    ("bot.orchestration.story", "_gates", "gates (none here)"),
    ("bot.orchestration.engine", "merge_batch", "batch merge"),
    ("bot.agent.external", "confinement_for", "agent: confinement (its git view read)"),
    ("bot.agent.external", "_egress", "agent: egress proxy (start and stop)"),
    ("bot.agent.external", "run_process", "agent: its process (start to end)"),
    ("bot.sandbox.confinement", "Confinement.argv", "bubblewrap's arguments (the plain script's too)"),
    ("bot.sandbox.process", "open_pipe", "agent: output pipe"),
    ("bot.sandbox.limits", "LimitGate.release", "agent: limit gate (bwrap's start included)"),
    ("bot.sandbox.limits", "apply", "agent: limits set"),
    ("bot.sandbox.process", "_finish", "agent: group killed, output drained"),
    ("bot.agent.transcript", "Transcript.save", "agent: transcript saved"),
    ("bot.workspace.gitview", "GitView.snapshot", "agent: its git view read into memory"),
    ("bot.workspace.gitview", "GitSnapshot.files", "agent: its git view's memfds made"),
    ("bot.workspace.gitview", "_copy_refs", "agent: its git view's refs read"),
    ("bot.workspace.gitview", "GitView.refresh", "its git view copied to disk (built-in agent)"),
    ("bot.workspace.gitview", "remove_scratch", "its git view's old copy on disk removed"),
]
CONTEXTS = {"_egress"}
"""Steps that are async context managers: their entering and leaving are timed."""


def _timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def note(start: float) -> None:
        span = SPANS[label]
        span[0] += 1
        span[1] += time.perf_counter() - start

    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                note(start)

        return wrapped_async

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            note(start)

    return wrapped


def _timed_context(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """An async context manager's entering and leaving, timed (not what runs inside)."""

    @contextlib.asynccontextmanager
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        span = SPANS[label]
        start = time.perf_counter()
        async with fn(*args, **kwargs) as value:
            span[1] += time.perf_counter() - start
            try:
                yield value
            finally:
                start = time.perf_counter()
        span[0] += 1
        span[1] += time.perf_counter() - start

    return wrapped


def instrument() -> None:
    """Wrap the steps, and `run_git` wherever it was imported, in timing spans."""
    git = importlib.import_module("bot.workspace.git")
    original = git.run_git

    async def run_git(args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await original(args, **kwargs)
        finally:
            words = [a for a in args if not a.startswith("-") and "=" not in a and "/" not in a]
            span = SPANS[f"git {words[0] if words else '?'}"]
            span[0] += 1
            span[1] += time.perf_counter() - start

    for module in list(sys.modules.values()):
        if (
            getattr(module, "__name__", "").startswith("bot.")
            and getattr(module, "run_git", None) is original
        ):
            module.run_git = run_git  # type: ignore[attr-defined]
    for name, attr, label in STEPS:
        owner: Any = importlib.import_module(name)
        *path, attr = attr.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        if owner is not None and hasattr(owner, attr):
            found = getattr(owner, attr)
            wrap = _timed_context if attr in CONTEXTS else _timed
            setattr(owner, attr, wrap(label, found))
    spawn = asyncio.create_subprocess_exec

    async def timed_spawn(program: str, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await spawn(program, *args, **kwargs)
        finally:
            span = SPANS[f"process start: {Path(program).name}"]
            span[0] += 1
            span[1] += time.perf_counter() - start

    asyncio.create_subprocess_exec = timed_spawn  # type: ignore[assignment]


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--github-ms", type=float, default=0.0)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    importlib.import_module("bot.orchestration.engine")  # the checkout's code, before the bench binds its own
    importlib.import_module("tests.execution_support")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    bench = importlib.import_module("execution")
    instrument()
    from bot.sandbox.process import fast_child_watcher

    fast_child_watcher()
    prd, extra = bench.chain_prd(4, 3), "execution:\n  max_parallel: 3\n"
    await bench.median_of(1, lambda d: bench.engine_run(d, prd, extra))  # warm-up
    SPANS.clear()
    bench.GITHUB.latency = args.github_ms / 1000
    bench.GITHUB.calls.clear()
    engines, plains = [], []
    for _ in range(args.runs):
        engines.append(await bench.median_of(1, lambda d: bench.engine_run(d, prd, extra)))
        plains.append(await bench.median_of(1, lambda d: bench.script_run(d, 4, 3)))
    ratio = statistics.median(engines) / statistics.median(plains)
    print(
        f"{args.root}: engine {[round(e, 2) for e in engines]} s, plain {[round(p, 2) for p in plains]} s, "
        f"ratio {ratio:.2f}× (median of {args.runs}); GitHub at {args.github_ms:g} ms, its calls a run: "
        + (", ".join(f"{k} {v / args.runs:g}" for k, v in sorted(bench.GITHUB.calls.items())) or "none")
    )
    print(f"{'step':44} {'calls a run':>11} {'ms a run':>9} {'ms a story':>10}")
    for label, (count, seconds) in sorted(SPANS.items(), key=lambda kv: -kv[1][1]):
        per_run = 1000 * seconds / args.runs
        print(f"{label:44} {count / args.runs:11.1f} {per_run:9.0f} {per_run / 12:10.1f}")


if __name__ == "__main__":
    asyncio.run(main())
