"""The builtin agent with the repository's MCP servers: a real stdio server in the sandbox.

The server (`tests/mcp_server.py`, standard library only) is copied into the repository and
named in `agent.mcp_servers`; a scripted model calls its tools. Nothing reaches the network.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from bot.agent import BuiltinAgent, CommandAgent, load_transcript, preset_agent
from bot.config.load import load_repo_config
from bot.config.mcp import McpServer
from bot.config.mcp_policy import McpPolicy
from bot.llm import Completion, Message, ScriptedLLM, tool_reply
from bot.mcp.relay import McpRelay
from bot.mcp.servers import narrowed_egress
from bot.plan.records import ToolUse
from bot.sandbox.confinement import Sandbox
from tests.agent.agent_builders import MakeTask
from tests.support import make_settings

SERVER = Path(__file__).resolve().parents[1] / "mcp_server.py"


def servers(**fields: Any) -> dict[str, McpServer]:
    """`agent.mcp_servers` with one local server, `tracker`, read from YAML like a repository's."""
    entry = {"command": ["python3", "tools/tracker.py"], **fields}
    return load_repo_config(json.dumps({"agent": {"mcp_servers": {"tracker": entry}}})).agent.mcp_servers


@pytest.fixture(autouse=True)
def tracker(worktree: Path) -> Path:
    """The server, in the repository."""
    path = worktree / "tools" / "tracker.py"
    path.parent.mkdir()
    shutil.copy(SERVER, path)
    return path


def last_tool_output(messages: list[Message]) -> str:
    return next(m.content for m in reversed(messages) if m.role == "tool")


def write_last_output(path: str) -> Any:
    """A model turn that writes what the last tool answered into `path`."""

    def reply(messages: list[Message]) -> Completion:
        return tool_reply("write", {"path": path, "content": last_tool_output(messages)})

    return reply


def offered(llm: ScriptedLLM) -> list[str]:
    return [spec.name for spec in llm.calls[0]["tools"]]


async def test_an_allowed_tool_is_offered_and_its_answer_reaches_the_story(
    make_task: MakeTask, worktree: Path
) -> None:
    llm = ScriptedLLM(
        [
            tool_reply("tracker__lookup", {"key": "JIRA-7"}),
            write_last_output("notes/ticket.txt"),
            tool_reply("finish", {"summary": "wrote the ticket"}),
        ]
    )
    task = make_task(mcp_servers=servers(tools=["lookup"]))
    result = await BuiltinAgent(llm).run(task)

    assert result.status == "finished", result.reason
    assert "ticket JIRA-7: the greeting must say v2" in (worktree / "notes" / "ticket.txt").read_text()
    assert offered(llm)[-1] == "tracker__lookup"
    assert "UNTRUSTED DATA from MCP server tracker" in last_tool_output(llm.calls[2]["messages"][:-1])
    assert "tracker__lookup" in llm.calls[0]["system"]
    assert result.mcp_tools == {"tracker__lookup": ToolUse(calls=1, failed=0)}
    (call,) = [r for r in load_transcript(task.transcript_path) if r["type"] == "mcp_call"]
    assert (call["server"], call["tool"], call["error"]) == ("tracker", "lookup", None)
    assert call["arguments_bytes"] == len(b'{"key": "JIRA-7"}') and call["result_chars"] > 30
    assert call["seconds"] >= 0


async def test_a_tool_not_in_tools_is_neither_offered_nor_callable(make_task: MakeTask) -> None:
    llm = ScriptedLLM(
        [
            tool_reply("tracker__delete_everything", {}),
            tool_reply("tracker__calls", {}),
            tool_reply("finish", {"summary": "done"}),
        ]
    )
    result = await BuiltinAgent(llm).run(make_task(mcp_servers=servers(tools=["lookup", "calls"])))

    assert result.status == "finished"
    assert "tracker__delete_everything" not in offered(llm)
    assert {"tracker__lookup", "tracker__calls"} <= set(offered(llm))
    refused = last_tool_output(llm.calls[1]["messages"])
    assert refused.startswith("error: unknown tool 'tracker__delete_everything'")
    assert '["calls"]' in last_tool_output(llm.calls[2]["messages"])  # the server never saw it
    assert result.mcp_tools == {"tracker__calls": ToolUse(calls=1)}


async def test_the_server_sees_only_the_variables_its_config_names(
    make_task: MakeTask, tmp_path: Path
) -> None:
    environ = {
        "PLAN_CASCADE_MCP_JIRA_TOKEN": "jira-s3cret-value",
        "PLAN_CASCADE_MCP_SLACK_TOKEN": "slack-s3cret-value",
        "ANTHROPIC_API_KEY": "sk-ant-api03-not-for-servers",
        "PLAN_CASCADE_WEBHOOK_SECRET": "webhook-s3cret-value",
        "AWS_SECRET_ACCESS_KEY": "aws-s3cret-value",
    }
    sandbox = make_settings(tmp_path).sandbox_policy(environ=environ)
    config = servers(
        tools=["environment"], env={"JIRA": "Bearer ${PLAN_CASCADE_MCP_JIRA_TOKEN}", "MODE": "test"}
    )
    llm = ScriptedLLM([tool_reply("tracker__environment", {}), tool_reply("finish", {"summary": "done"})])
    result = await BuiltinAgent(llm).run(make_task(mcp_servers=config, sandbox=sandbox))

    assert result.status == "finished"
    seen = last_tool_output(llm.calls[1]["messages"])
    env = json.loads(seen[seen.index("{") : seen.rindex("}") + 1])
    assert env["JIRA"] == "Bearer jira-s3cret-value" and env["MODE"] == "test"
    assert set(env) <= {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "JIRA", "MODE", "PWD", "SHLVL", "_"}
    for value in ("slack-s3cret-value", "sk-ant-api03", "webhook-s3cret-value", "aws-s3cret-value"):
        assert value not in seen


async def test_the_server_cannot_reach_a_host_off_its_allowlist(make_task: MakeTask) -> None:
    reached: list[str] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reached.append("connected")
        writer.close()

    listener = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    sandbox = Sandbox(mcp=McpPolicy(egress=("tracker.example", "*.corp.example")))
    config = servers(
        tools=["reach"], egress=["tracker.example"]
    )  # the repository narrows the operator's list
    llm = ScriptedLLM(
        [
            tool_reply("tracker__reach", {"target": f"127.0.0.1:{port}"}),
            tool_reply("tracker__reach", {"target": "wiki.corp.example:443"}),
            tool_reply("finish", {"summary": "done"}),
        ]
    )
    async with listener:
        result = await BuiltinAgent(llm).run(make_task(mcp_servers=config, sandbox=sandbox))

    assert result.status == "finished"
    loopback = last_tool_output(llm.calls[1]["messages"])
    narrowed = last_tool_output(llm.calls[2]["messages"])
    assert "direct: connected" not in loopback and "proxy: HTTP/1.1 403" in loopback
    assert "proxy: HTTP/1.1 403" in narrowed  # the operator allows it, the repository does not
    assert reached == []


async def test_without_an_allowlist_the_server_has_no_network_at_all(make_task: MakeTask) -> None:
    llm = ScriptedLLM(
        [tool_reply("tracker__reach", {"target": "127.0.0.1:9"}), tool_reply("finish", {"summary": "x"})]
    )
    await BuiltinAgent(llm).run(make_task(mcp_servers=servers(tools=["reach"])))
    said = last_tool_output(llm.calls[1]["messages"])
    assert "proxy: none" in said and "direct: connected" not in said


async def test_failing_and_slow_tools_give_the_agent_an_error_and_the_story_goes_on(
    make_task: MakeTask,
) -> None:
    llm = ScriptedLLM(
        [
            tool_reply("tracker__broken", {}),
            tool_reply("tracker__sleep", {"seconds": 30}),
            tool_reply("tracker__lookup", {"key": "A-1"}),
            tool_reply("finish", {"summary": "done"}),
        ]
    )
    task = make_task(
        mcp_servers=servers(tools=["broken", "sleep", "lookup"]), limits={"tool_timeout_seconds": 1}
    )
    result = await BuiltinAgent(llm).run(task)

    assert result.status == "finished"
    broken, slow, fine = (last_tool_output(llm.calls[n]["messages"]) for n in (1, 2, 3))
    assert broken.startswith("error: tracker__broken failed") and "the tracker is down" in broken
    assert slow.startswith("error: tracker__sleep failed")
    assert "ticket A-1" in fine
    assert result.mcp_tools["tracker__broken"] == ToolUse(calls=1, failed=1)
    assert result.mcp_tools["tracker__sleep"] == ToolUse(calls=1, failed=1)
    errors = [r["error"] for r in load_transcript(task.transcript_path) if r["type"] == "mcp_call"]
    assert errors[0] and errors[1] and errors[2] is None


async def test_a_server_that_does_not_start_leaves_the_agent_its_own_tools(make_task: MakeTask) -> None:
    llm = ScriptedLLM([tool_reply("finish", {"summary": "done"})])
    task = make_task(mcp_servers=servers(command=["python3", "tools/missing.py"], tools=["lookup"]))
    result = await BuiltinAgent(llm).run(task)

    assert result.status == "finished"
    assert not any(name.startswith("tracker__") for name in offered(llm))
    assert "MCP server `tracker` is not available" in llm.calls[0]["messages"][0].content
    (record,) = [r for r in load_transcript(task.transcript_path) if r["type"] == "mcp_server"]
    assert "missing.py" in record["error"]


async def test_every_tool_needs_the_operators_word(make_task: MakeTask, tmp_path: Path) -> None:
    refused = ScriptedLLM([tool_reply("finish", {"summary": "done"})])
    await BuiltinAgent(refused).run(make_task(mcp_servers=servers(tools=["*"])))
    assert not any(name.startswith("tracker__") for name in offered(refused))
    assert "PLAN_CASCADE_MCP_ALLOW_ALL_TOOLS" in refused.calls[0]["messages"][0].content

    allowed = ScriptedLLM([tool_reply("finish", {"summary": "done"})])
    sandbox = Sandbox(mcp=McpPolicy(allow_all_tools=True))
    task = make_task(mcp_servers=servers(tools=["*"]), sandbox=sandbox, transcript_path=tmp_path / "t2.jsonl")
    await BuiltinAgent(allowed).run(task)
    assert "tracker__delete_everything" in offered(allowed) and "tracker__lookup" in offered(allowed)


def test_a_repository_narrows_the_operators_egress_and_never_widens_it() -> None:
    operator = ["*.example.org", "api.tracker.com", "10.0.0.5:8443"]
    assert narrowed_egress(operator, None) == operator
    asked = ["wiki.example.org", "evil.com", "api.tracker.com:8443", "10.0.0.5:8443", "*.example.org"]
    assert narrowed_egress(operator, asked) == ["wiki.example.org", "10.0.0.5:8443", "*.example.org"]
    assert narrowed_egress([], ["wiki.example.org"]) == []


CLI = """\
import json, subprocess, sys
config, out = json.load(open(sys.argv[1])), sys.argv[2]
servers = config["mcpServers"]
if not servers:
    open(out, "w").write(json.dumps({"servers": []}))
    sys.exit(0)
(entry,) = servers.values()
server = subprocess.Popen([entry["command"], *entry["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def ask(ident, method, params):
    message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
    server.stdin.write((json.dumps(message) + "\\n").encode())
    server.stdin.flush()
    return json.loads(server.stdout.readline())


client = {"name": "cli", "version": "0"}
ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client})
server.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\\n')
listed = ask(2, "tools/list", {})["result"]["tools"]
lookup = ask(3, "tools/call", {"name": "tracker__lookup", "arguments": {"key": "CLI-1"}})["result"]
refused = ask(4, "tools/call", {"name": "tracker__delete_everything", "arguments": {}})["result"]
seen = ask(5, "tools/call", {"name": "tracker__calls", "arguments": {}})["result"]
open(out, "w").write(json.dumps({"servers": list(servers), "tools": [t["name"] for t in listed],
    "lookup": lookup, "refused": refused, "seen": seen}))
"""


async def test_a_cli_agent_gets_the_same_allowed_tools_through_the_bots_relay(
    make_task: MakeTask, tmp_path: Path, worktree: Path
) -> None:
    cli = tmp_path / "cli" / "agent.py"
    cli.parent.mkdir()
    cli.write_text(CLI)
    agent = CommandAgent("mcp-cli", f"python3 {cli} {{mcp_config}} {{worktree}}/cli.json", binary=None)
    task = make_task(mcp_servers=servers(tools=["lookup", "calls"]))
    result = await agent.run(task)

    assert result.status == "finished", result.reason
    said = json.loads((worktree / "cli.json").read_text())
    assert said["servers"] == ["plan_cascade"]
    assert sorted(said["tools"]) == ["tracker__calls", "tracker__lookup"]
    assert "ticket CLI-1" in said["lookup"]["content"][0]["text"] and not said["lookup"]["isError"]
    assert said["refused"]["isError"] and "unknown tool" in said["refused"]["content"][0]["text"]
    assert '["lookup", "calls"]' in said["seen"]["content"][0]["text"]  # the server never saw the refused one
    assert result.mcp_tools == {"tracker__lookup": ToolUse(calls=1), "tracker__calls": ToolUse(calls=1)}
    calls = [r["tool"] for r in load_transcript(task.transcript_path) if r["type"] == "mcp_call"]
    assert calls == ["lookup", "calls"]


async def test_a_cli_agent_without_mcp_tools_gets_an_empty_configuration(
    make_task: MakeTask, tmp_path: Path, worktree: Path
) -> None:
    cli = tmp_path / "cli.py"
    cli.write_text(CLI)
    agent = CommandAgent("mcp-cli", f"python3 {cli} {{mcp_config}} {{worktree}}/cli.json", binary=None)
    result = await agent.run(make_task())
    assert result.status == "finished", result.reason
    assert json.loads((worktree / "cli.json").read_text()) == {"servers": []}


async def test_a_template_without_mcp_config_gets_no_configuration_file(make_task: MakeTask) -> None:
    task = make_task()
    result = await CommandAgent("plain", "true {story_id}", binary=None).run(task)
    assert result.status == "finished", result.reason
    assert not (task.home / "mcp-config.json").exists(), "nothing names it: nothing is written"


def test_claude_code_and_codex_are_given_the_relay(make_task: MakeTask, tmp_path: Path) -> None:
    relay = McpRelay(
        folder=tmp_path,
        config_file=tmp_path / "mcp config.json",
        command=("python3", "/r/relay.py", "/r/mcp.sock"),
    )
    task, prompt = make_task(), tmp_path / "prompt.md"
    claude = preset_agent("claude-code").command(prompt_file=prompt, task=task, relay=relay)
    assert shlex.split(claude)[:10] == [
        "claude", "-p", "--permission-mode", "acceptEdits", "--allowedTools", "Bash", "mcp__plan_cascade",
        "--strict-mcp-config", "--mcp-config", str(tmp_path / "mcp config.json"),
    ]  # fmt: skip
    codex = shlex.split(preset_agent("codex").command(prompt_file=prompt, task=task, relay=relay))
    assert codex[:6] == [
        "codex", "exec", "-c", 'mcp_servers.plan_cascade.command="python3"',
        "-c", 'mcp_servers.plan_cascade.args=["/r/relay.py", "/r/mcp.sock"]',
    ]  # fmt: skip
    plain = preset_agent("claude-code").command(prompt_file=prompt, task=task)
    assert "mcp" not in plain and plain.startswith(
        "claude -p --permission-mode acceptEdits --allowedTools Bash <"
    )


async def test_a_server_that_dies_mid_story_gives_errors_and_the_story_goes_on(make_task: MakeTask) -> None:
    llm = ScriptedLLM(
        [
            tool_reply("tracker__crash", {}),
            tool_reply("tracker__lookup", {"key": "A-1"}),
            tool_reply("write", {"path": "after.txt", "content": "still here\n"}),
            tool_reply("finish", {"summary": "done"}),
        ]
    )
    task = make_task(mcp_servers=servers(tools=["crash", "lookup"]), limits={"tool_timeout_seconds": 5})
    result = await BuiltinAgent(llm).run(task)

    assert result.status == "finished", result.reason
    assert last_tool_output(llm.calls[1]["messages"]).startswith("error: tracker__crash failed")
    assert last_tool_output(llm.calls[2]["messages"]).startswith("error: tracker__lookup failed")
    assert result.mcp_tools["tracker__lookup"] == ToolUse(calls=1, failed=1)
