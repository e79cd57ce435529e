"""Issue 27, defect 1: a merged pull request that only *looks* like a batch PR is not the batch.

An outsider forks the repository and opens a harmless pull request from a branch named
`plan-cascade/1/batch-1`, or hides the batch marker in its body; a maintainer merges it. With
`stacking: sequential` batch 2 waits for batch 1's merge: it must go on waiting, and the real
batch PR's merge must still count. The deliveries are built by the fake GitHub as GitHub sends
them (a fork's `head.repo`, `refs/pull/{n}/head`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.github.models import PullRequest
from bot.plan.state import BatchState, PlanStatus
from bot.plan.state_block import decode_state
from bot.rendering.pr_body import batch_marker
from bot.testing.fake_github_forks import open_fork_pull, pull_request_event
from tests.execution_support import agent_script, git, make_remote
from tests.harness import INSTALLATION, REPO, Harness, commented
from tests.test_publishing import PRD, WRITE, config

FORK = "outsider/hello-world"


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path, execute=True) as harness:
        remote = make_remote(tmp_path)
        harness.remote = remote
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.add_issue(REPO, title="Greetings", body=PRD)
        script = agent_script(tmp_path, "ok.sh", WRITE)
        text = config(script, "execution:\n  stacking: sequential\n").replace("  reviewers: [maint]\n", "")
        harness.fake.set_file(REPO, ".github/plan-cascade.yml", text)
        for body in ("/plan-cascade plan", "/plan-cascade approve"):
            await harness.deliver(
                "issue_comment", commented(number=1, body=body, user="maint", association="MEMBER")
            )
            await harness.drain(timeout=180)
        yield harness


def _state(h: Harness):  # type: ignore[no-untyped-def]
    (comment,) = h.plan_comments(1)
    return decode_state(comment.body)


def _ours(h: Harness) -> list[int]:
    return sorted(n for n, p in h.fake.repo(REPO).pulls.items() if p.head_repo is None)


def _harmless_fork_commit(h: Harness, tmp_path: Path) -> tuple[Path, str]:
    work = tmp_path / "fork"
    git("clone", "-q", str(h.remote), str(work), cwd=tmp_path)
    (work / "TYPO.md").write_text("a typo fixed\n")
    git("add", "-A", cwd=work)
    git("commit", "-qm", "Fix a typo", cwd=work, email="outsider@example.com")
    return work, git("rev-parse", "HEAD", cwd=work)


async def _merge(h: Harness, number: int) -> None:
    h.fake.merge_pull(REPO, number)
    payload = pull_request_event(h.fake, REPO, number, sender="maint", installation=INSTALLATION)
    await h.deliver("pull_request", payload)
    await h.drain(timeout=180)


async def test_sequential_plan_waits_for_batch_1(h: Harness) -> None:
    state = _state(h)
    assert state.status == PlanStatus.PAUSED and state.note.startswith("waiting for batch 1 ")
    assert len(_ours(h)) == 1


@pytest.mark.parametrize("disguise", ["branch", "body marker"])
async def test_a_merged_fork_pr_that_looks_like_batch_1_is_not_batch_1(
    h: Harness, tmp_path: Path, disguise: str
) -> None:
    (real,) = _ours(h)
    work, sha = _harmless_fork_commit(h, tmp_path)
    branch = "plan-cascade/1/batch-1" if disguise == "branch" else "fix-typo"
    body = "Fixes a typo." + (f"\n\n{batch_marker(REPO, 1, 1)}" if disguise == "body marker" else "")
    fork = open_fork_pull(h.fake, REPO, fork=FORK, head_ref=branch, head_sha=sha, source=work, body=body)
    payload = pull_request_event(h.fake, REPO, fork.number, sender="maint", installation=INSTALLATION)
    assert payload["pull_request"]["head"]["repo"]["fork"] is True
    await _merge(h, fork.number)
    # The typo fix is on main now, batch 1's code is not: batch 2 must not start from it.
    assert git("show", "main:TYPO.md", cwd=h.remote) == "a typo fixed"
    state = _state(h)
    assert not state.batches[0].merged
    assert state.status == PlanStatus.PAUSED and not state.summary_posted
    assert _ours(h) == [real], "no batch 2 pull request"
    # The real batch PR's merge still counts: batch 2 starts, on a main that holds batch 1.
    await _merge(h, real)
    state = _state(h)
    assert state.batches[0].merged and len(_ours(h)) == 2


def test_merge_problem_names_each_refusal() -> None:
    from bot.plan.stack import merge_problem

    record = BatchState(number=1, pr_number=5, head_sha="a" * 40)
    ours = PullRequest(number=5, merged=True, head_repo=REPO, base_repo=REPO, head_sha="a" * 40)
    assert merge_problem(REPO, record, ours, []) is None
    later = ours.model_copy(update={"head_sha": "b" * 40})
    assert merge_problem(REPO, record, later, ["a" * 40, "b" * 40]) is None
    assert "does not build on" in (merge_problem(REPO, record, later, ["b" * 40]) or "")
    fork = ours.model_copy(update={"head_repo": FORK})
    assert "not octo-org/hello-world" in (merge_problem(REPO, record, fork, []) or "")
    other = ours.model_copy(update={"number": 6})
    assert "#5" in (merge_problem(REPO, record, other, []) or "")
    assert merge_problem(REPO, record, ours.model_copy(update={"merged": False}), []) == "it is not merged"
