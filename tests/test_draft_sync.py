"""A batch PR's draft state follows its latest publication: a retry that makes the integration gates
pass marks the draft ready for review, and one that makes them fail turns the PR back into a draft
(GraphQL, as GitHub requires; the fake refuses to mark a PR that is not a draft ready)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.plan.state import StoryStatus
from bot.plan.state_block import decode_state
from tests.execution_support import agent_script, make_remote
from tests.harness import REPO, Harness, commented

PRD = """Two stories in one batch.

```prd
version: 1
title: Pair
summary: Two files.
stories:
  - id: STORY-001
    title: First
    acceptance_criteria: ["story-001.txt contains the line 'done'"]
  - id: STORY-002
    title: Second
    acceptance_criteria: ["story-002.txt contains the line 'done'"]
```
"""


@pytest.fixture
async def h(tmp_path: Path):
    # The agent and the gate read flags outside the worktree, so they run unconfined.
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off") as harness:
        remote = make_remote(tmp_path)
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.add_issue(REPO, title="Pair", body=PRD)
        broken = tmp_path / "story-001-is-broken"
        gate_fails = tmp_path / "integration-fails"
        script = agent_script(
            tmp_path,
            "agent.sh",
            f'if [ "$1" = STORY-001 ] && [ -e {broken} ]; then echo "cannot do it" >&2; exit 1; fi\n'
            'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n',
        )
        # The gate passes in every story's worktree and, on the merged batch, fails while the flag exists.
        gate = f'case "$HOME" in *home-batch-*) test ! -e {gate_fails};; esac'
        harness.fake.set_file(
            REPO,
            ".github/plan-cascade.yml",
            f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
            f"  sandbox: none\ngates:\n  detect: false\n  strict: true\n  max_retries: 0\n  custom:\n"
            f"    - name: integrated\n      command: '{gate}'\n",
        )
        harness.broken, harness.gate_fails = broken, gate_fails
        yield harness


async def _say(h: Harness, body: str) -> None:
    await h.deliver("issue_comment", commented(number=1, body=body, user="maint", association="MEMBER"))
    await h.drain(timeout=180)


def _pull(h: Harness):  # type: ignore[no-untyped-def]
    (pull,) = h.fake.repo(REPO).pulls.values()
    return pull


async def _first_run_publishes_story_2_alone(h: Harness) -> None:
    h.broken.write_text("")
    await _say(h, "/plan-cascade plan")
    await _say(h, "/plan-cascade approve")
    (comment,) = h.plan_comments(1)
    stories = decode_state(comment.body).stories
    assert (stories["STORY-001"].status, stories["STORY-002"].status) == (
        StoryStatus.FAILED,
        StoryStatus.PASSED,
    )
    h.broken.unlink()


async def test_a_retry_that_passes_the_integration_gate_marks_the_draft_ready(h: Harness) -> None:
    h.gate_fails.write_text("")
    await _first_run_publishes_story_2_alone(h)
    assert _pull(h).draft, "the integration gate failed: a draft"
    h.gate_fails.unlink()
    await _say(h, "/plan-cascade retry STORY-001")
    pull = _pull(h)
    assert not pull.draft, "the gates pass now: ready for review"
    assert "Opened as a draft" not in h.fake.repo(REPO).issues[pull.number].body
    (comment,) = h.plan_comments(1)
    (batch,) = decode_state(comment.body).batches
    assert batch.draft is False and batch.pr_number == pull.number


async def test_a_retry_that_fails_the_integration_gate_turns_the_pr_into_a_draft(h: Harness) -> None:
    await _first_run_publishes_story_2_alone(h)
    assert not _pull(h).draft
    h.gate_fails.write_text("")
    await _say(h, "/plan-cascade retry STORY-001")
    pull = _pull(h)
    assert pull.draft
    assert "draft" in h.fake.repo(REPO).issues[pull.number].body.lower()
    (comment,) = h.plan_comments(1)
    assert decode_state(comment.body).batches[0].draft is True


async def test_when_github_refuses_the_change_the_pr_and_its_body_keep_their_state(h: Harness) -> None:
    await _first_run_publishes_story_2_alone(h)
    h.gate_fails.write_text("")
    h.fake.fail_next("POST", "/graphql", status=403, message="Resource not accessible by integration")
    await _say(h, "/plan-cascade retry STORY-001")
    pull = _pull(h)
    assert not pull.draft
    body = h.fake.repo(REPO).issues[pull.number].body
    assert "Opened as a draft" not in body and "`integrated`: failure" in body
    (comment,) = h.plan_comments(1)
    assert decode_state(comment.body).batches[0].draft is False
    rollup = [r for r in h.fake.repo(REPO).check_runs.values() if r.name == "plan-cascade"]
    assert rollup[-1].conclusion == "failure", "the roll-up still says the gates failed"
