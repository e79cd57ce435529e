"""The base check's gates run beside the first batch's agents, not before them.

Setup still runs first on the base (a failure there stops the plan before any agent); the gates
go on in a task while the first batch works, and a story waits for them only to judge its own
gates. The handshakes below go through files outside the worktrees (the sandbox is off): each
side waits for the other with a timeout, so run one after the other they fail instead of hanging.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.errors import StalePlan
from bot.orchestration.engine import execute
from bot.plan.state import PlanState, PlanStatus, StoryStatus
from bot.plan.state_block import decode_state
from bot.sandbox.confinement import Sandbox
from bot.testing.recording import RecordingReporter
from tests.execution_support import agent_script, approved_state, config_for, make_remote, make_run
from tests.harness import REPO, Harness, commented

ONE = (
    "version: 1\ntitle: One\nsummary: s\nstories:\n  - id: STORY-001\n    title: Write\n"
    "    acceptance_criteria: [\"story-001.txt contains the line 'done'\"]\n"
)
WRITE = 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n'
ON_BASE = '[ "${PWD##*/}" = base-check ]'
"""True in the base check's worktree, false in a story's."""


def wait_for(path: Path, seconds: int = 15) -> str:
    return f"for i in $(seq {seconds * 10}); do [ -e {path} ] && break; sleep 0.1; done; [ -e {path} ]"


def gate(command: str) -> str:
    quoted = command.replace("\\", "\\\\").replace('"', '\\"')
    custom = f'  custom:\n    - name: probe\n      command: "{quoted}"\n'
    return "gates:\n  detect: false\n  max_retries: 0\n" + custom


async def test_the_base_gates_run_while_the_first_story_works_and_its_gate_waits_for_them(
    tmp_path: Path,
) -> None:
    """The story's gate finishes first (the base gate waits for it); its verdict still comes from the
    base's result: the gate fails on the base as here, so the story's failure is not held against it."""
    story_gate_ran, base_saw_it = tmp_path / "story-gate-ran", tmp_path / "base-saw-it"
    probe = (
        f"if {ON_BASE}; then {wait_for(story_gate_ran)} && touch {base_saw_it}; exit 1; fi; "
        f"touch {story_gate_ran}; exit 1"
    )
    script = agent_script(tmp_path, "agent.sh", WRITE)
    run = make_run(
        tmp_path,
        make_remote(tmp_path),
        approved_state(ONE),
        config_for(script, gate(probe)),
        sandbox=Sandbox(mode="off"),
    )
    state = await execute(run)

    assert base_saw_it.exists(), "the base gate did not run while the story's gate ran"
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.PASSED, story.reason
    assert story.gates == {"probe": "neutral"}  # judged against the base's failure, as before
    assert state.status == PlanStatus.COMPLETED
    assert state.base_check is not None and [g.conclusion for g in state.base_check.gates] == ["failure"]
    assert run.base_pending is None


async def test_the_agent_runs_while_the_base_gates_do(tmp_path: Path) -> None:
    agent_started, base_saw_it = tmp_path / "agent-started", tmp_path / "base-saw-it"
    probe = f"if {ON_BASE}; then {wait_for(agent_started)} && touch {base_saw_it}; fi; true"
    script = agent_script(tmp_path, "agent.sh", f"touch {agent_started}\n{wait_for(base_saw_it)}\n{WRITE}")
    run = make_run(
        tmp_path,
        make_remote(tmp_path),
        approved_state(ONE),
        config_for(script, gate(probe)),
        sandbox=Sandbox(mode="off"),
    )
    state = await execute(run)

    assert state.stories["STORY-001"].status == StoryStatus.PASSED, state.stories["STORY-001"].reason
    assert state.base_check is not None and [g.conclusion for g in state.base_check.gates] == ["success"]


async def test_a_story_that_fails_before_its_gates_loses_nothing_of_the_base_check(tmp_path: Path) -> None:
    probe = f"if {ON_BASE}; then sleep 1; fi; true"
    script = agent_script(tmp_path, "idle.sh", "true\n")  # changes nothing: fails before any gate
    run = make_run(
        tmp_path,
        make_remote(tmp_path),
        approved_state(ONE),
        config_for(script, gate(probe)),
        sandbox=Sandbox(mode="off"),
    )
    state = await execute(run)

    assert state.stories["STORY-001"].status == StoryStatus.FAILED
    assert state.base_check is not None and [g.conclusion for g in state.base_check.gates] == ["success"]
    assert run.reporter.states[-1].base_check == state.base_check  # saved, so a retry does not run it again
    assert run.base_pending is None


class RevisedMeanwhile(RecordingReporter):
    """Someone revises the plan while the base gates run: saving their result finds a newer plan."""

    async def save(self, state: PlanState, *, important: bool = False) -> None:
        if state.base_check is not None and state.base_check.gates:
            fresh = state.model_copy(update={"plan_hash": "revised", "revision": state.revision + 1})
            raise StalePlan("revised meanwhile", fresh=fresh)
        await super().save(state, important=important)


async def test_the_base_check_stopping_stops_the_batch_it_runs_beside(tmp_path: Path) -> None:
    agent_started, release = tmp_path / "agent-started", tmp_path / "never"
    probe = f"if {ON_BASE}; then {wait_for(agent_started)}; fi; true"
    script = agent_script(tmp_path, "agent.sh", f"touch {agent_started}\n{wait_for(release, 60)}\n{WRITE}")
    run = make_run(
        tmp_path,
        make_remote(tmp_path),
        approved_state(ONE),
        config_for(script, gate(probe)),
        sandbox=Sandbox(mode="off"),
        reporter=RevisedMeanwhile(),
    )
    async with asyncio.timeout(30):  # the agent would wait 60 s: it is stopped with the batch
        state = await execute(run)

    assert run.superseded and "revised" in run.superseded
    assert state.plan_hash == "revised"
    assert run.base_pending is None
    assert [p for p in (tmp_path / "data" / "worktrees").iterdir() if not p.name.startswith(".")] == []


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off") as harness:
        harness.fake.repo(REPO).clone_url = f"file://{make_remote(tmp_path)}"
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.add_issue(REPO, title="One", body=f"One story.\n\n```prd\n{ONE}```\n")
        yield harness


async def test_a_cancel_while_a_story_waits_for_the_base_leaves_no_check_run_running(
    h: Harness, tmp_path: Path
) -> None:
    script = agent_script(tmp_path, "agent.sh", WRITE)
    probe = f"if {ON_BASE}; then sleep 60; fi; true"  # the story's gate is done at once, then waits
    h.fake.set_file(
        REPO,
        ".github/plan-cascade.yml",
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
        f"  sandbox: none\n{gate(probe)}",
    )
    await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan"))
    await h.drain()
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
    )
    running = asyncio.create_task(h.drain(timeout=120))
    async with asyncio.timeout(30):
        while not any(r.status == "in_progress" for r in h.fake.repo(REPO).check_runs.values()):
            await asyncio.sleep(0.05)
    await h.services.extras["cancel_execution"](REPO, 1)
    await running

    runs = list(h.fake.repo(REPO).check_runs.values())
    assert runs and all(r.status == "completed" for r in runs), [(r.name, r.status) for r in runs]
    assert {r.conclusion for r in runs if r.name.endswith("/ probe")} == {"cancelled"}
    state = decode_state(h.plan_comments(1)[0].body)
    assert state is not None and state.status == PlanStatus.CANCELLED
