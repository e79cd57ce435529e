"""The read-only investigation: it reads a commit of the mirror, refuses every other tool, and
stops at its limits with what it spent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from bot.agent.readonly import GitTree, ReadOnlyLimits, Unfinished, investigate
from bot.llm import Completion, ScriptedLLM, Usage, tool_reply
from bot.workspace.git import GitResult, run_git
from tests.execution_support import git, make_remote


class Answer(BaseModel):
    files: list[str]


@pytest.fixture
def tree(tmp_path: Path) -> GitTree:
    remote = make_remote(tmp_path, {"src/deep/secret_name.py": "VALUE = 41\n", "README.md": "# r\n"})
    sha = git("rev-parse", "main", cwd=remote)

    async def mirror_git(*args: str, **bounds: Any) -> GitResult:
        return await run_git(args, cwd=remote, env={"PATH": "/usr/bin:/bin"}, **bounds)

    return GitTree(mirror_git, sha)


async def test_it_reads_globs_and_greps_a_commit_and_submits(tree: GitTree) -> None:
    llm = ScriptedLLM(
        [
            tool_reply("glob", {"pattern": "*.py"}),
            tool_reply("grep", {"pattern": "VALUE = [0-9]+", "glob": "*.py"}),
            tool_reply("read", {"path": "src/deep/secret_name.py"}),
            tool_reply("submit", {"files": ["src/deep/secret_name.py"]}),
        ]
    )
    found = await investigate(llm, tree, system="s", prompt="p", answer=Answer, limits=ReadOnlyLimits())
    assert found.value.files == ["src/deep/secret_name.py"] and found.steps == 4
    assert found.files_read == ["src/deep/secret_name.py"]
    observations = [c["messages"][-1].content for c in llm.calls[1:]]
    assert observations[0] == "src/deep/secret_name.py"
    assert observations[1] == "src/deep/secret_name.py:1:VALUE = 41"
    assert "VALUE = 41" in observations[2]


async def test_writes_commands_and_escapes_are_refused(tree: GitTree, tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            tool_reply("write", {"path": "x.py", "content": "boom"}),
            tool_reply("bash", {"command": f"touch {tmp_path}/pwned"}),
            tool_reply("read", {"path": "../../etc/passwd"}),
            tool_reply("read", {"path": "/etc/passwd"}),
            '{"files": []}',
        ]
    )
    found = await investigate(llm, tree, system="s", prompt="p", answer=Answer, limits=ReadOnlyLimits())
    observations = [c["messages"][-1].content for c in llm.calls[1:]]
    assert observations[0].startswith("refused: this session is read-only")
    assert observations[1].startswith("refused: this session is read-only")
    assert observations[2].startswith("refused:") and observations[3].startswith("refused:")
    assert not (tmp_path / "pwned").exists() and found.value.files == []


async def test_an_invalid_answer_is_sent_back_and_the_limits_stop_it(tree: GitTree) -> None:
    costly = Completion(text="no json here", usage=Usage(input_tokens=100, output_tokens=10), cost_usd=0.01)
    llm = ScriptedLLM([costly] * 10)
    with pytest.raises(Unfinished) as stopped:
        await investigate(
            llm, tree, system="s", prompt="p", answer=Answer, limits=ReadOnlyLimits(max_steps=3)
        )
    assert "step limit reached: 3 model calls of 3" in stopped.value.message
    assert stopped.value.cost_usd == pytest.approx(0.03)
    assert "not valid yet" in llm.calls[1]["messages"][-1].content
