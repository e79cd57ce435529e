"""A whole plan run while GitHub fails 30 % of writes after doing them: every check run of ours
ends completed, and each batch has one pull request."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from bot.testing.fake_github_faults import Faults
from tests.execution_support import agent_script, make_remote
from tests.harness import REPO, Harness, commented
from tests.test_publishing import PRD, WRITE, config

WRITES = rf"/repos/{REPO}/(check-runs(/\d+)?|pulls|issues/\d+/comments|issues/comments/\d+|pulls/\d+/reviews)"


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path, execute=True) as harness:
        remote = make_remote(tmp_path)
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.add_issue(REPO, title="Greetings", body=PRD)
        yield harness


async def test_thirty_percent_of_writes_failing_after_the_work(h: Harness, tmp_path: Path) -> None:
    h.fake.set_file(REPO, ".github/plan-cascade.yml", config(agent_script(tmp_path, "ok.sh", WRITE)))
    await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan"))
    await h.drain()
    h.fake.faults = Faults(seed=28)
    for method in ("POST", "PATCH"):
        h.fake.faults.fail(method, WRITES, when="after", ratio=0.3, times=None)
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
    )
    # Which requests the faults hit depends on the order the stories' requests come in, which
    # varies with the machine's load: now and then one write fails four times in a row (the
    # first send and githubkit's three retries) and the job's attempt fails, as it would on
    # GitHub. The queue runs it again after its backoff; so does the drain (at once).
    await h.drain(timeout=300, retries=3)
    fired = [r for r in h.fake.requests if r.fault == "after"]
    assert len(fired) >= 5, "the faults did not fire: the test proves nothing"
    assert any(r.method == "POST" and r.path.endswith("/check-runs") for r in fired)

    (comment,) = h.plan_comments(1)
    state = decode_state(comment.body)
    assert state.status == PlanStatus.COMPLETED, state.note
    runs = list(h.fake.repo(REPO).check_runs.values())
    assert runs and all(r.status == "completed" for r in runs), [(r.name, r.status) for r in runs]
    pulls = sorted(h.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    assert [p.head_ref for p in pulls] == ["plan-cascade/1/batch-1", "plan-cascade/1/batch-2"]
    rollups = [(r.head_sha, r.external_id) for r in runs if r.name == "plan-cascade"]
    assert len(rollups) == len(set(rollups))


async def test_a_plan_save_github_keeps_refusing_fails_the_attempt_and_the_next_one_resumes(
    h: Harness, tmp_path: Path
) -> None:
    """A plan comment's edit answered 502 four times in a row (GitHub did each edit: the first
    send and three retries): the attempt fails, the queue's next attempt resumes from the saved
    state, and the plan completes with nothing done twice."""
    h.fake.set_file(REPO, ".github/plan-cascade.yml", config(agent_script(tmp_path, "ok.sh", WRITE)))
    await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan"))
    await h.drain()
    (comment,) = h.plan_comments(1)
    h.fake.faults = Faults(seed=1)
    h.fake.faults.fail("PATCH", rf"/repos/{REPO}/issues/comments/{comment.id}", when="after", times=4)
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
    )
    outcomes = await h.drain(timeout=300, retries=1)
    assert outcomes.count("queued") == 1, outcomes
    assert len([r for r in h.fake.requests if r.fault == "after"]) == 4

    (comment,) = h.plan_comments(1)
    state = decode_state(comment.body)
    assert state.status == PlanStatus.COMPLETED, state.note
    pulls = sorted(h.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    assert [p.head_ref for p in pulls] == ["plan-cascade/1/batch-1", "plan-cascade/1/batch-2"]
    runs = list(h.fake.repo(REPO).check_runs.values())
    assert runs and all(r.status == "completed" for r in runs), [(r.name, r.status) for r in runs]
    names = [(r.name, r.head_sha) for r in runs]
    assert len(names) == len(set(names)), "a check run made twice"


async def test_a_cancelled_run_leaves_its_gate_check_runs_completed(h: Harness, tmp_path: Path) -> None:
    slow_gate = config(agent_script(tmp_path, "ok.sh", WRITE)).replace(
        'command: "grep -q done story-*.txt"', 'command: "sleep 60"'
    )
    h.fake.set_file(REPO, ".github/plan-cascade.yml", slow_gate)
    await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan"))
    await h.drain()
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
    )
    running = asyncio.create_task(h.drain(timeout=120))
    async with asyncio.timeout(60):
        while not any(r.status == "in_progress" for r in h.fake.repo(REPO).check_runs.values()):
            await asyncio.sleep(0.05)
    cancel = h.services.extras["cancel_execution"]
    await cancel(REPO, 1)
    await running
    runs = list(h.fake.repo(REPO).check_runs.values())
    assert runs and all(r.status == "completed" for r in runs), [(r.name, r.status) for r in runs]
    assert {r.conclusion for r in runs if r.name.endswith("/ files")} == {"cancelled"}
