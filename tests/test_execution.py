"""The execution engine on real git repositories, real gate commands and script agents."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.network.route import AGENT_ENV, proxy_env
from bot.orchestration.engine import execute
from bot.plan.state import PlanStatus, StoryStatus, update_story
from bot.sandbox.confinement import Sandbox
from tests.execution_support import (
    agent_script,
    approved_state,
    config_for,
    counted,
    git,
    make_remote,
    make_run,
    remote_branches,
)

THREE_INDEPENDENT = """
version: 1
title: Three files
summary: Write three files.
stories:
  - id: STORY-001
    title: First file
    acceptance_criteria: ["story-001.txt contains the line 'done'"]
  - id: STORY-002
    title: Second file
    acceptance_criteria: ["story-002.txt contains the line 'done'"]
  - id: STORY-003
    title: Third file
    acceptance_criteria: ["story-003.txt contains the line 'done'"]
"""

CHAIN = """
version: 1
title: A chain
summary: Three stories, the third independent.
stories:
  - id: STORY-001
    title: Base
    acceptance_criteria: ["story-001.txt contains the line 'done'"]
  - id: STORY-002
    title: Built on base
    depends_on: [STORY-001]
    acceptance_criteria: ["story-002.txt contains the line 'done'"]
  - id: STORY-003
    title: Independent
    acceptance_criteria: ["story-003.txt contains the line 'done'"]
"""

WRITE_FILE = 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n'
GATE = (
    "gates:\n  detect: false\n  strict: true\n  custom:\n    - name: files\n"
    '      command: "grep -q done story-*.txt"\n'
)


async def test_parallel_stories_run_in_separate_worktrees(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    script = agent_script(
        tmp_path,
        "slow.sh",
        f'echo "$1 start $(date +%s.%N) $2" >> {log}\nsleep 1\n{WRITE_FILE}'
        f'echo "$1 end $(date +%s.%N)" >> {log}\n',
    )
    remote = make_remote(tmp_path)
    # The agents log to a file outside their worktrees: a test instrument the sandbox forbids.
    run = make_run(
        tmp_path,
        remote,
        approved_state(THREE_INDEPENDENT),
        config_for(script, GATE),
        sandbox=Sandbox(mode="off"),
    )
    state = await execute(run)
    assert state.status == PlanStatus.COMPLETED, state.note
    assert all(s.status == StoryStatus.PASSED for s in state.stories.values())
    starts = {
        line.split()[0]: (float(line.split()[2]), line.split()[3])
        for line in log.read_text().splitlines()
        if " start " in line
    }
    ends = {
        line.split()[0]: float(line.split()[2]) for line in log.read_text().splitlines() if " end " in line
    }
    assert len({wt for _, wt in starts.values()}) == 3, "one worktree per story"
    assert max(t for t, _ in starts.values()) < min(ends.values()), "the three ran at the same time"
    assert remote_branches(remote) == [
        "main",
        "plan-cascade/7/story-001",
        "plan-cascade/7/story-002",
        "plan-cascade/7/story-003",
    ]
    log_line = git("log", "-1", "--format=%an <%ae>%n%B", "plan-cascade/7/story-002", cwd=remote)
    assert log_line.startswith("Plan Cascade <plan-cascade[bot]@users.noreply.github.com>")
    assert "STORY-002: Second file" in log_line
    assert f"Plan-Cascade-Plan: {state.plan_hash}" in log_line
    assert not any((tmp_path / "data" / "worktrees").glob("story-*")), "worktrees removed"


async def test_gate_failure_then_success_on_retry(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    script = agent_script(
        tmp_path,
        "flaky.sh",
        counted(counter) + 'id=$(echo "$1" | tr A-Z a-z)\n'
        'if [ $n -ge 2 ]; then echo done > "$2/$id.txt"; else echo oops > "$2/$id.txt"; fi\n',
    )
    remote = make_remote(tmp_path)
    prd = THREE_INDEPENDENT.split("  - id: STORY-002")[0]
    run = make_run(
        tmp_path, remote, approved_state(prd), config_for(script, GATE), sandbox=Sandbox(mode="off")
    )
    state = await execute(run)
    story = state.stories["STORY-001"]
    assert story.status == StoryStatus.PASSED and story.attempts == 2
    assert run.reporter.conclusions("STORY-001", "files") == ["failure", "success"]
    assert git("show", "plan-cascade/7/story-001:story-001.txt", cwd=remote) == "done"


async def test_a_failing_story_skips_its_dependents_only(tmp_path: Path) -> None:
    script = agent_script(
        tmp_path,
        "fail1.sh",
        'id=$(echo "$1" | tr A-Z a-z)\n'
        'if [ "$1" = STORY-001 ]; then echo nope > "$2/$id.txt"; else echo done > "$2/$id.txt"; fi\n',
    )
    remote = make_remote(tmp_path)
    gate = GATE.replace("grep -q done story-*.txt", "! grep -L done story-*.txt | grep -q .")
    run = make_run(tmp_path, remote, approved_state(CHAIN), config_for(script, gate + "  max_retries: 1\n"))
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.FAILED
    assert state.stories["STORY-001"].attempts == 2
    assert state.stories["STORY-002"].status == StoryStatus.SKIPPED
    assert "STORY-001" in state.stories["STORY-002"].reason
    assert state.stories["STORY-003"].status == StoryStatus.PASSED
    assert state.status == PlanStatus.FAILED
    assert any("STORY-001" in m for m in run.reporter.messages)


async def test_reflection_turns_a_failure_into_a_revision_awaiting_approval(tmp_path: Path) -> None:
    import json

    from bot.llm import ScriptedLLM

    script = agent_script(
        tmp_path,
        "fail1.sh",
        'id=$(echo "$1" | tr A-Z a-z)\n'
        'if [ "$1" = STORY-001 ]; then echo nope > "$2/$id.txt"; else echo done > "$2/$id.txt"; fi\n',
    )
    remote = make_remote(tmp_path)
    gate = GATE.replace("grep -q done story-*.txt", "! grep -L done story-*.txt | grep -q .")
    reflection = {
        "assessment": "needs_adjustment",
        "summary": "STORY-001 is too big; split it.",
        "adjustments": [
            {
                "kind": "add_before",
                "story_id": "STORY-001",
                "reason": "prepare",
                "story": {
                    "id": "STORY-004",
                    "title": "Prepare the base",
                    "acceptance_criteria": ["prep.txt exists with 1 line"],
                },
            }
        ],
    }
    llm = ScriptedLLM([json.dumps(reflection)])
    run = make_run(
        tmp_path,
        remote,
        approved_state(CHAIN),
        config_for(script, gate + "  max_retries: 0\n"),
        reflection_llm=llm,
    )
    state = await execute(run)
    assert state.status == PlanStatus.AWAITING_APPROVAL
    assert (
        state.revision == 2 and state.source == "reflection" and state.approvals == []
    ) or state.current_approvals() == []
    assert [s.id for s in state.prd.stories][:2] == ["STORY-004", "STORY-001"]
    assert "STORY-004" in state.prd.story("STORY-001").depends_on
    assert state.stories["STORY-003"].status == StoryStatus.PASSED, "passed work is kept"
    assert "split" in (state.note or "")


async def test_a_reflection_that_only_retries_needs_a_fresh_approval(tmp_path: Path) -> None:
    """Retrying unchanged gives revision N+1 the same PRD hash; revision N's approvals must not count."""
    import json

    from bot.llm import ScriptedLLM
    from bot.plan.approval import add_approval
    from bot.plan.state import Approval

    script = agent_script(tmp_path, "nope.sh", 'id=$(echo "$1" | tr A-Z a-z)\necho nope > "$2/$id.txt"\n')
    reflection = {
        "assessment": "on_track",
        "summary": "A flaky failure; try again.",
        "adjustments": [{"kind": "retry", "story_id": "STORY-001", "reason": "flaky"}],
    }
    first = approved_state(CHAIN).model_copy(update={"required_approvals": 2})
    first, _ = add_approval(
        first, Approval(user="other", at=first.created_at, via="command", plan_hash=first.plan_hash)
    )
    assert first.status == PlanStatus.APPROVED
    run = make_run(
        tmp_path,
        make_remote(tmp_path),
        first,
        config_for(script, GATE + "  max_retries: 0\n"),
        reflection_llm=ScriptedLLM([json.dumps(reflection)]),
    )
    state = await execute(run)
    assert state.status == PlanStatus.AWAITING_APPROVAL and state.revision == 2
    assert state.plan_hash == first.plan_hash, "the PRD did not change"
    assert state.current_approvals() == []
    # One fresh approval of two needed: revision 1's approvals do not fill the gap.
    again, outcome = add_approval(
        state, Approval(user="maint", at=state.updated_at, via="command", plan_hash=state.plan_hash)
    )
    assert outcome == "approval recorded; 1 more needed" and again.status == PlanStatus.AWAITING_APPROVAL


async def test_no_secret_reaches_an_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_supersecret1234")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret5678")
    monkeypatch.setenv("PLAN_CASCADE_WEBHOOK_SECRET", "whsec-9999")
    script = agent_script(tmp_path, "env.sh", 'env > "$2/env.txt"\n' + WRITE_FILE)
    remote = make_remote(tmp_path)
    prd = THREE_INDEPENDENT.split("  - id: STORY-002")[0]
    run = make_run(tmp_path, remote, approved_state(prd), config_for(script))
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.PASSED
    env = git("show", "plan-cascade/7/story-001:env.txt", cwd=remote)
    assert "supersecret" not in env and "sk-ant" not in env and "whsec" not in env
    names = {line.split("=", 1)[0] for line in env.splitlines() if "=" in line}
    routed = {*proxy_env(), *AGENT_ENV}  # its way out through the egress proxy: no secret in them
    assert names <= {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "PWD", "SHLVL", "_", "OLDPWD", *routed}, names


async def test_an_agent_that_changes_nothing_fails_the_story(tmp_path: Path) -> None:
    script = agent_script(tmp_path, "lazy.sh", "true\n")
    remote = make_remote(tmp_path)
    prd = THREE_INDEPENDENT.split("  - id: STORY-002")[0]
    run = make_run(tmp_path, remote, approved_state(prd), config_for(script))
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.FAILED
    assert "changed nothing" in state.stories["STORY-001"].reason


async def test_cost_limit_pauses_the_plan(tmp_path: Path) -> None:
    from bot.agent.registry import AgentRegistry
    from bot.llm import Completion, ScriptedLLM, Usage, tool_reply

    def expensive(reply: Completion) -> Completion:
        return reply.model_copy(
            update={"cost_usd": 0.8, "usage": Usage(input_tokens=1000, output_tokens=100)}
        )

    replies = []
    for n in (1, 2, 3):
        replies += [
            expensive(tool_reply("write", {"path": f"story-00{n}.txt", "content": "done\n"})),
            expensive(tool_reply("finish", {"summary": f"wrote story-00{n}.txt"})),
        ]
    llm = ScriptedLLM(replies)
    remote = make_remote(tmp_path)
    config = config_for(
        agent_script(tmp_path, "unused.sh", "true\n"),
        "execution:\n  max_parallel: 1\nlimits:\n  max_cost_usd: 2.0\n",
    ).model_copy()
    from bot.config.load import load_repo_config

    config = load_repo_config(
        "agent:\n  default: builtin\n  sandbox: none\ngates:\n  detect: false\n  strict: true\n"
        "execution:\n  max_parallel: 1\nlimits:\n  max_cost_usd: 2.0\n"
    )
    run = make_run(
        tmp_path, remote, approved_state(THREE_INDEPENDENT), config, agents=AgentRegistry(lambda: llm, {})
    )
    state = await execute(run)
    assert state.status == PlanStatus.PAUSED
    assert "max_cost_usd" in state.note
    passed = [sid for sid, s in state.stories.items() if s.status == StoryStatus.PASSED]
    assert len(passed) == 2 and state.stories["STORY-003"].status == StoryStatus.PENDING
    assert any("2.00" in m or "$2" in m for m in run.reporter.messages)


async def test_restart_resumes_without_rerunning_finished_stories(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    script = agent_script(tmp_path, "count.sh", f'echo "$1" >> {calls}\n' + WRITE_FILE)
    remote = make_remote(tmp_path)
    state = approved_state(THREE_INDEPENDENT)
    first = make_run(tmp_path, remote, state, config_for(script, GATE))
    done = await execute(first)
    assert done.status == PlanStatus.COMPLETED
    # As if the server died mid-batch: STORY-003 was running, the others had passed.
    interrupted = update_story(
        done.model_copy(update={"status": PlanStatus.RUNNING}),
        "STORY-003",
        status=StoryStatus.RUNNING,
        attempts=1,
    )
    calls.write_text("")
    again = make_run(tmp_path, remote, interrupted, config_for(script, GATE))
    final = await execute(again)
    assert final.status == PlanStatus.COMPLETED
    assert calls.read_text().split() == [] or calls.read_text().split() == ["STORY-003"]
    assert "STORY-001" not in calls.read_text() and "STORY-002" not in calls.read_text()


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            found.append(int(pid))
    return found


async def test_cancel_leaves_no_processes_and_no_worktrees(tmp_path: Path) -> None:
    marker = f"{314000 + os.getpid() % 1000}.{time.time_ns() % 1000:03d}"  # unique: never fooled by leftovers
    script = agent_script(tmp_path, "hang.sh", f"sleep {marker} &\nsleep {marker}\n")
    remote = make_remote(tmp_path)
    run = make_run(tmp_path, remote, approved_state(THREE_INDEPENDENT), config_for(script))
    task = asyncio.create_task(execute(run))
    for _ in range(200):
        if len(_processes_with(marker)) >= 3:
            break
        await asyncio.sleep(0.05)
    assert _processes_with(marker), "the agents started"
    run.cancel.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)
    assert _processes_with(marker) == []
    assert [p for p in (tmp_path / "data" / "worktrees").glob("story-*")] == []


async def test_without_a_publisher_later_batches_still_start_from_the_merged_batch(tmp_path: Path) -> None:
    script = agent_script(tmp_path, "ok.sh", WRITE_FILE)
    remote = make_remote(tmp_path)
    run = make_run(tmp_path, remote, approved_state(CHAIN), config_for(script))
    state = await execute(run)
    assert state.status == PlanStatus.COMPLETED
    # STORY-002 started from batch 1's merge, so its branch holds STORY-001's file too.
    assert git("show", "plan-cascade/7/story-002:story-001.txt", cwd=remote) == "done"


async def test_parallel_stories_naming_the_same_file_are_warned_about(tmp_path: Path) -> None:
    prd = THREE_INDEPENDENT.replace(
        "    title: First file\n", "    title: First file\n    files: [shared.txt]\n"
    ).replace("    title: Second file\n", "    title: Second file\n    files: [shared.txt]\n")
    script = agent_script(tmp_path, "ok.sh", WRITE_FILE)
    remote = make_remote(tmp_path)
    run = make_run(tmp_path, remote, approved_state(prd), config_for(script))
    state = await execute(run)
    (warning,) = state.warnings
    assert "STORY-001 and STORY-002" in warning and "shared.txt" in warning
    first_running = next(
        s for s in run.reporter.states if s.stories["STORY-001"].status == StoryStatus.RUNNING
    )
    assert first_running.warnings == [warning], "the warning is saved before the batch starts"


async def test_the_tool_path_reaches_agents_and_gates(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "house-tool").write_text("#!/bin/bash\necho house-tool-ran\n")
    (tools / "house-tool").chmod(0o755)
    script = agent_script(
        tmp_path, "uses-tool.sh", 'id=$(echo "$1" | tr A-Z a-z)\nhouse-tool > "$2/$id.txt"\n'
    )
    gate = "gates:\n  detect: false\n  strict: true\n  custom:\n    - name: tool\n      command: house-tool\n"
    remote = make_remote(tmp_path)
    prd = THREE_INDEPENDENT.split("  - id: STORY-002")[0]
    run = make_run(
        tmp_path, remote, approved_state(prd), config_for(script, gate), tool_path=f"{tools}:/usr/bin:/bin"
    )
    state = await execute(run)
    assert state.stories["STORY-001"].status == StoryStatus.PASSED, state.stories["STORY-001"].reason
    assert git("show", "plan-cascade/7/story-001:story-001.txt", cwd=remote) == "house-tool-ran"
    assert run.reporter.conclusions("STORY-001", "tool") == ["success"]


def held_until(event: asyncio.Event, real: Any, seen: list[bool]) -> Any:
    """`real` (a removal), started only once `event` is set: `seen` says, for each call, whether it
    was set within 5 s (False: whatever sets it waited for this removal)."""

    async def held(*args: Any) -> None:
        try:
            await asyncio.wait_for(event.wait(), timeout=5)
            seen.append(True)
        except TimeoutError:
            seen.append(False)
        await real(*args)

    return held


async def chain_run(
    tmp_path: Path,
    event: asyncio.Event,
    *,
    when: Callable[[str, str], bool],
    gates: str = "gates:\n  detect: false\n",
) -> Any:
    """`CHAIN` run to completion by the engine; `event` is set at the checkpoints `when` holds for."""

    async def checkpoint(step: str, subject: str) -> None:
        if when(step, subject):
            event.set()

    remote = make_remote(tmp_path)
    script = agent_script(tmp_path, "agent.sh", WRITE_FILE)
    run = make_run(tmp_path, remote, approved_state(CHAIN), config_for(script, gates))
    run.checkpoint = checkpoint
    state = await execute(run)
    assert state.status == PlanStatus.COMPLETED
    return run


async def test_the_next_batch_starts_while_the_last_batchs_worktree_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's worktree (made for its integration gate) goes in the background too: the next
    batch's story runs beside its removal, and none outlives the run."""
    from bot.orchestration import batch

    ran = asyncio.Event()
    seen: list[bool] = []
    # Removed only once batch 2's story ran: had the next batch waited for it, it never would.
    monkeypatch.setattr(batch, "remove_batch_worktree", held_until(ran, batch.remove_batch_worktree, seen))
    run = await chain_run(
        tmp_path,
        ran,
        when=lambda step, subject: (step, subject) == ("agent-finished", "STORY-002"),
        gates="gates:\n  detect: false\n  custom:\n    - name: files\n      command: ls story-001.txt\n",
    )
    assert seen[:1] == [True]  # batch 1's worktree: removed after batch 2's story ran
    assert sorted(p.name for p in run.work_root.iterdir() if p.name.startswith("batch-")) == []
    assert run.tidying is None


async def test_a_batch_is_merged_while_its_story_worktrees_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Removing a story's worktree is off its batch's way: the merge starts beside the removals
    (which then finish first at a path the next story takes), and none outlives the run."""
    from bot.orchestration import story

    merged = asyncio.Event()
    seen: list[bool] = []
    # Removed only once the merge began: had the merge waited for them, it never would.
    monkeypatch.setattr(story, "cleanup", held_until(merged, story.cleanup, seen))
    run = await chain_run(tmp_path, merged, when=lambda step, subject: step == "merged")
    assert seen[:2] == [True, True]  # batch 1's two stories: removed after its merge began
    assert len(seen) == 3
    assert sorted(p.name for p in run.work_root.iterdir() if p.name.startswith("story-")) == []
    assert run.tidying is None
