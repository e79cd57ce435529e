"""Execution engine benchmark.

    .venv/bin/python bench/execution.py [--runs 5] [--github-ms 0] [--only overhead] [--json PATH]
    .venv/bin/python bench/report.py --run execution          # the same, recorded in docs/benchmarks.md

1. Overhead: 12 stories in 4 batches (3 per batch, each batch depending on the previous),
   instant agents (the same shell script for both, in the same sandbox) and no gates, run by
   the engine against a bare remote; compared with a plain script doing the same work directly
   (clone, fetch, worktree add, the agent, commit, push, worktree remove, each batch's merges,
   made in the mirror as the engine makes clean ones: `git merge-tree` and `git commit-tree`)
   with the same parallelism; neither starts git's automatic upkeep after each commit (the
   engine runs it once a run, at its fetch), and both remove a worktree as `git worktree remove`
   does, without starting it (its folder, then git's record of it). Five runs of each,
   alternating; medians. Target: ≤ 1.3×.
   The engine runs as the server does by default: the secret scan before every push, the
   dependency check after it (an in-process Advisory Database, asked only when a manifest
   changes), `publishing.commits: auto` reading branch rules from an in-process GitHub that
   answers after `--github-ms` (default 0); the calls each made are printed. The engine's agent
   is confined by the server's own sandbox policy with its defaults (`Settings.sandbox_policy`:
   bubblewrap, the default limits set before it runs, a cgroup each where the server can make
   one, the process registry, its own egress proxy: listening in the sandbox as root, else a
   forwarder), printed; the plain script's runs in bubblewrap alone (`bench/agent_start.py` says
   what the rest costs a story; docs/benchmarks.md, "Where the engine's time goes"). CPU time
   is printed too.
2. Parallel efficiency: 6 independent stories with 2-second gates, max_parallel 1 vs 3.
   Efficiency = T(1) / (3 × T(3)), median of 3. Target ≥ 90 %. Measured without the batch's
   integration gate, which runs once on the merged batch whatever max_parallel is (printed
   too: with it the ideal is 78 %).
3. Memory: the server's RSS idle, and while six stories run (approved through the fake
   GitHub, agents sleeping), sampled from /proc. Target: under 150 MB idle; a running
   story costs its worktree, never a full clone.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.gates.dependencies import AdvisoryLookup  # noqa: E402
from bot.orchestration.engine import execute  # noqa: E402
from bot.publishing.commit_mode import CommitPublisher  # noqa: E402
from tests.execution_support import (  # noqa: E402
    GIT_ENV,
    agent_script,
    approved_state,
    config_for,
    git,
    make_remote,
    make_run,
)
from tests.support import make_settings  # noqa: E402


def chain_prd(batches: int, width: int) -> str:
    lines = ["version: 1", "title: Bench", "summary: Bench plan.", "stories:"]
    for b in range(batches):
        for w in range(width):
            n = b * width + w + 1
            deps = [f"STORY-{(b - 1) * width + d + 1:03d}" for d in range(width)] if b else []
            lines += [
                f"  - id: STORY-{n:03d}",
                f"    title: Story {n}",
                f"    depends_on: [{', '.join(deps)}]",
                f"    acceptance_criteria: ['story-{n:03d}.txt holds 1 line']",
            ]
    return "\n".join(lines) + "\n"


WRITE = 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n'


class BenchGitHub:
    """The two GitHub reads a run's checks make, answered in-process after `latency` seconds
    and counted: branch rules (`publishing.commits: auto`) and the Advisory Database."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.calls: Counter[str] = Counter()

    async def branch_rules(self, repo: str, branch: str) -> list[str]:
        self.calls["branch rules"] += 1
        await asyncio.sleep(self.latency)
        return []

    async def list_global_advisories(
        self, *, ecosystem: str, affects: object, type: str = "reviewed"
    ) -> list:  # type: ignore[type-arg]
        self.calls["advisories"] += 1
        await asyncio.sleep(self.latency)
        return []


GITHUB = BenchGitHub()
CPU: list[float] = []
"""CPU seconds of each measured run (this process and its children), in the order run."""


def cpu_seconds() -> float:
    """CPU time used so far by this process and the children it has waited for."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


async def engine_run(tmp: Path, prd: str, extra: str, script_body: str = WRITE) -> float:
    remote = make_remote(tmp)
    script = agent_script(tmp, "agent.sh", script_body)
    config = config_for(script, extra)
    assert config.dependencies.check, "the bench measures the dependency check on"
    sandbox = make_settings(tmp).sandbox_policy()  # the server's, with its defaults
    run = make_run(
        tmp, remote, approved_state(prd), config, advisories=AdvisoryLookup(GITHUB), sandbox=sandbox
    )  # type: ignore[arg-type]
    run.mirror.pusher = CommitPublisher(GITHUB, "octo/demo", mode="auto", default_branch="main")  # type: ignore[arg-type]
    start, cpu = time.perf_counter(), cpu_seconds()
    state = await execute(run)
    elapsed = time.perf_counter() - start
    CPU.append(cpu_seconds() - cpu)
    assert state.status.value == "completed", state.note
    return elapsed


def sandbox_said() -> str:
    """The engine's sandbox in words: the server's defaults on this machine."""
    from bot.network import netns
    from bot.sandbox.limits import describe

    with tempfile.TemporaryDirectory() as d:
        sandbox = make_settings(Path(d)).sandbox_policy()
    limits, _ = describe(sandbox.limits, tmp_sized=True, root=os.geteuid() == 0)
    way = "the proxy listening in the sandbox" if netns.available() else "a forwarder to the proxy"
    return f"{sandbox.mode}, limits: {limits}; egress: {way}"


def script_run(tmp: Path, batches: int, width: int) -> float:
    """The same work, done directly: git operations and the same agent script."""
    from bot.sandbox.confinement import Sandbox

    remote = make_remote(tmp)
    agent = agent_script(tmp, "agent.sh", WRITE)
    sandbox = Sandbox()  # the engine's default: the agent runs in bubblewrap when it is there
    start, cpu = time.perf_counter(), cpu_seconds()
    mirror = tmp / "mirror.git"
    git("clone", "-q", "--bare", str(remote), str(mirror), cwd=tmp)
    git("config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*", cwd=mirror)
    git("fetch", "-q", "--prune", "origin", cwd=mirror)

    lock = threading.Lock()  # git worktree add/remove write the mirror's shared config

    def story(n: int) -> None:
        wt = tmp / "wt" / f"s{n}"
        base = "refs/remotes/origin/main" if n <= width else f"refs/heads/batch-{(n - 1) // width - 1}"
        with lock:
            git("worktree", "add", "-q", "--no-track", "-B", f"plan/{n}", str(wt), base, cwd=mirror)
        home = tmp / "home" / f"s{n}"
        home.mkdir(parents=True)
        jail = sandbox.confinement(worktree=wt, home=home, readonly=[wt / ".git", agent.parent])
        argv = jail.argv([str(agent), f"STORY-{n:03d}", str(wt)], cwd=wt, env=GIT_ENV)
        subprocess.run(argv, cwd=wt, env=GIT_ENV, check=True)
        git("add", "-A", cwd=wt)
        git("-c", "maintenance.auto=false", "commit", "-q", "-m", f"STORY-{n:03d}", cwd=wt)  # as the engine
        git("push", "-q", "origin", f"plan/{n}", cwd=mirror)
        with lock:  # what `git worktree remove --force` does, as the engine does it: its two folders go
            shutil.rmtree(wt)
            shutil.rmtree(mirror / "worktrees" / f"s{n}")

    def merge(b: int) -> None:  # in the mirror, as the engine merges a batch without conflicts
        head = git(
            "rev-parse", "refs/remotes/origin/main" if b == 0 else f"refs/heads/batch-{b - 1}", cwd=mirror
        )
        for w in range(width):
            story = f"refs/heads/plan/{b * width + w + 1}"
            tree = git("merge-tree", "--write-tree", head, story, cwd=mirror)
            head = git("commit-tree", "-p", head, "-p", story, "-m", f"Merge {story}", tree, cwd=mirror)
        git("update-ref", f"refs/heads/batch-{b}", head, cwd=mirror)

    with ThreadPoolExecutor(max_workers=width) as pool:
        for b in range(batches):
            list(pool.map(story, [b * width + w + 1 for w in range(width)]))
            merge(b)
    elapsed = time.perf_counter() - start
    CPU.append(cpu_seconds() - cpu)
    return elapsed


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory() -> tuple[float, float]:
    import httpx

    from bot.testing.deliveries import encode, load_fixture, signed_headers
    from bot.testing.fake_github import FakeGitHub
    from bot.testing.fake_github_serve import serve
    from bot.testing.server_process import running_server
    from tests.support import rsa_private_key_pem

    tmp = Path(tempfile.mkdtemp(prefix="pc-mem-"))
    remote = make_remote(tmp)
    script = agent_script(tmp, "sleepy.sh", "sleep 6\n" + WRITE)
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3")
    fake.add_repo("o/r", clone_url=f"file://{remote}")
    fake.set_file(
        "o/r",
        ".github/plan-cascade.yml",
        f'agent:\n  default: s\n  commands:\n    s: "{script} {{story_id}} {{worktree}}"\n  sandbox: none\n'
        "gates:\n  detect: false\nexecution:\n  max_parallel: 6\n",
    )
    prd = "```prd\n" + chain_prd(1, 6) + "```\n"
    fake.add_issue("o/r", title="mem", body=prd)
    with (
        serve(fake) as api,
        running_server(
            tmp,
            api_url=api,
            webhook_secret="s3cret-mem",
            private_key_pem=rsa_private_key_pem(),
            extra_env={"PLAN_CASCADE_LOG_LEVEL": "WARNING"},
        ) as (url, proc),
    ):
        time.sleep(2)
        idle = rss_mb(proc.pid)
        data = copy.deepcopy(load_fixture("issues.labeled.1"))
        data["repository"].update({"full_name": "o/r", "clone_url": ""})
        data["installation"] = {"id": 1}
        data["issue"]["number"] = 1
        data["label"]["name"] = "plan-cascade"
        data["sender"].update({"login": "o", "type": "User"})
        body = encode(data)
        httpx.post(
            f"{url}/webhook", content=body, headers=signed_headers(body, secret="s3cret-mem", event="issues")
        )
        while not fake.comments("o/r", 1):
            time.sleep(0.1)
        fake.add_reaction("o/r", fake.comments("o/r", 1)[0].id, "o", "+1")
        peak, deadline = idle, time.monotonic() + 60
        while time.monotonic() < deadline:
            peak = max(peak, rss_mb(proc.pid))
            if fake.requests_to("POST", r"/api/v3/repos/o/r/pulls"):
                break
            time.sleep(0.1)
    return idle, peak


async def median_of(runs: int, measure) -> float:  # type: ignore[no-untyped-def]
    """Median of `runs` timings, each in a fresh temporary directory."""
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            result = measure(Path(d))
            times.append(await result if asyncio.iscoroutine(result) else result)
    return statistics.median(times)


def machine() -> str:
    """The machine a figure was measured on: cores, memory, kernel, Python."""
    import os
    import platform

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = os.getloadavg()[0]
    return (
        f"{os.cpu_count()} cores, {memory:.0f} GB, Linux {platform.release()}, "
        f"Python {platform.python_version()}, load {load:.1f} at the start"
    )


async def main(argv: list[str] | None = None) -> dict[str, object]:
    from bot.sandbox.process import fast_child_watcher

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each side for the overhead (median)")
    parser.add_argument("--github-ms", type=float, default=0.0, help="the in-process GitHub's answer time")
    parser.add_argument("--only", choices=["overhead"], help="the overhead only (no parallelism, no memory)")
    parser.add_argument("--json", type=Path, help="also write the figures there (for bench/report.py)")
    args = parser.parse_args(argv)
    GITHUB.latency = args.github_ms / 1000
    figures: dict[str, object] = {
        "bench": "execution",
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "command": " ".join(["bench/execution.py", *(argv if argv is not None else sys.argv[1:])]),
    }
    fast_child_watcher()  # as the server's lifespan and the worker do
    prd = chain_prd(4, 3)
    extra = "execution:\n  max_parallel: 3\n"
    await median_of(1, lambda d: engine_run(d, prd, extra))  # warm-up: imports, model building
    GITHUB.calls.clear()
    engines, plains, cpu_engine, cpu_plain = [], [], [], []
    for _ in range(args.runs):  # alternating, so both see the same machine
        engines.append(await median_of(1, lambda d: engine_run(d, prd, extra)))
        cpu_engine.append(CPU[-1])
        plains.append(await median_of(1, lambda d: script_run(d, 4, 3)))
        cpu_plain.append(CPU[-1])
    engine, plain = statistics.median(engines), statistics.median(plains)
    ratio = engine / plain
    cpu = (statistics.median(cpu_engine), statistics.median(cpu_plain))
    calls = {name: count / args.runs for name, count in sorted(GITHUB.calls.items())}
    print(
        f"12 stories in 4 batches (median of {args.runs}): engine {engine:.2f} s, the same work as a plain "
        f"script {plain:.2f} s, ratio {ratio:.2f}× (target ≤ 1.3×: {'met' if ratio <= 1.3 else 'missed'})"
    )
    print(
        f"  CPU time (this process and its children): engine {cpu[0]:.2f} s, plain script {cpu[1]:.2f} s, "
        f"{cpu[0] / cpu[1]:.2f}× (less sensitive to a busy machine than the wall-clock ratio)"
    )
    print(f"  the engine's sandbox: {sandbox_said()}")
    print(
        "  with the secret scan on (before every push) and the dependency check on (`dependencies.check: "
        f"true`), `publishing.commits: auto`; GitHub answering in {args.github_ms:g} ms; its calls a run: "
        + (", ".join(f"{name} {count:g}" for name, count in calls.items()) or "none")
    )
    figures["overhead"] = {
        "engine_s": round(engine, 3),
        "plain_s": round(plain, 3),
        "ratio": round(ratio, 3),
        "runs": args.runs,
        "ratios": [round(e / p, 3) for e, p in zip(engines, plains, strict=True)],
        "cpu_engine_s": round(cpu[0], 3),
        "cpu_plain_s": round(cpu[1], 3),
        "sandbox": sandbox_said(),
        "secret_scan": True,
        "dependency_check": True,
        "github_ms": args.github_ms,
        "github_calls": calls,
    }
    if args.only != "overhead":
        figures["parallel"] = await parallelism()
        idle, busy = memory()
        print(f"server RSS: idle {idle:.0f} MB, six stories running {busy:.0f} MB (target idle < 150 MB)")
        figures["memory"] = {"idle_mb": round(idle), "busy_mb": round(busy)}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


async def parallelism() -> dict[str, object]:
    """Parallel efficiency, without and with the batch's integration gate."""
    found: dict[str, object] = {}
    gate = "gates:\n  detect: false\n  custom:\n    - name: slow\n      command: sleep 2\n"
    for integration in ("false", "true"):
        gates = gate + f"  integration: {integration}\n"
        serials, parallels = [], []
        for _ in range(3):  # alternating
            with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
                serials.append(
                    await engine_run(Path(a), chain_prd(1, 6), gates + "execution:\n  max_parallel: 1\n")
                )
                parallels.append(
                    await engine_run(Path(b), chain_prd(1, 6), gates + "execution:\n  max_parallel: 3\n")
                )
        serial, parallel = statistics.median(serials), statistics.median(parallels)
        efficiency = serial / (3 * parallel)
        found["integration" if integration == "true" else "plain"] = {
            "serial_s": round(serial, 2),
            "parallel_s": round(parallel, 2),
            "efficiency": round(efficiency, 3),
        }
        if integration == "false":
            print(
                f"6 stories, 2 s gates (median of 3): max_parallel 1 {serial:.2f} s, max_parallel 3 "
                f"{parallel:.2f} s, efficiency {efficiency:.0%} "
                f"(target ≥ 90%: {'met' if efficiency >= 0.9 else 'missed'})"
            )
        else:
            print(
                f"  with the batch's integration gate (2 s, once, after the merge): {serial:.2f} s vs "
                f"{parallel:.2f} s, {efficiency:.0%}; at best (12 + 2) / (3 × (4 + 2)) = 78%"
            )
    return found


if __name__ == "__main__":
    asyncio.run(main())
