"""`retry` and `skip`, end to end in-process: the real engine on a bare git remote, GitHub faked.

The rule the help, the plan comment and the failure message state: a skipped story's
dependents stay skipped (they would build on work that does not exist); a retried story
brings back the stories that were skipped only because it failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import StateError
from bot.orchestration.scheduler import resume, runnable
from bot.plan.state import PlanStatus, StoryStatus, update_story
from bot.plan.state_block import decode_state
from tests.execution_support import agent_script, approved_state, make_remote, remote_branches
from tests.harness import REPO, Harness, commented

PRD = """A chain and a loner.

```prd
version: 1
title: Chain
summary: Four files, three of them in a chain.
stories:
  - id: STORY-001
    title: First link
    acceptance_criteria: ["story-001.txt contains the line 'done'"]
  - id: STORY-002
    title: Loner
    acceptance_criteria: ["story-002.txt contains the line 'done'"]
  - id: STORY-003
    title: Second link
    depends_on: [STORY-001]
    acceptance_criteria: ["story-003.txt contains the line 'done'"]
  - id: STORY-004
    title: Third link
    depends_on: [STORY-003]
    acceptance_criteria: ["story-004.txt contains the line 'done'"]
```
"""


@pytest.fixture
async def h(tmp_path: Path):
    # The agent logs outside its worktree, so it runs unconfined (containment is tested elsewhere).
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off") as harness:
        remote = make_remote(tmp_path)
        harness.remote = remote
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.add_issue(REPO, title="Chain", body=PRD)
        flag = tmp_path / "story-001-is-broken"
        flag.write_text("")
        runs = tmp_path / "agent-runs.log"
        script = agent_script(
            tmp_path,
            "agent.sh",
            f'echo "$1" >> {runs}\n'
            f'if [ "$1" = STORY-001 ] && [ -e {flag} ]; then echo "cannot do it" >&2; exit 1; fi\n'
            'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n',
        )
        harness.fake.set_file(
            REPO,
            ".github/plan-cascade.yml",
            f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
            "  sandbox: none\ngates:\n  detect: false\n  strict: true\n  max_retries: 0\n",
        )
        harness.flag, harness.runs = flag, runs
        yield harness


async def _say(h: Harness, body: str) -> None:
    await h.deliver("issue_comment", commented(number=1, body=body, user="maint", association="MEMBER"))
    await h.drain(timeout=180)


def _state(h: Harness):
    (comment,) = h.plan_comments(1)
    return decode_state(comment.body)


def _agent_runs(h: Harness) -> list[str]:
    return h.runs.read_text().split() if h.runs.exists() else []


async def _failed_first(h: Harness) -> None:
    await _say(h, "/plan-cascade plan")
    await _say(h, "/plan-cascade approve")
    state = _state(h)
    assert state.status == PlanStatus.FAILED, (state.stories, _agent_runs(h))
    assert {sid: s.status for sid, s in state.stories.items()} == {
        "STORY-001": StoryStatus.FAILED,
        "STORY-002": StoryStatus.PASSED,
        "STORY-003": StoryStatus.SKIPPED,
        "STORY-004": StoryStatus.SKIPPED,
    }
    assert state.stories["STORY-003"].reason == "depends on STORY-001, which failed"


async def test_skip_keeps_the_dependents_skipped(h: Harness) -> None:
    await _failed_first(h)
    await _say(h, "/plan-cascade skip STORY-001")
    state = _state(h)
    # Nothing is left that may run: the plan ends, and STORY-003 never ran on missing work.
    assert state.status == PlanStatus.COMPLETED, state.note
    statuses = {sid: s.status for sid, s in state.stories.items()}
    assert statuses["STORY-001"] == StoryStatus.SKIPPED and statuses["STORY-002"] == StoryStatus.PASSED
    assert statuses["STORY-003"] == statuses["STORY-004"] == StoryStatus.SKIPPED
    assert state.stories["STORY-001"].reason == "skipped by @maint"
    assert state.stories["STORY-003"].reason == "depends on STORY-001, which was skipped"
    assert "STORY-003" not in _agent_runs(h) and "STORY-004" not in _agent_runs(h)
    assert "plan-cascade/1/story-003" not in remote_branches(h.remote)
    # The plan comment says the same as the code did.
    (comment,) = h.plan_comments(1)
    assert "depends on STORY-001, which was skipped" in comment.body


async def test_retry_runs_the_story_and_the_dependents_it_held_back(h: Harness) -> None:
    await _failed_first(h)
    h.flag.unlink()
    await _say(h, "/plan-cascade retry STORY-001")
    state = _state(h)
    assert state.status == PlanStatus.COMPLETED, state.note
    assert all(s.status == StoryStatus.PASSED for s in state.stories.values())
    assert _agent_runs(h).count("STORY-001") == 2 and _agent_runs(h).count("STORY-002") == 1
    assert {"plan-cascade/1/story-003", "plan-cascade/1/story-004"} <= set(remote_branches(h.remote))


async def test_a_dependent_is_not_retried_before_the_story_it_needs(h: Harness) -> None:
    await _failed_first(h)
    before = len(h.comments(1))
    await _say(h, "/plan-cascade retry STORY-003")
    state = _state(h)
    assert state.status == PlanStatus.FAILED
    assert state.stories["STORY-003"].status == StoryStatus.SKIPPED
    replies = h.comments(1)[before:]
    assert any("STORY-003 depends on STORY-001, which failed: retry STORY-001 too" in r for r in replies)
    assert "STORY-003" not in _agent_runs(h)


def _with(statuses: dict[str, tuple[StoryStatus, str | None]]):
    state = approved_state(PRD.split("```prd\n")[1].split("```")[0])
    for sid, (status, reason) in statuses.items():
        state = update_story(state, sid, status=status, reason=reason)
    return state


def test_a_dependent_of_a_skipped_story_cannot_be_retried() -> None:
    state = _with(
        {
            "STORY-001": (StoryStatus.SKIPPED, "skipped by @maint"),
            "STORY-003": (StoryStatus.SKIPPED, "depends on STORY-001, which was skipped"),
            "STORY-004": (StoryStatus.SKIPPED, "depends on STORY-001, which was skipped"),
        }
    )
    with pytest.raises(StateError, match="STORY-003 depends on STORY-001, which was skipped: `revise`"):
        resume(state, retry=["STORY-003"], actor="maint")
    # ... and the scheduler never starts it by itself.
    pending = update_story(state, "STORY-003", status=StoryStatus.PENDING)
    assert runnable(pending, ["STORY-003"]) == []


def test_retry_brings_back_only_dependents_whose_other_needs_are_met() -> None:
    prd = PRD.replace("    depends_on: [STORY-003]", "    depends_on: [STORY-003, STORY-002]")
    state = approved_state(prd.split("```prd\n")[1].split("```")[0])
    for sid, status, reason in [
        ("STORY-001", StoryStatus.FAILED, "gates failed"),
        ("STORY-002", StoryStatus.FAILED, "gates failed"),
        ("STORY-003", StoryStatus.SKIPPED, "depends on STORY-001, which failed"),
        ("STORY-004", StoryStatus.SKIPPED, "depends on STORY-001, which failed"),
    ]:
        state = update_story(state, sid, status=status, reason=reason)
    after = resume(state, retry=["STORY-001"], actor="maint")
    assert after.stories["STORY-001"].status == after.stories["STORY-003"].status == StoryStatus.PENDING
    # STORY-004 also needs STORY-002, which still failed: it stays skipped.
    assert after.stories["STORY-004"].status == StoryStatus.SKIPPED
    both = resume(state, retry=["STORY-001", "STORY-002"], actor="maint")
    assert all(s.status == StoryStatus.PENDING for s in both.stories.values())


def test_skip_cascades_but_keeps_passed_work() -> None:
    state = _with(
        {"STORY-001": (StoryStatus.FAILED, "gates failed"), "STORY-003": (StoryStatus.PASSED, None)}
    )
    after = resume(state, skip=["STORY-001"], actor="maint")
    assert after.stories["STORY-003"].status == StoryStatus.PASSED
    assert after.stories["STORY-004"].reason == "depends on STORY-001, which was skipped"
    with pytest.raises(StateError, match="unknown stories: STORY-009"):
        resume(state, skip=["STORY-009"], actor="maint")
