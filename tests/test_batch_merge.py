"""A batch's merge: in the mirror when its stories merge cleanly (no worktree of its own), in a
worktree when they conflict (the later story redone on the merged batch), the same commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.orchestration import batch
from bot.orchestration.engine import execute
from bot.plan.state import PlanStatus, StoryStatus
from tests.execution_support import agent_script, approved_state, config_for, git, make_remote, make_run

TWO = """
version: 1
title: Two stories
summary: Two stories in one batch, then one on top.
stories:
  - id: STORY-001
    title: First
    acceptance_criteria: ["shared.txt holds a line"]
  - id: STORY-002
    title: Second
    acceptance_criteria: ["shared.txt holds a line"]
  - id: STORY-003
    title: Third
    depends_on: [STORY-001, STORY-002]
    acceptance_criteria: ["story-003.txt holds a line"]
"""
OWN_FILE = 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n'
SAME_FILE = 'echo "$1" > "$2/shared.txt"\n' + OWN_FILE
GATE = "gates:\n  detect: false\n  custom:\n    - name: both\n      command: ls story-00[12].txt\n"


def _added_worktrees(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    added: list[str] = []
    real = batch.add_worktree

    async def add_worktree(mirror: Any, **kwargs: Any) -> Any:
        added.append(kwargs["path"].name)
        return await real(mirror, **kwargs)

    monkeypatch.setattr(batch, "add_worktree", add_worktree)
    return added


def _merges(mirror: Path, branch: str) -> list[str]:
    return git("log", "--merges", "--format=%s|%an", branch, cwd=mirror).splitlines()


async def test_a_clean_batch_is_merged_without_a_worktree_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No integration gate to run (none configured, none detected): the batch's merge commits
    are made in the mirror, and the next batch starts from them."""
    added = _added_worktrees(monkeypatch)
    script = agent_script(tmp_path, "agent.sh", OWN_FILE)
    run = make_run(tmp_path, make_remote(tmp_path), approved_state(TWO), config_for(script))
    state = await execute(run)
    assert state.status == PlanStatus.COMPLETED
    assert added == []
    mirror = run.mirror.path
    assert _merges(mirror, "plan-cascade/7/batch-1") == [
        "Merge STORY-002 into batch 1|Plan Cascade",
        "Merge STORY-001 into batch 1|Plan Cascade",
    ]
    assert git("show", "plan-cascade/7/story-003:story-001.txt", cwd=mirror) == "done"
    assert git("rev-parse", "plan-cascade/7/batch-2^1", cwd=mirror) == git(
        "rev-parse", "plan-cascade/7/batch-1", cwd=mirror
    )


async def test_an_integration_gate_gets_a_worktree_of_the_merged_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = _added_worktrees(monkeypatch)
    script = agent_script(tmp_path, "agent.sh", OWN_FILE)
    run = make_run(tmp_path, make_remote(tmp_path), approved_state(TWO), config_for(script, GATE))
    state = await execute(run)
    assert state.status == PlanStatus.COMPLETED
    assert added == ["batch-1", "batch-2"]
    assert run.reporter.conclusions("batch-1", "both") == ["success"]
    assert run.reporter.conclusions("batch-2", "both") == ["success"]


async def test_stories_that_conflict_are_merged_in_a_worktree_and_the_later_one_redone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = _added_worktrees(monkeypatch)
    script = agent_script(tmp_path, "agent.sh", SAME_FILE)
    run = make_run(tmp_path, make_remote(tmp_path), approved_state(TWO), config_for(script))
    state = await execute(run)
    assert state.status == PlanStatus.COMPLETED, state.note
    assert state.stories["STORY-002"].status == StoryStatus.PASSED
    assert added == ["batch-1"]
    mirror = run.mirror.path
    assert _merges(mirror, "plan-cascade/7/batch-1") == [
        "Merge STORY-002 (rebased) into batch 1|Plan Cascade",
        "Merge STORY-001 into batch 1|Plan Cascade",
    ]
    assert git("show", "plan-cascade/7/batch-1:shared.txt", cwd=mirror) == "STORY-002"


@pytest.mark.parametrize("gates", ["", GATE], ids=["no gate", "an integration gate"])
async def test_a_worktree_an_interrupted_run_left_at_the_batchs_path_is_removed(
    tmp_path: Path, gates: str
) -> None:
    """A crash while a batch had a worktree (its integration gates, a conflict) leaves it: a clean
    merge of that batch later removes it all the same, before the worktree its gates get there."""
    from bot.workspace.worktree import add_worktree

    script = agent_script(tmp_path, "agent.sh", OWN_FILE)
    run = make_run(tmp_path, make_remote(tmp_path), approved_state(TWO), config_for(script, gates))
    await run.mirror.ensure()
    left = run.work_root / "batch-1"
    await add_worktree(run.mirror, branch="plan-cascade/7/batch-1", base_ref="origin/main", path=left)
    assert (left / "README.md").exists()
    state = await execute(run)
    assert state.status == PlanStatus.COMPLETED
    assert not left.exists()
    assert "batch-1" not in git("worktree", "list", cwd=run.mirror.path)


async def test_each_story_is_merged_as_it_is_done_not_after_the_last(tmp_path: Path) -> None:
    """STORY-001 is done two seconds before STORY-002: its merge is made while STORY-002 still
    runs (in the batch's order, onto the base), and the batch's merge takes it up; the commits are
    the ones a merge after the last story makes."""
    script = agent_script(tmp_path, "agent.sh", '[ "$1" = STORY-002 ] && sleep 2\n' + OWN_FILE)
    run = make_run(tmp_path, make_remote(tmp_path), approved_state(TWO), config_for(script))
    state = await execute(run)
    assert state.status == PlanStatus.COMPLETED
    mirror = run.mirror.path
    assert _merges(mirror, "plan-cascade/7/batch-1") == [
        "Merge STORY-002 into batch 1|Plan Cascade",
        "Merge STORY-001 into batch 1|Plan Cascade",
    ]
    first = int(git("log", "-1", "--format=%ct", "plan-cascade/7/batch-1^1", cwd=mirror))
    second_story = int(git("log", "-1", "--format=%ct", "plan-cascade/7/story-002", cwd=mirror))
    assert first < second_story, "STORY-001 was merged before STORY-002 was committed"
    assert git("rev-parse", "plan-cascade/7/batch-1^1^1", cwd=mirror) == git(
        "rev-parse", "origin/main", cwd=mirror
    )


async def test_a_failed_story_between_others_is_left_out_of_the_merges_made_ahead(tmp_path: Path) -> None:
    three = TWO.replace("depends_on: [STORY-001, STORY-002]", "depends_on: []")
    script = agent_script(tmp_path, "agent.sh", '[ "$1" = STORY-002 ] && exit 1\n' + OWN_FILE)
    run = make_run(tmp_path, make_remote(tmp_path), approved_state(three), config_for(script))
    state = await execute(run)
    assert state.stories["STORY-002"].status == StoryStatus.FAILED
    assert _merges(run.mirror.path, "plan-cascade/7/batch-1") == [
        "Merge STORY-003 into batch 1|Plan Cascade",
        "Merge STORY-001 into batch 1|Plan Cascade",
    ]
