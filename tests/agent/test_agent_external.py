"""Command agents as small real shell scripts: success, failure, timeout, prompt file, env."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from bot.agent import CommandAgent, load_transcript, preset_agent
from bot.errors import AgentError
from tests.agent.agent_builders import MakeTask
from tests.processes import live_with_arg, unique_sleep


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "agent.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


async def test_a_command_agent_edits_the_worktree_and_finishes(
    make_task: MakeTask, tmp_path: Path, worktree: Path, home: Path
) -> None:
    agent_sh = script(
        tmp_path,
        'echo "edited by $2" >> README.md\nhead -n 1 "$1"\necho "story $2 done in $(pwd) with HOME=$HOME"\n',
    )
    agent = CommandAgent("mine", f"{agent_sh} {{prompt_file}} {{story_id}}", binary=None)
    task = make_task(prompt="Say hello.\nSecond line.")
    result = await agent.run(task)

    assert result.status == "finished", result.reason
    assert (worktree / "README.md").read_text() == "hello\nedited by STORY-001\n"
    assert result.summary.splitlines() == [
        "Say hello.",
        f"story STORY-001 done in {worktree} with HOME={home}",
    ]
    assert (home / "prompt-STORY-001.md").read_text().startswith("Say hello.")
    assert not list(worktree.glob("prompt-*"))
    records = load_transcript(task.transcript_path)
    assert [r["type"] for r in records] == ["task", "command", "output", "result"]


async def test_placeholders_are_shell_quoted(make_task: MakeTask, tmp_path: Path) -> None:
    odd_home = tmp_path / "home with 'quotes' and $dollar"
    odd_home.mkdir()
    agent = CommandAgent("cat", "cat {prompt_file}", binary="cat")
    result = await agent.run(make_task(home=odd_home, prompt="quoted fine"))
    assert result.status == "finished" and result.summary == "quoted fine"


async def test_a_non_zero_exit_fails_with_the_code_and_the_output_tail(
    make_task: MakeTask, tmp_path: Path
) -> None:
    agent_sh = script(tmp_path, "seq 1 5000\necho 'fatal: could not apply the change' >&2\nexit 3\n")
    result = await CommandAgent("mine", str(agent_sh), binary=None).run(make_task())
    assert result.status == "failed"
    assert result.reason is not None
    assert result.reason.startswith("`mine` exited with code 3\n")
    assert result.reason.endswith("5000\nfatal: could not apply the change")
    assert "\n1\n2\n" not in result.reason and len(result.reason) < 2200


async def test_an_agent_past_its_time_limit_is_killed_with_its_children(
    make_task: MakeTask, tmp_path: Path
) -> None:
    duration = unique_sleep()
    agent_sh = script(tmp_path, f"sleep {duration} &\necho working\nsleep {duration}\n")
    result = await CommandAgent("slow", str(agent_sh), binary=None).run(
        make_task(limits={"max_wall_seconds": 1})
    )

    assert result.status == "limits_exceeded"
    assert result.reason is not None and result.reason.startswith("time limit reached: killed after 1s")
    assert "working" in result.reason
    for _ in range(100):  # SIGKILL is immediate; reaping by init can take a moment
        if not live_with_arg(duration):
            break
        await asyncio.sleep(0.02)
    assert live_with_arg(duration) == [], "a background child survived the timeout"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


async def test_the_command_gets_no_secret_of_ours(
    make_task: MakeTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret_token_value")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-key-value")
    assert os.environ["ANTHROPIC_API_KEY"] == "sk-ant-secret-key-value"
    result = await CommandAgent("env", "env", binary=None).run(make_task())
    assert result.status == "finished"
    assert "PATH=" in result.summary
    assert "ghs_secret_token_value" not in result.summary and "sk-ant-secret" not in result.summary


async def test_a_home_inside_the_worktree_is_refused(make_task: MakeTask, worktree: Path) -> None:
    inside = worktree / "home"
    with pytest.raises(AgentError, match="inside its worktree"):
        await CommandAgent("cat", "cat {prompt_file}", binary=None).run(make_task(home=inside))
    assert not inside.exists()


def test_presets_need_their_binary() -> None:
    claude = preset_agent("claude-code")
    assert claude.binary == "claude" and claude.template.startswith("claude -p ")
    assert "{prompt_file}" in preset_agent("aider").template
    assert preset_agent("codex").template.startswith("codex exec ")
    assert not CommandAgent(
        "x", "definitely-not-installed-xyz", binary="definitely-not-installed-xyz"
    ).available()
    assert CommandAgent("sh", "sh -c true", binary="sh").available()


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("/bin/cat STORY-001 /tmp/wt", ["/bin/cat", "STORY-001", "/tmp/wt"]),
        ("cat 'a file' \"b c\" ''", ["cat", "a file", "b c", ""]),
        ('cat "$(cat /x)"', None),  # an expansion
        ("cat `id`", None),
        ("cat a | wc", None),
        ("cat a; cat b", None),
        ("cat < a", None),
        ("cat ~/a", None),
        ("cat *.py", None),
        ("cat 'a\\b'", None),  # escapes: left to the shell
        ("X=1 cat a", None),  # an assignment
        ("time cat a", None),  # a keyword
        ("cat a\ncat b", None),
        ("cat 'unclosed", None),
        ("no-such-program-anywhere a", None),  # bash says what is missing, as before
    ],
)
def test_only_a_command_a_shell_would_just_split_runs_without_one(
    command: str, words: list[str] | None
) -> None:
    from bot.agent.external import shell_free

    assert shell_free(command, path="/usr/bin:/bin") == words


async def test_a_plain_command_runs_without_a_shell_and_one_that_needs_it_with_one(
    make_task: MakeTask, tmp_path: Path
) -> None:
    from tests.support import audit_threads

    agent_sh = script(tmp_path, 'echo "done $1"\n')
    with audit_threads("subprocess.Popen", lambda args: "/bin/bash" in args[1]) as no_shells:
        plain = await CommandAgent("plain", f"{agent_sh} {{story_id}}", binary=None).run(make_task())
    with audit_threads("subprocess.Popen", lambda args: "/bin/bash" in args[1]) as shells:
        shelled = await CommandAgent("shelled", f"{agent_sh} $(echo {{story_id}})", binary=None).run(
            make_task()
        )
    assert plain.summary == shelled.summary == "done STORY-001"
    assert no_shells == []
    assert shells, "a command substitution still runs in bash"
