"""Where a confined command agent's start goes: the execution bench's agent, one at a time.

    .venv/bin/python bench/agent_start.py [--runs 15] [--root CHECKOUT]

Runs `bench/execution.py`'s instant agent (the same shell script) on one story in a real
worktree, as the engine runs it with the server's sandbox policy and defaults (`CommandAgent.run`:
its git view copied, bubblewrap, the resource limits set before it runs, a cgroup where the
server can make one, its own egress proxy: listening in the sandbox as root, else through a
forwarder), then the same with the
egress left out (`agent_network` off), with the limits left out, with both, and as the plain
script runs it (bare `bwrap` with the same sandbox, no limits, no proxy, no git view); the
variants alternate, medians of `--runs`. The differences say what each part costs a story.
`--root` measures another checkout (e.g. `git archive main | tar -x -C /tmp/base`) with this
script, for a before-and-after in the same minutes. Measurement only: leaving parts out here
is never a setting the server offers.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


async def measure(runs: int) -> dict[str, list[float]]:
    from bot.agent.base import AgentTask
    from bot.agent.external import CommandAgent
    from bot.plan import parse_prd
    from bot.sandbox.confinement import Sandbox
    from bot.sandbox.limits import Limits
    from bot.sandbox.process import fast_child_watcher
    from bot.workspace.mirror import Mirror
    from bot.workspace.worktree import add_worktree, sandbox_view
    from tests.execution_support import GIT_ENV, agent_script, make_remote
    from tests.support import make_settings

    bench: Any = importlib.import_module("execution")
    fast_child_watcher()
    tmp = Path(tempfile.mkdtemp(prefix="pc-agent-start-"))
    remote = make_remote(tmp)
    script = agent_script(tmp, "agent.sh", bench.WRITE)
    mirror = Mirror(root=tmp / "data", clone_url=f"file://{remote}")
    await mirror.ensure()
    wt = await add_worktree(mirror, branch="b1", base_ref="refs/remotes/origin/main", path=tmp / "wt")
    prd = parse_prd(bench.chain_prd(1, 1))
    agent = CommandAgent("s", f"{script} {{story_id}} {{worktree}}", binary=None)
    sandbox = make_settings(tmp).sandbox_policy()  # the server's, with its defaults
    unlimited = Limits(processes=0, open_files=0, memory=0)
    variants = {
        "the engine's agent (limits, egress)": sandbox,
        "  without its egress proxy": replace(sandbox, agent_network=False),
        "  without its limits": replace(sandbox, limits=unlimited),
        "  without either": replace(
            sandbox, agent_network=False, limits=Limits(processes=0, open_files=0, memory=0)
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    times["the plain script's (bare bwrap)"] = []
    plain_home = tmp / "plain-home"
    plain_home.mkdir()
    bare = Sandbox()  # the plain script's (`bench/execution.py`): bubblewrap, no limits asked for
    jail = bare.confinement(worktree=wt.path, home=plain_home, readonly=[wt.path / ".git", script.parent])
    for i in range(runs + 1):  # the first round warms up
        for n, (name, chosen) in enumerate(variants.items()):
            home = tmp / "home" / f"{i}-{n}"
            task = AgentTask(
                story=prd.stories[0],
                prd=prd,
                phase="implementation",
                worktree=wt.path,
                home=home,
                prompt="Write the file.",
                sandbox=chosen,
                protected=[wt.path / ".git"],
                transcript_path=home / "transcript.jsonl",
                git=sandbox_view(wt),
            )
            start = time.perf_counter()
            result = await agent.run(task)
            if i:
                times[name].append(time.perf_counter() - start)
            assert result.status == "finished", result.reason
        argv = jail.argv([str(script), "STORY-001", str(wt.path)], cwd=wt.path, env=GIT_ENV)
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(*argv, cwd=wt.path, env=GIT_ENV)
        assert await proc.wait() == 0
        if i:
            times["the plain script's (bare bwrap)"].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds of every variant (median)")
    parser.add_argument("--root", type=Path, default=HERE.parent, help="the checkout to measure")
    args = parser.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    sys.path.insert(1, str(HERE))
    times = asyncio.run(measure(args.runs))
    print(f"{args.root}: load {os.getloadavg()[0]:.1f}, median of {args.runs} (ms a story, one at a time)")
    for name, seconds in times.items():
        print(f"  {name:38} {1000 * statistics.median(seconds):6.1f}   (min {1000 * min(seconds):5.1f})")


if __name__ == "__main__":
    main()
