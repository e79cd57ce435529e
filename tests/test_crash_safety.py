"""Nothing done twice, nothing lost (issue #13, defect 1): the execution dies at each step boundary
and a fresh run picks it up from what GitHub, the remote and the mirror hold.

A "death" stops the execution where it is (its task is cancelled while parked at the
checkpoint: nothing after it runs, unsaved progress is lost); the restart builds a new run
from the plan comment, as the reclaimed execute job does.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from bot.handlers.execution import build_run
from bot.handlers.session import open_session
from bot.orchestration.engine import execute
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from tests.execution_support import agent_script, git, make_remote
from tests.harness import INSTALLATION, REPO, Harness, commented
from tests.test_publishing import PRD

STORY_BRANCHES = [f"plan-cascade/1/story-00{n}" for n in (1, 2, 3)]
BATCH_BRANCHES = ["plan-cascade/1/batch-1", "plan-cascade/1/batch-2"]


class Death:
    """Parks the run at one checkpoint until the test 'kills' it."""

    def __init__(self, step: str, subject: str) -> None:
        self.step, self.subject = step, subject
        self.hit = asyncio.Event()

    async def __call__(self, step: str, subject: str) -> None:
        if not self.hit.is_set() and (step, subject) == (self.step, self.subject):
            self.hit.set()
            await asyncio.Event().wait()


@pytest.fixture
async def h(tmp_path: Path):
    # The agents log their runs outside their worktrees, which the sandbox forbids: off here.
    async with Harness(tmp_path, PLAN_CASCADE_SANDBOX="off") as harness:
        remote = make_remote(tmp_path)
        git("config", "core.logAllRefUpdates", "always", cwd=remote)  # a reflog counts the pushes
        harness.remote = remote
        harness.calls = tmp_path / "calls.txt"
        script = agent_script(
            tmp_path,
            "ok.sh",
            f'echo "$1" >> {harness.calls}\nid=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n',
        )
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.set_file(
            REPO,
            ".github/plan-cascade.yml",
            f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
            "gates:\n  detect: false\n  strict: true\n  custom:\n    - name: files\n"
            '      command: "grep -q done story-*.txt"\n'
            # One story at a time: the death interrupts exactly the step under test, nothing else.
            "execution:\n  max_parallel: 1\n",
        )
        harness.fake.add_issue(REPO, title="Greetings", body=PRD)
        await harness.deliver("issue_comment", commented(number=1, body="/plan-cascade plan", user="maint"))
        await harness.drain()
        approve = commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
        await harness.deliver("issue_comment", approve)
        await harness.drain()
        yield harness


async def a_run(h: Harness):  # type: ignore[no-untyped-def]
    """What the execute job builds: the plan as GitHub has it, a fresh engine."""
    session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
    await session.load_config()
    loaded = await session.load_plan()
    assert loaded is not None
    run = await build_run(session, loaded.state, loaded.comment_id, None)
    run.job_key = "job-1"
    return run


def pushes(remote: Path, branch: str) -> int:
    done = subprocess.run(
        ["git", "reflog", "show", "--format=%H", f"refs/heads/{branch}"],
        cwd=remote,
        capture_output=True,
        text=True,
        check=False,
    )
    return len(done.stdout.split())


@pytest.mark.parametrize(
    ("step", "subject", "agent_runs"),
    [
        ("agent-finished", "STORY-001", 2),  # dies while the agent works: that session is lost, redone
        ("committed", "STORY-001", 1),
        ("pushed", "STORY-001", 1),
        ("gates-running", "STORY-001", 1),
        ("merged", "batch-1", 1),
        ("opening-pr", "batch-1", 1),
        ("opening-pr", "batch-2", 1),
    ],
)
async def test_a_death_at_each_step_redoes_nothing_that_was_done(
    h: Harness, step: str, subject: str, agent_runs: int
) -> None:
    first = await a_run(h)
    death = Death(step, subject)
    first.checkpoint = death
    task = asyncio.create_task(execute(first))
    await asyncio.wait_for(death.hit.wait(), timeout=120)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    final = await execute(await a_run(h))  # the restart
    assert final.status == PlanStatus.COMPLETED, final.note
    (comment,) = h.plan_comments(1)
    assert decode_state(comment.body).status == PlanStatus.COMPLETED
    runs = Counter(h.calls.read_text().split())
    assert runs == Counter({"STORY-001": agent_runs, "STORY-002": 1, "STORY-003": 1})
    for branch in STORY_BRANCHES:
        story = branch.rsplit("/", 1)[1].upper()
        tags = git("log", "--format=%(trailers:key=Plan-Cascade-Story,valueonly)", branch, cwd=h.remote)
        assert tags.split().count(story) == 1, (
            f"{branch} holds {tags.split().count(story)} commits of {story}"
        )
        assert pushes(h.remote, branch) == 1, f"{branch} was pushed {pushes(h.remote, branch)} times"
    for branch in BATCH_BRANCHES:
        assert pushes(h.remote, branch) == 1, f"{branch} was pushed {pushes(h.remote, branch)} times"
    assert sorted(p.head_ref for p in h.fake.repo(REPO).pulls.values()) == BATCH_BRANCHES
    bodies = [c.body for c in h.fake.comments(REPO, 1)]
    assert len(bodies) == len(set(bodies)), "a comment was posted twice"
    rollups = [r for r in h.fake.repo(REPO).check_runs.values() if r.name == "plan-cascade"]
    assert sorted(r.external_id for r in rollups) == ["batch-1", "batch-2"]


async def test_a_death_during_a_gate_does_not_run_that_storys_agent_again(tmp_path: Path) -> None:
    """The issue's reproduction, without any hook: killed while STORY-001's gate runs."""
    release = tmp_path / "release"
    async with Harness(tmp_path, PLAN_CASCADE_SANDBOX="off") as h:
        remote = make_remote(tmp_path)
        calls = tmp_path / "calls.txt"
        script = agent_script(
            tmp_path,
            "ok.sh",
            f'echo "$1" >> {calls}\nid=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n',
        )
        h.fake.repo(REPO).clone_url = f"file://{remote}"
        h.fake.set_permission(REPO, "maint", "maintain")
        h.fake.set_file(
            REPO,
            ".github/plan-cascade.yml",
            "agent:\n  default: script\n  sandbox: none\n"
            f'  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
            "gates:\n  detect: false\n  strict: true\n  custom:\n    - name: files\n"
            f'      command: "while [ ! -f {release} ]; do sleep 0.05; done; grep -q done story-*.txt"\n',
        )
        h.fake.add_issue(REPO, title="Greetings", body=PRD)
        await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan", user="maint"))
        await h.drain()
        approve = commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
        await h.deliver("issue_comment", approve)
        await h.drain()
        task = asyncio.create_task(execute(await a_run(h)))

        def gate_running() -> bool:
            return any(
                r.name == "plan-cascade / STORY-001 / files" and r.status == "in_progress"
                for r in h.fake.repo(REPO).check_runs.values()
            )

        for _ in range(2400):
            if gate_running():
                break
            await asyncio.sleep(0.05)
        assert gate_running()
        task.cancel()  # the server dies
        with contextlib.suppress(asyncio.CancelledError):
            await task
        release.write_text("go")
        final = await execute(await a_run(h))
        assert final.status == PlanStatus.COMPLETED, final.note
        assert Counter(calls.read_text().split())["STORY-001"] == 1, "STORY-001's agent ran again"
        tags = git(
            "log",
            "--format=%(trailers:key=Plan-Cascade-Plan,valueonly)",
            "plan-cascade/1/story-001",
            cwd=remote,
        )
        assert len([t for t in tags.split() if t]) == 1
