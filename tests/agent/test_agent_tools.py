"""The built-in agent's tools on a real worktree: confinement, edit semantics, search, bash."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bot.agent import TOOL_SPECS, Submitted, ToolContext, run_tool
from bot.llm import ToolCall
from tests.support import bwrap_marker, confined

needs_bwrap = bwrap_marker()


@pytest.fixture
def ctx(worktree: Path, home: Path) -> ToolContext:
    return ToolContext(root=worktree, home=home, deny=(".github/workflows/**",), timeout_s=10)


async def call(ctx: ToolContext, name: str, **arguments: Any) -> str:
    return await run_tool(ctx, ToolCall(id=f"call_{name}", name=name, arguments=arguments))


# --- confinement -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read", {"path": "../outside.txt"}),
        ("read", {"path": "/etc/passwd"}),
        ("write", {"path": "../outside.txt", "content": "x"}),
        ("write", {"path": "/tmp/plan-cascade-escape.txt", "content": "x"}),
        ("write", {"path": "src/../../outside.txt", "content": "x"}),
        ("grep", {"pattern": "root", "path": "/etc"}),
        ("glob", {"pattern": "../*"}),
    ],
)
async def test_paths_outside_the_worktree_are_refused(
    ctx: ToolContext, tmp_path: Path, name: str, arguments: dict[str, Any]
) -> None:
    (tmp_path / "outside.txt").write_text("secret outside\n")
    observation = await call(ctx, name, **arguments)
    assert observation.startswith("refused: ")
    assert (tmp_path / "outside.txt").read_text() == "secret outside\n"
    assert not Path("/tmp/plan-cascade-escape.txt").exists()


async def test_a_symlink_pointing_outside_is_refused_for_read_write_and_grep(
    ctx: ToolContext, worktree: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET\n")
    (worktree / "link.txt").symlink_to(secret)
    (worktree / "linkdir").symlink_to(tmp_path)

    assert (await call(ctx, "read", path="link.txt")).startswith("refused: ")
    assert (await call(ctx, "write", path="link.txt", content="pwned")).startswith("refused: ")
    assert (await call(ctx, "write", path="linkdir/new.txt", content="pwned")).startswith("refused: ")
    assert await call(ctx, "grep", pattern="TOP.ECRET") == "no matches for 'TOP.ECRET'"
    assert secret.read_text() == "TOPSECRET\n"
    assert not (tmp_path / "new.txt").exists()


async def test_git_metadata_and_denied_paths_are_read_only(ctx: ToolContext, worktree: Path) -> None:
    config_before = (worktree / ".git" / "config").read_text()
    refused_git = await call(ctx, "write", path=".git/config", content="[core]\n")
    refused_edit = await call(ctx, "edit", path=".git/config", old="[core]", new="[evil]")
    refused_ci = await call(ctx, "write", path=".github/workflows/ci.yml", content="on: pull_request\n")

    assert refused_git.startswith("refused: ") and ".git" in refused_git
    assert refused_edit.startswith("refused: ")
    assert refused_ci.startswith("refused: ") and "read-only" in refused_ci
    assert (worktree / ".git" / "config").read_text() == config_before
    assert (worktree / ".github" / "workflows" / "ci.yml").read_text() == "on: push\n"
    # Deny globs restrict writes only: the agent may still read the workflow.
    assert "on: push" in await call(ctx, "read", path=".github/workflows/ci.yml")


# --- read / write / edit -----------------------------------------------------------------------


async def test_read_numbers_lines_and_pages(ctx: ToolContext, worktree: Path) -> None:
    (worktree / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    first = await call(ctx, "read", path="long.txt", limit=3)
    assert first.splitlines()[:3] == ["     1\tline 1", "     2\tline 2", "     3\tline 3"]
    assert "7 more lines: call read with offset=4" in first
    last = await call(ctx, "read", path="long.txt", offset=9)
    assert last == "     9\tline 9\n    10\tline 10"
    assert "does not exist" in await call(ctx, "read", path="missing.py")
    assert "past the end" in await call(ctx, "read", path="long.txt", offset=50)


async def test_read_stops_at_its_limit_and_edit_refuses_a_huge_file(ctx: ToolContext, worktree: Path) -> None:
    with (worktree / "huge.txt").open("wb") as handle:  # sparse: text, then 9 MiB of holes
        handle.write(b"word\n" * 2000)
        handle.truncate(9 * 2**20)
    read = await call(ctx, "read", path="huge.txt")
    last = read.splitlines()[-1]
    assert last == "[huge.txt is longer than 4,194,304 bytes: lines after 2000 cannot be read]"
    assert "past the end" in await call(ctx, "read", path="huge.txt", offset=2001)
    edit = await call(ctx, "edit", path="huge.txt", old="word", new="w")
    assert edit.startswith("error:") and "larger than 8,388,608 bytes" in edit


async def test_write_creates_parents_and_reports(ctx: ToolContext, worktree: Path) -> None:
    observation = await call(ctx, "write", path="pkg/sub/mod.py", content="x = 1\ny = 2\n")
    assert observation == "created pkg/sub/mod.py (2 lines)"
    assert (worktree / "pkg" / "sub" / "mod.py").read_text() == "x = 1\ny = 2\n"
    assert (await call(ctx, "write", path="pkg/sub/mod.py", content="z\n")).startswith("overwrote")


async def test_edit_requires_a_unique_match(ctx: ToolContext, worktree: Path) -> None:
    target = worktree / "dup.py"
    target.write_text("a = 1\na = 1\nb = 2\n")

    none = await call(ctx, "edit", path="dup.py", old="c = 3", new="c = 4")
    many = await call(ctx, "edit", path="dup.py", old="a = 1", new="a = 9")
    assert none.startswith("error:") and "0 matches" in none
    assert many.startswith("error:") and "2 times" in many and "replace_all" in many
    assert target.read_text() == "a = 1\na = 1\nb = 2\n"

    assert await call(ctx, "edit", path="dup.py", old="b = 2", new="b = 3") == (
        "edited dup.py: replaced 1 occurrence"
    )
    assert await call(ctx, "edit", path="dup.py", old="a = 1", new="a = 9", replace_all=True) == (
        "edited dup.py: replaced 2 occurrences"
    )
    assert target.read_text() == "a = 9\na = 9\nb = 3\n"


async def test_bad_arguments_and_unknown_tools_are_observations(ctx: ToolContext) -> None:
    missing = await call(ctx, "edit", path="README.md")
    extra = await call(ctx, "read", path="README.md", colour="red")
    unknown = await call(ctx, "rm", path="README.md")
    assert missing.startswith("error: bad arguments for edit") and "old" in missing and "new" in missing
    assert extra.startswith("error: bad arguments for read") and "colour" in extra
    assert unknown.startswith("error: unknown tool 'rm'")


async def test_finish_raises_submitted_with_the_summary(ctx: ToolContext) -> None:
    with pytest.raises(Submitted) as raised:
        await call(ctx, "finish", summary="  Changed the greeting.  ")
    assert raised.value.message == "Changed the greeting."


# --- glob / grep -------------------------------------------------------------------------------


async def test_glob_lists_relative_paths_without_git(ctx: ToolContext, worktree: Path) -> None:
    (worktree / "src" / "pkg").mkdir()
    (worktree / "src" / "pkg" / "deep.py").write_text("")
    python = (await call(ctx, "glob", pattern="**/*.py")).splitlines()
    assert python == ["src/app.py", "src/pkg/deep.py"]
    everything = (await call(ctx, "glob", pattern="**")).splitlines()
    assert "README.md" in everything and not any(p.startswith(".git/") for p in everything)
    assert (await call(ctx, "glob", pattern="*.rs")) == "no files match '*.rs'"


async def test_grep_reports_file_line_text_and_skips_binary_and_git(ctx: ToolContext, worktree: Path) -> None:
    (worktree / "blob.bin").write_bytes(b"\0\x01return 'v1'")
    (worktree / "docs.md").write_text("intro\nreturn 'v1' in docs\n")
    observation = await call(ctx, "grep", pattern=r"return '\w+'")
    assert observation.splitlines() == ["docs.md:2: return 'v1' in docs", "src/app.py:2:     return 'v1'"]
    only_py = await call(ctx, "grep", pattern="return", glob="*.py")
    assert only_py == "src/app.py:2:     return 'v1'"
    assert await call(ctx, "grep", pattern="repositoryformat.ersion") == (
        "no matches for 'repositoryformat.ersion'"
    )
    assert (await call(ctx, "grep", pattern="(")).startswith("error: invalid regular expression")


# --- bash --------------------------------------------------------------------------------------


async def test_bash_runs_in_the_worktree_and_reports_the_exit_code(ctx: ToolContext, worktree: Path) -> None:
    observation = await call(ctx, "bash", command="pwd; echo made > made.txt; exit 4")
    assert observation.splitlines() == ["exit code: 4", str(worktree)]
    assert (worktree / "made.txt").read_text() == "made\n"


async def test_bash_times_out(worktree: Path, home: Path) -> None:
    quick = ToolContext(root=worktree, home=home, timeout_s=0.5)
    observation = await call(quick, "bash", command="echo started; sleep 30")
    assert observation.startswith("timed out after 0.5s")
    assert "started" in observation


@pytest.mark.parametrize("sandbox", ["none", pytest.param("auto", marks=needs_bwrap)])
async def test_bash_sees_no_secret_of_ours(
    worktree: Path, home: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret_token_value")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-key-value")
    assert os.environ["GITHUB_TOKEN"] == "ghs_secret_token_value"
    box = ToolContext(
        root=worktree,
        home=home,
        confinement=confined(worktree, home) if sandbox == "auto" else None,
        timeout_s=10,
    )
    observation = await call(box, "bash", command="env; tr '\\0' '\\n' < /proc/self/environ; echo HOME=$HOME")
    assert observation.startswith("exit code: 0")
    assert f"HOME={home}" in observation
    assert "ghs_secret_token_value" not in observation and "GITHUB_TOKEN" not in observation
    assert "sk-ant-secret-key-value" not in observation and "ANTHROPIC_API_KEY" not in observation


@needs_bwrap
async def test_sandboxed_bash_cannot_write_outside_the_worktree(
    worktree: Path, home: Path, tmp_path: Path
) -> None:
    box = ToolContext(root=worktree, home=home, confinement=confined(worktree, home), timeout_s=10)
    observation = await call(box, "bash", command=f"echo in > inside.txt; echo out > {tmp_path}/outside.txt")
    assert (worktree / "inside.txt").read_text() == "in\n"
    assert not (tmp_path / "outside.txt").exists()
    assert observation.startswith("exit code: ")


def test_tool_specs_describe_every_tool() -> None:
    names = [spec.name for spec in TOOL_SPECS]
    assert names == ["read", "write", "edit", "glob", "grep", "bash", "finish"]
    edit = next(spec for spec in TOOL_SPECS if spec.name == "edit")
    assert edit.input_schema["type"] == "object"
    assert set(edit.input_schema["required"]) == {"path", "old", "new"}
    assert edit.input_schema["properties"]["replace_all"]["default"] is False
    assert all(spec.description for spec in TOOL_SPECS)
