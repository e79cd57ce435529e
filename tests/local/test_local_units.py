"""The pure parts of local mode, and `run "description"` planned by an injected LLM."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console

from bot.llm import ScriptedLLM
from bot.local.reporter import LocalReporter, events
from bot.local.runner import LocalContext, RunRequest, start_run
from bot.local.store import LocalRun, RunStore, run_id_for, slugify
from bot.plan.state import PlanStatus, StoryStatus, transition, update_story
from tests.execution_support import agent_script, approved_state
from tests.local.local_support import WRITE_DONE, branches, make_user_repo, prd, script_config
from tests.planning.planning_builders import answer, prd_dict, story

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=False, width=120), buffer


def _record(run_id: str, *, minutes: int, status: PlanStatus = PlanStatus.RUNNING) -> LocalRun:
    state = approved_state(prd([("STORY-001", [])]))
    if status != PlanStatus.APPROVED:
        state = transition(transition(state, PlanStatus.RUNNING, at=AT), status, at=AT)
    at = AT + timedelta(minutes=minutes)
    return LocalRun(
        id=run_id, repo="/r", base_branch="main", branch_prefix=f"plan-cascade/local-{run_id}",
        created_at=at, updated_at=at, state=state,
    )  # fmt: skip


def test_slugs_and_run_ids() -> None:
    assert slugify("Add a CLI: v2!") == "add-a-cli-v2"
    assert slugify("???") == "plan"
    assert len(slugify("x" * 100)) == 40
    first, second = run_id_for("Add a CLI", "h", AT), run_id_for("Add a CLI", "h", AT + timedelta(seconds=1))
    assert first.startswith("add-a-cli-") and first != second


def test_the_store_lists_runs_most_recent_first_and_finds_the_unfinished_one(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    assert store.all() == [] and store.latest_unfinished() is None
    store.save(_record("old-run-aaaaaa", minutes=1))
    store.save(_record("done-run-bbbbbb", minutes=5, status=PlanStatus.COMPLETED))
    (tmp_path / "runs" / "broken.json").write_text("{not json")
    assert [r.id for r in store.all()] == ["done-run-bbbbbb", "old-run-aaaaaa"]
    unfinished = store.latest_unfinished()
    assert unfinished is not None and unfinished.id == "old-run-aaaaaa"
    assert store.load("old-run-aaaaaa").state.status == PlanStatus.RUNNING
    assert not list((tmp_path / "runs").glob(".*.tmp")), "atomic writes leave no temporary file"


def test_events_describe_what_changed() -> None:
    before = approved_state(prd([("STORY-001", []), ("STORY-002", ["STORY-001"])]))
    running = update_story(before, "STORY-001", status=StoryStatus.RUNNING, attempts=1)
    assert [t.plain for t in events(before, running)] == ["… STORY-001 running: Write story-001.txt"]
    retried = update_story(running, "STORY-001", attempts=2)
    assert [t.plain for t in events(running, retried)] == ["  STORY-001 attempt 2"]
    failed = update_story(retried, "STORY-001", status=StoryStatus.FAILED, reason="gates failing")
    assert [t.plain for t in events(retried, failed)] == ["✗ STORY-001 failed: gates failing"]
    assert events(failed, failed) == []


async def test_the_reporter_saves_every_change_and_prints_plain_lines_off_a_terminal(tmp_path: Path) -> None:
    console, buffer = _console()
    store = RunStore(tmp_path)
    record = _record("run-cccccc", minutes=0)
    reporter = LocalReporter(store, record, console=console, clock=lambda: AT)
    assert reporter.use_live is False
    with reporter.showing():
        await reporter.save(update_story(record.state, "STORY-001", status=StoryStatus.RUNNING))
    assert store.load("run-cccccc").state.stories["STORY-001"].status == StoryStatus.RUNNING
    assert buffer.getvalue() == "… STORY-001 running: Write story-001.txt\n"
    live = LocalReporter(store, record, console=Console(file=io.StringIO(), force_terminal=True))
    assert live.use_live is True


async def test_run_with_a_description_plans_with_the_llm(tmp_path: Path) -> None:
    script = agent_script(tmp_path, "agent.sh", WRITE_DONE)
    config = script_config(script) + "llm:\n  quality_review: false\n  multi_perspective: never\n"
    config += "  exploration: false\npublishing:\n  acceptance_review: false\n"  # the plan: the only call
    repo = make_user_repo(tmp_path, config=config)
    verify = {"verification": "grep -qx done story-001.txt"}
    llm = ScriptedLLM([answer(prd_dict(story(1, **verify), title="Write a file"))])
    console, buffer = _console()
    ctx = LocalContext(console=console, llm_for=lambda config, model: llm, clock=lambda: AT)

    code = await start_run(RunRequest(repo=repo, description="Write story-001.txt", yes=True), ctx)

    out = buffer.getvalue()
    assert code == 0, out
    assert len(llm.calls) == 1 and "Write story-001.txt" in llm.calls[0]["messages"][0].content
    assert "Write a file" in out and "1 passed" in out
    (branch,) = branches(repo)
    assert branch.startswith("plan-cascade/local-write-a-file-") and branch.endswith("/batch-1")


async def test_a_declined_approval_runs_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    script = agent_script(tmp_path, "agent.sh", f'echo "$1" >> {calls}\n' + WRITE_DONE)
    repo = make_user_repo(tmp_path, config=script_config(script))
    (tmp_path / "prd.yaml").write_text(prd([("STORY-001", [])]))
    questions: list[str] = []
    console, buffer = _console()
    ctx = LocalContext(console=console, ask=lambda q: questions.append(q) is not None)

    code = await start_run(RunRequest(repo=repo, prd_file=tmp_path / "prd.yaml"), ctx)

    assert code == 0 and questions == ["Approve and run? [y/N] "]
    assert "not approved: nothing was run" in buffer.getvalue()
    assert not calls.exists() and branches(repo) == []
    assert not (repo / ".git" / "plan-cascade").exists()
