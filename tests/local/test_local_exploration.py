"""`plan-cascade plan` / `run "<description>"` explore the repository's committed HEAD before
planning, read-only, as the server explores the default branch."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from bot.config.load import load_repo_config
from bot.llm import Completion, ScriptedLLM, Usage, tool_reply
from bot.local.planning import plan_description
from bot.local.runner import LocalContext
from tests.execution_support import git
from tests.local.local_support import make_user_repo
from tests.planning.test_planning_exploration import PLAIN, PRD

RULE = "LOYALTY_DISCOUNT_RATE = 0.15  # percent off for members"


def _costly(reply: Completion, cost: float) -> Completion:
    return reply.model_copy(update={"usage": Usage(input_tokens=1000, output_tokens=100), "cost_usd": cost})


def _repo(tmp_path: Path) -> Path:
    repo = make_user_repo(tmp_path)
    rules = repo / "shop" / "rules"
    rules.mkdir(parents=True)
    (rules / "loyalty.py").write_text(f"{RULE}\n\n\ndef apply(total):\n    return total\n")
    (repo / "AGENTS.md").write_text("Keep functions small.\n")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "rules", cwd=repo)
    (repo / "draft.py").write_text("UNCOMMITTED = True\n")  # not at HEAD: never explored
    return repo


async def _plan(repo: Path, llm: ScriptedLLM, config: str):  # type: ignore[no-untyped-def]
    ctx = LocalContext(console=Console(file=io.StringIO()), llm_for=lambda cfg, model: llm)
    return await plan_description(
        repo, "Members pay less at checkout", config=load_repo_config(config), ctx=ctx
    )


async def test_planning_reads_the_committed_head_first(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    findings = {
        "relevant_files": [{"path": "shop/rules/loyalty.py", "why": "holds the discount rule"}],
        "summary": "The rule lives in shop/rules.",
    }
    llm = ScriptedLLM(
        [
            _costly(tool_reply("glob", {"pattern": "**/*.py"}), 0.02),
            _costly(tool_reply("write", {"path": "x.py", "content": "nope"}), 0.02),
            _costly(tool_reply("submit", findings), 0.02),
            _costly(Completion(text=json.dumps(PRD)), 0.1),
        ]
    )
    result = await _plan(repo, llm, PLAIN)
    explorer, planner = llm.calls[:3], llm.calls[3]
    assert all({t.name for t in c["tools"]} == {"read", "glob", "grep", "submit"} for c in explorer)
    listing = llm.calls[1]["messages"][-1].content
    assert "shop/rules/loyalty.py" in listing and "draft.py" not in listing, "HEAD only"
    assert llm.calls[2]["messages"][-1].content.startswith("refused: this session is read-only")
    assert not (repo / "x.py").exists() and git("status", "--porcelain", cwd=repo).strip() == "?? draft.py"
    prompt = planner["messages"][0].content
    assert RULE in prompt and "Keep functions small" in prompt
    assert result.looked_at is not None and "shop/rules/loyalty.py" in result.looked_at
    assert result.cost_usd == pytest.approx(0.16)


async def test_exploration_off_plans_at_once(tmp_path: Path) -> None:
    llm = ScriptedLLM([Completion(text=json.dumps(PRD))])
    result = await _plan(_repo(tmp_path), llm, PLAIN + "  exploration: false\n")
    assert len(llm.calls) == 1 and RULE not in llm.calls[0]["messages"][0].content
    assert result.looked_at is None
