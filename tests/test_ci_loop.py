"""The repository's own CI on a batch PR, in-process: the real engine on a bare git remote,
GitHub faked with Actions workflow runs, job logs (behind a redirect), re-runs and drafts.

A test failure naming a story's file → one fix commit from the agent with the log tail in its
prompt → CI passes on the new head; an infrastructure failure → re-run once, no agent; a code
failure beyond `ci.max_fix_attempts` → a draft with the reason; a human push stops the loop.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.plan.state_block import decode_state
from bot.testing.deliveries import load_fixture
from bot.testing.fake_github_actions import add_workflow_run, finish_rerun
from bot.testing.fake_github_forks import workflow_run_event
from tests.execution_support import git, prompt_logging_repo
from tests.harness import INSTALLATION, REPO, Harness, commented

BRANCH = "plan-cascade/1/batch-1"
PRD = """Add.

```prd
version: 1
title: Adder
summary: One function.
stories:
  - id: STORY-001
    title: Add numbers
    acceptance_criteria: ["calc.py defines add(a, b) returning a + b"]
    files: [calc.py]
```
"""
TEST_FAILURE = (
    "2026-11-24T10:00:00.0000000Z ##[group]Run pytest -q\n"
    "FAILED tests/test_calc.py::test_add - AssertionError: assert add(2, 2) == 4 (calc.py line 2)\n"
    "1 failed, 3 passed in 0.12s\n##[error]Process completed with exit code 1.\n"
)
RUNNER_LOST = (
    "The runner has received a shutdown signal. This can happen when the runner service is stopped.\n"
)


@contextlib.asynccontextmanager
async def ci_harness(tmp_path: Path) -> AsyncIterator[Harness]:
    """A plan approved and run: batch 1's PR open, its agent's prompts logged."""
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off") as harness:
        prompts = prompt_logging_repo(
            harness,
            tmp_path,
            title="Adder",
            body=PRD,
            writes='echo "def add(a, b): return a + b  # $RANDOM" >> "$2/calc.py"\n',
            config="publishing:\n  acceptance_review: false\nci:\n  max_fix_attempts: 1\n",
        )
        harness.prompts = prompts
        for body in ("/plan-cascade plan", "/plan-cascade approve"):
            await harness.deliver(
                "issue_comment", commented(number=1, body=body, user="maint", association="MEMBER")
            )
            await harness.drain(timeout=180)
        yield harness


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    async with ci_harness(tmp_path) as harness:
        yield harness


async def _jobs(h: Harness) -> list[Any]:
    from sqlalchemy import select

    from bot.db.models import Job

    async with h.runtime.db.read() as session:
        return list((await session.execute(select(Job))).scalars())


def _pull(h: Harness) -> Any:
    (pull,) = [p for p in h.fake.repo(REPO).pulls.values() if p.head_repo is None]  # not a fork's
    return pull


def _head(h: Harness) -> str:
    return git("rev-parse", BRANCH, cwd=h.remote)


def _agent_runs(h: Harness) -> list[str]:
    return h.prompts.read_text().split("===\n")[:-1]


def _ci_comment(h: Harness) -> str:
    found = [c.body for c in h.fake.comments(REPO, _pull(h).number) if "plan-cascade:ci batch-1" in c.body]
    assert len(found) == 1, "one sticky CI comment, edited in place"
    return found[0]


async def _suite_completed(h: Harness, head: str) -> None:
    """GitHub delivers `workflow_run.completed` for the newest run on `head`."""
    run = max((r for r in h.fake.repo(REPO).workflow_runs.values() if r.head_sha == head), key=lambda r: r.id)
    await h.deliver("workflow_run", workflow_run_event(h.fake, REPO, run, installation=INSTALLATION))
    await h.drain(timeout=180)


async def test_a_test_failure_gets_one_fix_with_the_log_then_ci_passes(h: Harness) -> None:
    first = _head(h)
    assert len(_agent_runs(h)) == 1
    add_workflow_run(
        h.fake, REPO, head_sha=first, head_branch=BRANCH, name="CI", jobs=[("test", "failure", TEST_FAILURE)]
    )
    await _suite_completed(h, first)
    runs = _agent_runs(h)
    assert len(runs) == 2, "the story's agent ran once more, on the batch branch"
    assert "FAILED tests/test_calc.py::test_add - AssertionError" in runs[1]
    assert "STORY-001: Add numbers" in runs[1] and "2026-11-24T10" not in runs[1]
    second = _head(h)
    assert second != first and h.fake.branch_head(REPO, BRANCH) == second
    assert "Fixed in" in _ci_comment(h) and second[:12] in _ci_comment(h)
    # CI passes on the fix: the comment says so, and nothing else runs.
    add_workflow_run(
        h.fake, REPO, head_sha=second, head_branch=BRANCH, name="CI", jobs=[("test", "success", "ok")]
    )
    await _suite_completed(h, second)
    assert "CI passed" in _ci_comment(h) and len(_agent_runs(h)) == 2
    assert not _pull(h).draft
    state = decode_state(h.plan_comments(1)[0].body)
    assert state.batches[0].ci_fixes == 1 and state.batches[0].head_sha == second


async def test_an_infrastructure_failure_is_re_run_once_and_not_sent_to_the_agent(h: Harness) -> None:
    head = _head(h)
    run = add_workflow_run(
        h.fake, REPO, head_sha=head, head_branch=BRANCH, name="CI", jobs=[("test", "failure", RUNNER_LOST)]
    )
    await _suite_completed(h, head)
    assert run.reruns == 1 and len(_agent_runs(h)) == 1
    assert "runner lost" in _ci_comment(h)
    # The same event again (a redelivery, another check suite) does not re-run it twice.
    finish_rerun(h.fake, REPO, run.id, conclusion="failure", log=RUNNER_LOST)
    await _suite_completed(h, head)
    assert run.reruns == 1 and len(_agent_runs(h)) == 1
    assert _pull(h).draft and "came back after a re-run" in _ci_comment(h)


async def test_a_rerun_that_passes_is_ci_passing(h: Harness) -> None:
    head = _head(h)
    run = add_workflow_run(
        h.fake, REPO, head_sha=head, head_branch=BRANCH, name="CI", jobs=[("test", "cancelled", "")]
    )
    await _suite_completed(h, head)
    assert run.reruns == 1
    finish_rerun(h.fake, REPO, run.id, conclusion="success", log="ok")
    await _suite_completed(h, head)
    assert "CI passed" in _ci_comment(h) and not _pull(h).draft


async def test_a_second_code_failure_beyond_the_limit_leaves_a_draft_with_the_reason(h: Harness) -> None:
    first = _head(h)
    add_workflow_run(
        h.fake, REPO, head_sha=first, head_branch=BRANCH, name="CI", jobs=[("test", "failure", TEST_FAILURE)]
    )
    await _suite_completed(h, first)
    second = _head(h)
    add_workflow_run(
        h.fake, REPO, head_sha=second, head_branch=BRANCH, name="CI", jobs=[("test", "failure", TEST_FAILURE)]
    )
    await _suite_completed(h, second)
    assert len(_agent_runs(h)) == 2, "max_fix_attempts: 1"
    assert _pull(h).draft
    comment = _ci_comment(h)
    assert "gave up" in comment and "still fail after 1 fix attempt" in comment
    rollup = [r for r in h.fake.repo(REPO).check_runs.values() if r.name == "plan-cascade"]
    assert (
        rollup and rollup[-1].conclusion == "failure" and rollup[-1].output["title"] == "Batch 1: CI failed"
    )


async def test_a_human_push_stops_the_loop(h: Harness, tmp_path: Path) -> None:
    head = _head(h)
    work = tmp_path / "human"
    git("clone", "-q", "-b", BRANCH, str(h.remote), str(work), cwd=tmp_path)
    (work / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git("commit", "-qam", "Fix it myself", cwd=work, email="human@example.com")
    git("push", "-q", "origin", BRANCH, cwd=work)
    add_workflow_run(
        h.fake, REPO, head_sha=head, head_branch=BRANCH, name="CI", jobs=[("test", "failure", TEST_FAILURE)]
    )
    await _suite_completed(h, head)
    assert len(_agent_runs(h)) == 1 and _head(h) != head
    assert "Stopped watching CI: someone else pushed to the branch" in _ci_comment(h)
    state = decode_state(h.plan_comments(1)[0].body)
    assert state.batches[0].ci_stopped == "someone else pushed to the branch"


async def test_checks_that_do_not_count_are_ignored(h: Harness) -> None:
    text = h.fake.repo(REPO).files["main"][".github/plan-cascade.yml"]
    h.fake.set_file(REPO, ".github/plan-cascade.yml", text.replace("ci:\n", "ci:\n  checks: [build*]\n"))
    head = _head(h)
    add_workflow_run(
        h.fake,
        REPO,
        head_sha=head,
        head_branch=BRANCH,
        name="CI",
        jobs=[("test", "failure", TEST_FAILURE), ("build", "success", "ok")],
    )
    await _suite_completed(h, head)
    assert len(_agent_runs(h)) == 1 and "CI passed" in _ci_comment(h)


async def test_missing_permissions_are_a_note_not_a_crash(h: Harness) -> None:
    head = _head(h)
    run = add_workflow_run(
        h.fake, REPO, head_sha=head, head_branch=BRANCH, name="CI", jobs=[("test", "failure", RUNNER_LOST)]
    )
    h.fake.fail_next(
        "POST",
        rf"/repos/{REPO}/actions/runs/\d+/rerun-failed-jobs",
        status=403,
        message="Resource not accessible by integration",
    )
    await _suite_completed(h, head)
    assert run.reruns == 0
    assert "Resource not accessible by integration" in _ci_comment(h)
    assert "Actions: read and write" in _ci_comment(h)


async def test_checks_still_pending_are_reported_when_their_time_is_up(h: Harness) -> None:
    head = _head(h)
    run = add_workflow_run(
        h.fake, REPO, head_sha=head, head_branch=BRANCH, name="CI", jobs=[("test", "failure", "")]
    )
    h.fake.repo(REPO).check_runs[run.jobs[0]].status = "in_progress"
    h.fake.repo(REPO).check_runs[run.jobs[0]].conclusion = None
    await _suite_completed(h, head)
    assert "Waiting for the checks still running" in _ci_comment(h)
    # A timer job is queued in its own group (never ahead of the plan's jobs), due in 60 minutes.
    timers = [j for j in await _jobs(h) if j.payload.get("timer")]
    assert len(timers) == 1 and timers[0].group_key.endswith("/ci-timer")
    await h.runtime.queue.enqueue(kind="ci_watch", group_key="t", payload=timers[0].payload)
    await h.drain()
    assert "Still pending after 60 minutes" in _ci_comment(h)
    assert "`test` still pending after 60 minutes" in _ci_comment(h)


async def test_a_review_requesting_changes_or_a_cancel_stops_the_loop(h: Harness) -> None:
    head = _head(h)
    pull = _pull(h)
    review: dict[str, Any] = copy.deepcopy(load_fixture("pull_request_review.submitted.1"))
    review["repository"].update({"full_name": REPO, "default_branch": "main"})
    review["installation"] = {"id": INSTALLATION}
    review["review"].update(
        {"state": "changes_requested", "author_association": "MEMBER", "id": 78, "body": "Rename it"}
    )
    review["review"]["user"].update({"login": "maint", "type": "User"})
    review["pull_request"].update({"number": pull.number, "body": h.fake.repo(REPO).issues[pull.number].body})
    review["pull_request"]["head"].update({"ref": BRANCH, "sha": head})
    await h.deliver("pull_request_review", review)
    await h.drain(timeout=180)
    state = decode_state(h.plan_comments(1)[0].body)
    assert state.batches[0].ci_stopped == "a review requested changes"
    new_head = _head(h)
    run = add_workflow_run(
        h.fake,
        REPO,
        head_sha=new_head,
        head_branch=BRANCH,
        name="CI",
        jobs=[("test", "failure", RUNNER_LOST)],
    )
    await _suite_completed(h, new_head)
    assert run.reruns == 0, "the review loop has the PR now"


async def test_a_cancelled_plan_stops_the_loop(h: Harness) -> None:
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade cancel", user="maint", association="MEMBER")
    )
    await h.drain()
    head = _head(h)
    run = add_workflow_run(
        h.fake, REPO, head_sha=head, head_branch=BRANCH, name="CI", jobs=[("test", "failure", RUNNER_LOST)]
    )
    await _suite_completed(h, head)
    assert run.reruns == 0 and len(_agent_runs(h)) == 1
    assert "stopped watching CI on #2" in h.comments(1)[-1]
