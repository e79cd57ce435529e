"""`execution.backend: actions`: the App's engine dispatches one workflow run per batch and
waits for each story's `plan-cascade / <STORY-ID>` check run; matrix jobs run
`plan-cascade action` in run-story mode (real ones here, or simulated by hand)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.action.inputs import read_inputs
from bot.action.runner import action_main
from bot.action.services import action_services
from bot.github.auth import token_port
from bot.handlers.execution import actions_story_runner, build_run
from bot.handlers.session import open_session
from bot.orchestration.actions_backend import ActionsStoryRunner
from bot.orchestration.actions_contract import StoryReport, story_check_name
from bot.orchestration.engine import execute
from bot.orchestration.run import Run
from bot.plan import extract_prd_block
from bot.plan.state import PlanState, PlanStatus, StoryStatus
from bot.plan.state_block import PLAN_MARKER, decode_state, encode_state
from tests.action.action_support import PRD, TOKEN, ActionWorld, outputs
from tests.execution_support import approved_state, git
from tests.harness import REPO

FILES_GATE = '  custom:\n    - name: files\n      command: "grep -q done story-*.txt"\n'
ACTIONS = "execution:\n  backend: actions\n  workflow: plan-cascade.yml\n"


def world_with_plan(tmp: Path, **kwargs: Any) -> ActionWorld:
    """A repo whose issue #1 carries an approved plan comment written by the bot."""
    world = ActionWorld(tmp, config_extra=ACTIONS, **kwargs)
    prd = extract_prd_block(PRD)
    assert prd is not None
    state = approved_state(prd, repo=REPO, issue=1)
    world.fake.add_comment(
        REPO, 1, body=f"{PLAN_MARKER}\nThe plan.\n{encode_state(state, key=None)}", user="github-actions[bot]"
    )
    return world


async def app_run(world: ActionWorld, *, timeout: float = 60.0) -> tuple[Run, ActionsStoryRunner]:
    """The App's Run for issue #1, as build_run makes it, with the actions story runner."""
    inputs = read_inputs(world.env("issues", {}))
    services, _ = action_services(inputs, data_dir=world.tmp / "app", transport=world.fake.transport())
    session = await open_session(services, repo=REPO, issue=1, installation_id=None)
    config = await session.load_config()
    assert config is not None and config.execution.backend == "actions"
    loaded = await session.load_plan()
    assert loaded is not None
    run = await build_run(session, loaded.state, loaded.comment_id, None)
    runner = actions_story_runner(session, config)
    assert runner.timeout_seconds == 3600 and runner.ref == "main"
    runner.timeout_seconds, runner.poll_seconds, runner.max_poll_seconds = timeout, 0.02, 0.1
    run.story_runner = runner
    return run, runner


Simulate = Callable[[dict[str, str]], Awaitable[None]]


async def execute_with_runners(world: ActionWorld, run: Run, simulate: Simulate) -> PlanState:
    """Drive the engine; answer each new workflow dispatch with `simulate(inputs)`."""
    task = asyncio.create_task(execute(run))
    seen = 0
    async with asyncio.timeout(120):
        while not task.done():
            dispatches = world.fake.repo(REPO).dispatches
            while seen < len(dispatches):
                await simulate(dispatches[seen]["inputs"])
                seen += 1
            await asyncio.sleep(0.02)
    return await task


def comment_state(world: ActionWorld) -> PlanState:
    (comment,) = world.plan_comments()
    state = decode_state(comment.body)
    assert state is not None
    return state


async def test_each_batch_is_one_dispatch_and_matrix_jobs_report_back(tmp_path: Path) -> None:
    world = world_with_plan(tmp_path, gates=FILES_GATE)
    run, _ = await app_run(world)
    story_outputs: list[dict[str, str]] = []

    async def matrix(inputs: dict[str, str]) -> None:
        stories = json.loads(inputs["stories"])
        envs = [world.story_env(inputs, sid) for sid in stories]
        codes = await asyncio.gather(*(action_main(e, transport=world.fake.transport()) for e in envs))
        assert codes == [0] * len(envs)
        story_outputs.extend(outputs(e) for e in envs)

    state = await execute_with_runners(world, run, matrix)
    assert state.status == PlanStatus.COMPLETED, state.note
    dispatches = world.fake.repo(REPO).dispatches
    assert [(d["workflow_id"], d["ref"]) for d in dispatches] == [("plan-cascade.yml", "main")] * 2
    first, second = (d["inputs"] for d in dispatches)
    assert {k: v for k, v in first.items() if k != "dispatch_id"} == {
        "mode": "run-story",
        "issue": "1",
        "batch": "1",
        "stories": '["STORY-001", "STORY-002"]',
        "plan_hash": state.plan_hash,
    }
    assert (second["batch"], second["stories"]) == ("2", '["STORY-003"]')
    assert first["dispatch_id"] != second["dispatch_id"]
    assert [o["story_state"] for o in story_outputs] == ["passed"] * 3
    checks = world.fake.repo(REPO).check_runs.values()
    for sid, story in state.stories.items():
        branch = f"plan-cascade/1/{sid.lower()}"
        assert story.status == StoryStatus.PASSED and story.agent == "actions"
        assert story.commit == git("rev-parse", branch, cwd=world.remote)
        assert story.gates == {"files": "success"}
        (final,) = [c for c in checks if c.name == story_check_name(sid)]
        assert (final.head_sha, final.conclusion) == (story.commit, "success")
        assert StoryReport.parse(final.external_id).attempts == 1  # type: ignore[union-attr]
    assert git("show", "plan-cascade/1/batch-2:story-003.txt", cwd=world.remote) == "done"
    assert sorted(p.head_ref for p in world.fake.repo(REPO).pulls.values()) == [
        "plan-cascade/1/batch-1",
        "plan-cascade/1/batch-2",
    ]
    assert comment_state(world).status == PlanStatus.COMPLETED


async def test_a_failed_runner_fails_its_story_and_skips_dependents(tmp_path: Path) -> None:
    world = world_with_plan(tmp_path)
    run, _ = await app_run(world)
    port = token_port(TOKEN, base_url=world.fake.api_url, transport=world.fake.transport())

    async def by_hand(inputs: dict[str, str]) -> None:
        for sid, ok in (("STORY-001", False), ("STORY-002", True)):
            sha = world.push_story(f"plan-cascade/1/{sid.lower()}", {f"{sid.lower()}.txt": "done\n"})
            report = StoryReport(dispatch_id=inputs["dispatch_id"], story_id=sid, attempts=3, tokens=10)
            await port.create_check_run(
                REPO,
                name=story_check_name(sid),
                head_sha=sha,
                status="completed",
                conclusion="success" if ok else "failure",
                external_id=report.external_id(),
            )

    state = await execute_with_runners(world, run, by_hand)
    assert len(world.fake.repo(REPO).dispatches) == 1, "the dependent batch is never dispatched"
    failed, passed, skipped = (state.stories[s] for s in ("STORY-001", "STORY-002", "STORY-003"))
    assert failed.status == StoryStatus.FAILED and failed.attempts == 3 and failed.tokens == 10
    assert "reported failure" in (failed.reason or "") and "/runs/" in (failed.reason or "")
    assert passed.status == StoryStatus.PASSED
    assert skipped.status == StoryStatus.SKIPPED and "STORY-001" in (skipped.reason or "")
    assert state.status == PlanStatus.FAILED
    (pull,) = world.fake.repo(REPO).pulls.values()
    assert pull.head_ref == "plan-cascade/1/batch-1"
    tree = git("ls-tree", "--name-only", "plan-cascade/1/batch-1", cwd=world.remote).split()
    assert tree == ["README.md", "story-002.txt"], "the failed story is not merged"


async def test_a_runner_that_never_answers_times_out_with_a_link(tmp_path: Path) -> None:
    world = world_with_plan(tmp_path)
    run, _ = await app_run(world, timeout=0.3)

    async def nothing(inputs: dict[str, str]) -> None:
        return None

    state = await execute_with_runners(world, run, nothing)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.FAILED
    assert "no result from GitHub Actions" in (story.reason or "")
    assert "/octo-org/hello-world/actions/workflows/plan-cascade.yml" in (story.reason or "")
    assert state.stories["STORY-003"].status == StoryStatus.SKIPPED


async def test_waiting_is_cancellable(tmp_path: Path) -> None:
    world = world_with_plan(tmp_path)
    run, _ = await app_run(world)
    task = asyncio.create_task(execute(run))
    async with asyncio.timeout(30):
        while not world.fake.repo(REPO).dispatches:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        run.cancel.set()
        state = await task
    assert {s.status for s in state.stories.values()} == {StoryStatus.RUNNING, StoryStatus.PENDING}
    assert len(world.fake.repo(REPO).dispatches) == 1


async def test_a_refused_dispatch_fails_the_batch(tmp_path: Path) -> None:
    world = world_with_plan(tmp_path)
    world.fake.fail_next("POST", r".*/actions/workflows/.*/dispatches", status=422, message="No ref found")
    run, _ = await app_run(world)
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.FAILED
    assert "could not start workflow plan-cascade.yml" in (state.stories["STORY-001"].reason or "")
    assert state.stories["STORY-002"].status == StoryStatus.FAILED, "same batch, same refused dispatch"
    assert "No ref found" in (state.stories["STORY-002"].reason or "")
    assert len(world.fake.requests_to("POST", r".*/dispatches")) == 1


async def test_run_story_refuses_a_changed_plan_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = world_with_plan(tmp_path)
    run, _ = await app_run(world)
    await run.update(lambda s: s.model_copy(update={"status": PlanStatus.RUNNING}), important=True)
    inputs = {"issue": "1", "batch": "1", "plan_hash": "0" * 64, "dispatch_id": "d1", "stories": "[]"}
    env = world.story_env(inputs, "STORY-001")
    assert await action_main(env, transport=world.fake.transport()) == 1
    assert "the plan changed since this batch was dispatched" in capsys.readouterr().out
    (check,) = world.fake.repo(REPO).check_runs.values()
    assert (check.name, check.conclusion) == ("plan-cascade / STORY-001", "failure")
    assert StoryReport.parse(check.external_id).dispatch_id == "d1"  # type: ignore[union-attr]
    head = git("log", "-1", "--format=%H %s", "plan-cascade/1/story-001", cwd=world.remote)
    assert head.split()[0] == check.head_sha and "no changes (the plan changed" in head
    assert outputs(env)["story_state"] == "failed"
