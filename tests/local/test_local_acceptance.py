"""Local mode gives each merged batch the acceptance review a batch PR gets on GitHub: the
verdicts are saved, a criterion not met goes back to its agent, and the summary says what was
found before anything is pushed."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from bot.llm import ScriptedLLM
from bot.local.runner import LocalContext, RunRequest, start_run
from bot.local.store import RunStore
from tests.execution_support import agent_script
from tests.local.local_support import branches, make_user_repo, script_config
from tests.planning.planning_builders import answer, prd_dict, story

AT = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def verdict(value: str, evidence: str) -> object:
    return answer(
        {
            "summary": "One file.",
            "verdicts": [{"story_id": "STORY-001", "criterion": 1, "verdict": value, "evidence": evidence}],
        },
        cost=0.05,
    )


async def _run(
    tmp_path: Path, replies: list[object], *, retries: int = 1
) -> tuple[int, str, Path, ScriptedLLM]:
    # Appends, so that a story sent back changes its file and the batch gets a new head.
    script = agent_script(tmp_path, "agent.sh", 'id=$(echo "$1" | tr A-Z a-z)\necho done >> "$2/$id.txt"\n')
    config = (
        script_config(script)
        + "llm:\n  quality_review: false\n  multi_perspective: never\n  exploration: false\n"
        + f"publishing:\n  acceptance_retries: {retries}\n"
    )
    repo = make_user_repo(tmp_path, config=config)
    plan = answer(prd_dict(story(1, verification="grep -qx done story-001.txt"), title="Write a file"))
    llm = ScriptedLLM([plan, *replies])
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, force_terminal=False)
    ctx = LocalContext(console=console, llm_for=lambda config, model: llm, clock=lambda: AT)
    code = await start_run(RunRequest(repo=repo, description="Write story-001.txt", yes=True), ctx)
    return code, buffer.getvalue(), repo, llm


async def test_a_met_criterion_is_reported_and_costs_count(tmp_path: Path) -> None:
    code, out, repo, llm = await _run(tmp_path, [verdict("met", "story-001.txt line 1 says done")])
    assert code == 0, out
    assert len(llm.calls) == 2 and {t.name for t in llm.calls[1]["tools"]} >= {"read", "grep", "submit"}
    assert "acceptance review: 1 of 1 criteria met ($0.05)" in out
    (run,) = RunStore(repo / ".git" / "plan-cascade").all()
    assert [c.verdict for c in run.state.stories["STORY-001"].acceptance] == ["met"]
    assert run.state.review_cost_usd == 0.05
    assert len(branches(repo)) == 1


async def test_a_criterion_not_met_goes_back_once_then_the_summary_says_why(tmp_path: Path) -> None:
    code, out, _, llm = await _run(
        tmp_path, [verdict("not_met", "REASON-L1: no name"), verdict("not_met", "REASON-L2: still none")]
    )
    assert code == 0, out
    assert out.count("… STORY-001 running") == 2, "sent back to its agent once"
    assert len(llm.calls) == 3, "the new head was reviewed again"
    assert "acceptance review: 0 of 1 criteria met" in out
    assert "STORY-001 criterion 1 not met: REASON-L2: still none" in out


async def test_a_review_that_cannot_finish_is_a_note_and_the_branch_still_lands(tmp_path: Path) -> None:
    code, out, repo, _ = await _run(tmp_path, [], retries=0)
    assert code == 0, out
    assert "batch 1: acceptance criteria not reviewed" in out
    assert len(branches(repo)) == 1
