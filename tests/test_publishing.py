"""From approval to pull requests, in-process: the real engine on a bare git remote, GitHub faked."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.plan.state import PlanStatus, StoryStatus
from bot.plan.state_block import decode_state
from tests.execution_support import agent_script, git, make_remote, remote_branches
from tests.harness import REPO, Harness, commented, pr_closed

PRD = """Two batches.

```prd
version: 1
title: Greetings
summary: Add greeting files.
stories:
  - id: STORY-001
    title: Hello file
    acceptance_criteria: ["story-001.txt contains the line 'done'"]
  - id: STORY-002
    title: World file
    acceptance_criteria: ["story-002.txt contains the line 'done'"]
  - id: STORY-003
    title: Both together
    depends_on: [STORY-001, STORY-002]
    acceptance_criteria: ["story-003.txt contains the line 'done'"]
```
"""
WRITE = 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n'


def config(script: Path, extra: str = "") -> str:
    return (
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
        "  sandbox: none\ngates:\n  detect: false\n  strict: true\n  custom:\n    - name: files\n"
        '      command: "grep -q done story-*.txt"\npublishing:\n  reviewers: [maint]\n' + extra
    )


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path, execute=True) as harness:
        remote = make_remote(tmp_path)
        harness.remote = remote
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.add_issue(REPO, title="Greetings", body=PRD)
        yield harness


async def _approve(h: Harness) -> None:
    await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan"))
    await h.drain()
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
    )
    await h.drain(timeout=180)


def _state(h: Harness):
    (comment,) = h.plan_comments(1)
    return decode_state(comment.body)


async def test_approved_plan_becomes_one_stacked_pr_per_batch(h: Harness, tmp_path: Path) -> None:
    h.fake.set_file(REPO, ".github/plan-cascade.yml", config(agent_script(tmp_path, "ok.sh", WRITE)))
    await _approve(h)
    state = _state(h)
    assert state.status == PlanStatus.COMPLETED, state.note
    assert all(s.status == StoryStatus.PASSED for s in state.stories.values())
    branches = remote_branches(h.remote)
    assert {
        "plan-cascade/1/batch-1",
        "plan-cascade/1/batch-2",
        "plan-cascade/1/story-001",
        "plan-cascade/1/story-002",
        "plan-cascade/1/story-003",
    } <= set(branches)
    pulls = sorted(h.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    assert [(p.head_ref, p.base_ref) for p in pulls] == [
        ("plan-cascade/1/batch-1", "main"),
        ("plan-cascade/1/batch-2", "plan-cascade/1/batch-1"),
    ]
    bodies = [h.fake.repo(REPO).issues[p.number].body for p in pulls]
    titles = [h.fake.repo(REPO).issues[p.number].title for p in pulls]
    assert titles[0].startswith("[Plan Cascade] #1 batch 1/2: ")
    assert "Closes #1" not in bodies[0] and "Closes #1" in bodies[1]
    assert "Part 1 of 2" in bodies[0] and "STORY-001" in bodies[0] and "- [x]" in bodies[0]
    # The batch branch holds both stories of batch 1 merged.
    assert git("show", "plan-cascade/1/batch-1:story-001.txt", cwd=h.remote) == "done"
    assert git("show", "plan-cascade/1/batch-1:story-002.txt", cwd=h.remote) == "done"
    assert git("show", "plan-cascade/1/batch-2:story-003.txt", cwd=h.remote) == "done"
    # Gates are check runs per story, plus the roll-up check per batch.
    names = {r["name"] for r in _check_runs(h)}
    assert "plan-cascade / STORY-001 / files" in names and "plan-cascade" in names
    assert "plan-cascade / batch-1 / files" in names
    # GitHub keeps only check runs on commits it has: the integration gate's run is on the
    # pushed batch head, next to the roll-up check.
    batch_head = git("rev-parse", "plan-cascade/1/batch-1", cwd=h.remote)
    kept = {(r.name, r.conclusion) for r in h.fake.repo(REPO).check_runs.values() if r.head_sha == batch_head}
    assert {("plan-cascade / batch-1 / files", "success"), ("plan-cascade", "success")} <= kept
    assert [b.pr_number for b in state.batches] == [p.number for p in pulls]
    assert h.fake.requests_to("POST", rf"/repos/{REPO}/pulls/\d+/requested_reviewers")


def _check_runs(h: Harness) -> list[dict]:
    return [r.json for r in h.fake.requests_to("POST", rf"/repos/{REPO}/check-runs")]


async def test_a_redelivered_approval_opens_no_second_pr(h: Harness, tmp_path: Path) -> None:
    h.fake.set_file(REPO, ".github/plan-cascade.yml", config(agent_script(tmp_path, "ok.sh", WRITE)))
    await _approve(h)
    before = len(h.fake.repo(REPO).pulls)
    from bot.handlers.approval import start_execution
    from bot.handlers.session import open_session

    session = await open_session(h.services, repo=REPO, issue=1, installation_id=4242)
    await session.load_config()
    loaded = await session.load_plan()
    # As if the process died after opening the PRs but before saving that it had:
    # the plan is still running and knows no PR numbers. A redelivered job re-publishes.
    batches = [b.model_copy(update={"pr_number": None, "pr_url": None}) for b in loaded.state.batches]
    again = loaded.state.model_copy(update={"status": PlanStatus.RUNNING, "batches": batches})
    from bot.handlers.plan_io import save_plan

    saved = await save_plan(session, again, comment_id=loaded.comment_id)
    await start_execution(session, saved)
    await h.drain(timeout=180)
    assert len(h.fake.repo(REPO).pulls) == before
    state = _state(h)
    assert state.status == PlanStatus.COMPLETED
    assert [b.pr_number for b in state.batches] == sorted(h.fake.repo(REPO).pulls)


async def test_merged_batch_prs_complete_the_plan_with_a_summary(h: Harness, tmp_path: Path) -> None:
    h.fake.set_file(REPO, ".github/plan-cascade.yml", config(agent_script(tmp_path, "ok.sh", WRITE)))
    await _approve(h)
    pulls = sorted(h.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    for pull in pulls:
        # Batch 2's PR was stacked on batch 1's branch: merging batch 1 retargeted it to main.
        assert pull.base_ref == "main"
        h.fake.merge_pull(REPO, pull.number)
        payload = pr_closed(h.fake, pull.number)
        await h.deliver("pull_request", payload)
        await h.drain()
    state = _state(h)
    assert all(b.merged for b in state.batches) and state.summary_posted
    summary = h.comments(1)[-1]
    assert "Plan completed" in summary and "3 of 3 stories passed" in summary
    assert all(f"#{p.number}" in summary for p in pulls)
    # A second merged event (redelivery) posts no second summary.
    await h.deliver("pull_request", payload)
    await h.drain()
    assert sum("Plan completed" in c for c in h.comments(1)) == 1


async def test_an_integration_gate_failure_opens_a_draft(h: Harness, tmp_path: Path) -> None:
    # Passes in each story's worktree (one file), fails once both are merged in the batch.
    gate = '    - name: alone\n      command: "test $(ls story-*.txt | wc -l) -lt 2"\n'
    text = (
        config(agent_script(tmp_path, "ok.sh", WRITE))
        .replace("publishing:", "")
        .replace("  reviewers: [maint]\n", "")
    )
    text = text.replace(
        '      command: "grep -q done story-*.txt"\n', '      command: "grep -q done story-*.txt"\n' + gate
    )
    h.fake.set_file(REPO, ".github/plan-cascade.yml", text)
    h.fake.repo(REPO).issues[1].body = PRD.split("  - id: STORY-003")[0] + "```\n"
    await _approve(h)
    (pull,) = h.fake.repo(REPO).pulls.values()
    assert pull.draft
    body = h.fake.repo(REPO).issues[pull.number].body
    assert "draft" in body.lower() and "`alone`: failure" in body
    rollup = [r for r in _check_runs(h) if r["name"] == "plan-cascade"]
    assert rollup[-1]["conclusion"] == "failure"


async def test_someone_elses_push_makes_the_bot_hands_off(h: Harness, tmp_path: Path) -> None:
    h.fake.set_file(REPO, ".github/plan-cascade.yml", config(agent_script(tmp_path, "ok.sh", WRITE)))
    await _approve(h)
    # A human pushes to the batch-1 branch.
    work = tmp_path / "human"
    git("clone", "-q", "-b", "plan-cascade/1/batch-1", str(h.remote), str(work), cwd=tmp_path)
    (work / "human.txt").write_text("mine\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "human change", cwd=work)
    git("push", "-q", "origin", "plan-cascade/1/batch-1", cwd=work)
    human_sha = git("rev-parse", "HEAD", cwd=work)
    pulls = sorted(h.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    await h.deliver(
        "issue_comment",
        commented(
            number=pulls[0].number,
            body="/plan-cascade fix rename it",
            user="maint",
            association="MEMBER",
            on_pr=True,
        ),
    )
    await h.drain(timeout=180)
    assert git("rev-parse", "plan-cascade/1/batch-1", cwd=h.remote) == human_sha, "human work untouched"
    assert any("never overwrites human work" in c for c in h.comments(pulls[0].number))
    assert _state(h).batches[0].hands_off


async def test_fix_command_on_a_batch_pr_pushes_a_new_commit(h: Harness, tmp_path: Path) -> None:
    script = agent_script(
        tmp_path, "fixer.sh", WRITE + 'if [ "$1" = FIX-001 ]; then echo fixed > "$2/review.txt"; fi\n'
    )
    h.fake.set_file(REPO, ".github/plan-cascade.yml", config(script))
    await _approve(h)
    pulls = sorted(h.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    before = git("rev-parse", "plan-cascade/1/batch-1", cwd=h.remote)
    await h.deliver(
        "issue_comment",
        commented(
            number=pulls[0].number,
            body="/plan-cascade fix add review.txt",
            user="maint",
            association="MEMBER",
            on_pr=True,
        ),
    )
    await h.drain(timeout=180)
    after = git("rev-parse", "plan-cascade/1/batch-1", cwd=h.remote)
    assert after != before
    assert git("show", "plan-cascade/1/batch-1:review.txt", cwd=h.remote) == "fixed"
    reply = h.comments(pulls[0].number)[-1]
    assert "review.txt" in reply and "Pushed a new commit" in reply
    assert _state(h).batches[0].head_sha == after


async def test_rerequested_check_run_reruns_that_gate_on_that_commit(h: Harness, tmp_path: Path) -> None:
    from bot.testing.deliveries import load_fixture
    from tests.harness import INSTALLATION

    h.fake.set_file(REPO, ".github/plan-cascade.yml", config(agent_script(tmp_path, "ok.sh", WRITE)))
    await _approve(h)
    created = [r.json for r in h.fake.requests_to("POST", rf"/repos/{REPO}/check-runs")]
    gate = next(r for r in created if r["name"] == "plan-cascade / STORY-002 / files")
    assert gate["external_id"].startswith("1:STORY-002:files:")
    payload = load_fixture("check_run.rerequested.1")
    payload["repository"]["full_name"] = REPO
    payload["installation"] = {"id": INSTALLATION}
    payload["check_run"].update(
        {"id": 999, "name": gate["name"], "head_sha": gate["head_sha"], "external_id": gate["external_id"]}
    )
    payload["sender"].update({"login": "maint", "type": "User"})  # a re-run needs the approval rule
    await h.deliver("check_run", payload)
    await h.drain(timeout=120)
    again = [r.json for r in h.fake.requests_to("POST", rf"/repos/{REPO}/check-runs")][len(created) :]
    assert [(r["name"], r["head_sha"]) for r in again] == [(gate["name"], gate["head_sha"])]
    completed = h.fake.requests_to("PATCH", rf"/repos/{REPO}/check-runs/\d+")[-1].json
    assert completed["conclusion"] == "success"
