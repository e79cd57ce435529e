"""Read a bomb repository (`tests.gitbomb`) the way the bot does, in a process of its own:
`python -m tests.repo_memory_script STEP REPO BASE HEAD`. Prints one JSON line: the memory
high-water mark (VmHWM, KB) once idle and after the step, and what the step observed.

STEP `diff`: the acceptance review's batch diff. STEP `explore`: exploration (instruction
files, the file list) and the read-only tools `ask` and the review use too (read, grep, glob).
STEP `agent-read`: the built-in agent's read of a checked-out file as large as the blob.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

from bot.agent.readonly import GitTree, ReadOnlyLimits
from bot.agent.tools import ToolContext, read
from bot.agent.toolspecs import ReadArgs
from bot.llm import ScriptedLLM, tool_reply
from bot.planning.exploration import explore
from bot.workspace.git import GitResult, git_env, run_git
from tests.gitbomb import LINE

ADDRESS_SPACE = 3 * 2**30
"""A cap on the process's memory so an unbounded read fails here rather than on the host."""


def high_water_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


async def diff(tree: GitTree, base: str) -> dict[str, Any]:
    text, cut = await tree.diff_from(base)
    return {"chars": len(text), "cut": cut}


async def exploration(tree: GitTree, base: str) -> dict[str, Any]:
    llm = ScriptedLLM(
        [
            tool_reply("read", {"path": "big.txt"}),
            tool_reply("read", {"path": "big.txt", "offset": 4_000_000, "limit": 5}),
            tool_reply("grep", {"pattern": "dull"}),
            tool_reply("grep", {"pattern": "work", "path": "d"}),
            tool_reply("glob", {"pattern": "*.txt"}),
            tool_reply("submit", {"relevant_files": [{"path": "big.txt", "why": "it is big"}]}),
        ]
    )
    found = await explore(llm, tree, context="an issue", limits=ReadOnlyLimits())
    observations = [call["messages"][-1].content for call in llm.calls[1:]]
    return {
        "error": found.error,
        "instructions": {k: len(v) for k, v in found.instructions.items()},
        "excerpts": {k: len(v) for k, v in found.excerpts.items()},
        "observations": [o[-400:] for o in observations],
    }


async def agent_read(tree: GitTree, base: str) -> dict[str, Any]:
    """The built-in agent's read of a checked-out file of 200 MB (sparse: text, then zeros)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        with (root / "big.txt").open("wb") as handle:
            handle.write(LINE * 200)
            handle.truncate(200 * 2**20)
        context = ToolContext(root=root, home=root)
        first = read(context, ReadArgs(path="big.txt"))
        deep = read(context, ReadArgs(path="big.txt", offset=150, limit=10))
    return {"observations": [first[-300:], deep[-300:]]}


async def main(step: str, repo: Path, base: str, head: str) -> dict[str, Any]:
    env = git_env()

    async def git(*args: str, **bounds: Any) -> GitResult:
        return await run_git(args, cwd=repo, env=env, **bounds)

    tree = GitTree(git, head)
    await tree.text("small.txt")  # warm up: asyncio's subprocess machinery is loaded
    idle = high_water_kb()
    steps = {"diff": diff, "explore": exploration, "agent-read": agent_read}
    try:
        seen = await steps[step](tree, base)
    except MemoryError:
        seen = {"failed": "MemoryError"}
    return {"idle_kb": idle, "peak_kb": high_water_kb(), "seen": seen}


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    step, repo, base, head = sys.argv[1:5]
    print(json.dumps(asyncio.run(main(step, Path(repo), base, head))))
