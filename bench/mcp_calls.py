"""MCP tool call overhead: one call through a sandboxed local MCP server, beside builtin tool calls.

    .venv/bin/python bench/mcp_calls.py [--calls 200]

The server is `tests/mcp_server.py` (standard library, one thread per call), started the
production way (`bot.mcp.tools.open_mcp`: bubblewrap, sandbox `required`, its own network
namespace, the worktree read-only) in a temporary git repository; each call is what the builtin
agent does for `tracker__lookup` (the SDK's `call_tool`, the result sanitised, capped and
fenced, the transcript record and the count). Beside it, in the same run: the builtin `read`
tool (in the bot's process) and `bash` running `true` (a fresh sandboxed process each call, as
every bash call is). Prints the median and p99 of `--calls` calls each, and the server's start.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.agent.tools import ToolContext, run_tool  # noqa: E402
from bot.config.mcp import McpServer  # noqa: E402
from bot.config.mcp_policy import McpPolicy  # noqa: E402
from bot.llm import ToolCall  # noqa: E402
from bot.mcp.servers import McpPlace  # noqa: E402
from bot.mcp.tools import open_mcp  # noqa: E402
from bot.sandbox.confinement import Sandbox  # noqa: E402
from bot.sandbox.process import scrubbed_env  # noqa: E402


async def timed(calls: int, once: Callable[[], Awaitable[str]], check: str) -> list[float]:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        answer = await once()
        times.append((time.perf_counter() - started) * 1000)
        assert check in answer, answer[:300]
    return times


def figures(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * len(ordered)) - 1)]
    return f"{name:<34} median {statistics.median(times):8.2f} ms   p99 {p99:8.2f} ms   ({len(times)} calls)"


async def main(calls: int) -> None:
    sandbox = Sandbox(mode="required")
    problem = sandbox.problem()
    if problem:
        sys.exit(f"bubblewrap is needed: {problem}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    try:
        repo, home = tmp / "repo", tmp / "home"
        (repo / "tools").mkdir(parents=True)
        home.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        shutil.copy(ROOT / "tests" / "mcp_server.py", repo / "tools" / "tracker.py")
        (repo / "README.md").write_text("hello\n" * 20)
        servers = {"tracker": McpServer(command=["python3", "tools/tracker.py"], tools=["lookup"])}
        place = McpPlace(worktree=repo, env=scrubbed_env(home=home), sandbox=sandbox)
        ctx = ToolContext(
            root=repo,
            home=home,
            confinement=sandbox.confinement(worktree=repo, home=home),
            timeout_s=30,
        )
        records: list[tuple[str, dict[str, object]]] = []
        started = time.perf_counter()
        async with open_mcp(
            servers,
            policy=McpPolicy(),
            place=place,
            call_seconds=30,
            output_limit=20_000,
            record=lambda kind, **fields: records.append((kind, fields)),
        ) as tools:
            start_ms = (time.perf_counter() - started) * 1000
            assert tools.specs, tools.notes
            await tools.call("tracker__lookup", {"key": "WARM-1"})
            lookup = {"key": "BENCH-1"}
            mcp = await timed(calls, lambda: tools.call("tracker__lookup", lookup), "ticket BENCH-1")
        read = ToolCall(id="r", name="read", arguments={"path": "README.md"})
        builtin = await timed(calls, lambda: run_tool(ctx, read), "hello")
        bash = ToolCall(id="b", name="bash", arguments={"command": "true"})
        sandboxed = await timed(calls, lambda: run_tool(ctx, bash), "exit code: 0")
        print(f"MCP server start (sandbox, initialize, tools/list): {start_ms:.0f} ms")
        print(figures("MCP call (tracker__lookup)", mcp))
        print(figures("builtin read (in process)", builtin))
        print(figures("builtin bash `true` (sandboxed)", sandboxed))
        mcp_median, read_median = statistics.median(mcp), statistics.median(builtin)
        print(f"MCP − read: {mcp_median - read_median:.2f} ms a call (median)")
        print(f"transcript records: {sum(1 for kind, _ in records if kind == 'mcp_call')} mcp_call")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    asyncio.run(main(parser.parse_args().calls))
