"""Exploration before planning with the repository's MCP servers: only `read_only: true` ones."""

from __future__ import annotations

import json
from pathlib import Path

from bot.llm import Completion, ScriptedLLM, tool_reply
from tests.execution_support import make_remote
from tests.harness import REPO, Harness, labeled

SERVER = (Path(__file__).resolve().parents[1] / "mcp_server.py").read_text()
FILES = {"README.md": "# Shop\n", "tools/tracker.py": SERVER}
CONFIG = """
llm:
  quality_review: false
  multi_perspective: never
agent:
  mcp_servers:
    tracker:
      command: [python3, tools/tracker.py]
      tools: [lookup]
      read_only: true
    writer:
      command: [python3, tools/tracker.py]
      tools: [delete_everything]
"""
PRD = {
    "version": 1,
    "title": "Greeting",
    "summary": "Say v2.",
    "stories": [{"id": "STORY-001", "title": "Say v2", "acceptance_criteria": ["the greeting says v2"]}],
}
FINDINGS = {"relevant_files": [{"path": "README.md", "why": "it greets"}], "summary": "See SHOP-1."}


async def test_exploration_gets_the_read_only_servers_tools_only(tmp_path: Path) -> None:
    async with Harness(tmp_path) as h:
        remote = make_remote(tmp_path, FILES)
        h.fake.repo(REPO).clone_url = f"file://{remote}"
        for path, text in {**FILES, ".github/plan-cascade.yml": CONFIG}.items():
            h.fake.set_file(REPO, path, text)
        h.fake.add_issue(REPO, title="Do SHOP-1", body="As the tracker says.")
        llm = ScriptedLLM(
            [
                tool_reply("tracker__lookup", {"key": "SHOP-1"}),
                tool_reply("submit", FINDINGS),
                Completion(text=json.dumps(PRD)),
            ]
        )
        h.services.llm_for = lambda cfg, model: llm
        await h.deliver("issues", labeled(number=1, clone_url=f"file://{remote}"))
        await h.drain()

        assert len(h.plan_comments(1)) == 1
        offered = {t.name for t in llm.calls[0]["tools"]}
        assert offered == {"read", "glob", "grep", "submit", "tracker__lookup"}
        answer = llm.calls[1]["messages"][-1].content
        assert "UNTRUSTED DATA from MCP server tracker" in answer
        assert "ticket SHOP-1: the greeting must say v2" in answer
