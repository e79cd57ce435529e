"""A plan whose repository configures an MCP server: the story's agent uses its tool, the plan
counts the calls, the transcript records each one, and the batch's pull request body lists them."""

from __future__ import annotations

from pathlib import Path

from bot.agent import load_transcript
from bot.agent.registry import AgentRegistry
from bot.config.load import load_repo_config
from bot.llm import Completion, Message, ScriptedLLM, tool_reply
from bot.orchestration.engine import execute
from bot.plan.records import ToolUse
from bot.plan.state import PlanStatus, StoryStatus
from bot.rendering.pr_body import pr_body
from tests.execution_support import approved_state, make_remote, make_run

PLAN = """
version: 1
title: Ticket notes
summary: Write what the tracker says.
stories:
  - id: STORY-001
    title: Note the ticket
    acceptance_criteria: ["notes.txt holds ticket JIRA-7"]
"""
CONFIG = """
agent:
  default: builtin
  mcp_servers:
    tracker:
      command: [python3, tools/tracker.py]
      tools: [lookup]
gates:
  detect: false
  strict: true
  custom:
    - name: notes
      command: grep -q "ticket JIRA-7" notes.txt
"""


def write_ticket(messages: list[Message]) -> Completion:
    answer = next(m.content for m in reversed(messages) if m.role == "tool")
    return tool_reply("write", {"path": "notes.txt", "content": answer})


async def test_a_story_uses_the_tool_and_the_pull_request_says_so(tmp_path: Path) -> None:
    server = (Path(__file__).parent / "mcp_server.py").read_text()
    remote = make_remote(tmp_path, {"README.md": "# demo\n", "tools/tracker.py": server})
    llm = ScriptedLLM(
        [
            tool_reply("tracker__lookup", {"key": "JIRA-7"}),
            write_ticket,
            tool_reply("finish", {"summary": "noted the ticket"}),
        ]
    )
    run = make_run(
        tmp_path,
        remote,
        approved_state(PLAN),
        load_repo_config(CONFIG),
        agents=AgentRegistry(lambda: llm, {}),
    )
    state = await execute(run)

    assert state.status == PlanStatus.COMPLETED, state.note
    record = state.stories["STORY-001"]
    assert record.status == StoryStatus.PASSED
    assert record.mcp_tools == {"tracker__lookup": ToolUse(calls=1, failed=0)}
    (transcript,) = (tmp_path / "data" / "transcripts").glob("story-001-*.jsonl")
    (call,) = [r for r in load_transcript(transcript) if r["type"] == "mcp_call"]
    assert (call["server"], call["tool"], call["error"]) == ("tracker", "lookup", None)

    body = pr_body(state, 1, ["STORY-001"], plan_url="https://github.test/plan", integration={})
    assert "## MCP tools" in body
    assert "| STORY-001 | `tracker__lookup` | 1 | 0 |" in body


def test_a_pull_request_without_mcp_calls_has_no_mcp_section() -> None:
    body = pr_body(approved_state(PLAN), 1, ["STORY-001"], plan_url="https://github.test/p", integration={})
    assert "MCP tools" not in body
