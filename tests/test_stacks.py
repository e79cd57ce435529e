"""Stacks that survive the merge: the batch PRs merged as maintainers merge them (merge commit,
squash, rebase; the head branch kept or deleted), the base branch moving, a person's push, a
fix low in the stack. In-process: the real engine on a bare git remote, the fake GitHub merging
as GitHub does and sending the events GitHub sends."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.clock import utcnow
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from tests.execution_support import agent_script, git
from tests.harness import REPO, Harness, commented, pr_closed
from tests.test_publishing import PRD

WRITE = 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\ncat "$3" > "$2/prompt-$id.md"\n'
BATCH_1, BATCH_2 = "plan-cascade/1/batch-1", "plan-cascade/1/batch-2"


def config(script: Path, extra: str = "") -> str:
    return (
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}} '
        '{prompt_file}"\n  sandbox: none\ngates:\n  detect: false\n  strict: true\n  custom:\n'
        '    - name: files\n      command: "grep -q done story-*.txt"\n' + extra
    )


@pytest.fixture
async def h(tmp_path: Path):
    from tests.execution_support import make_remote

    async with Harness(tmp_path, execute=True) as harness:
        remote = make_remote(tmp_path)
        harness.remote = remote
        harness.fake.installation_id = 4242
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.add_issue(REPO, title="Greetings", body=PRD)
        harness.script = agent_script(tmp_path, "ok.sh", WRITE)
        yield harness


async def _run_plan(h: Harness, extra: str = "") -> None:
    h.fake.set_file(REPO, ".github/plan-cascade.yml", config(h.script, extra))
    await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan"))
    await h.drain()
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
    )
    await h.drain(timeout=180)
    assert _state(h).status == PlanStatus.COMPLETED, _state(h).note


def _state(h: Harness):
    (comment,) = h.plan_comments(1)
    return decode_state(comment.body)


def _pulls(h: Harness) -> list:
    return sorted(h.fake.repo(REPO).pulls.values(), key=lambda p: p.number)


async def _settle(h: Harness) -> None:
    """Deliver what GitHub sent (merges, retargets, pushes), then run the jobs, until quiet."""
    for _ in range(10):
        events = h.fake.take_events()
        for event, payload in events:
            await h.deliver(event, payload)
        await h.drain(timeout=180)
        if not events:
            return


def _files(h: Harness, base: str, head: str) -> list[str]:
    """What a pull request from `head` into `base` shows (the three-dot diff), but the prompts
    the agent script keeps beside its work."""
    names = git("diff", "--name-only", f"{base}...{head}", cwd=h.remote).split()
    return [n for n in names if not n.startswith("prompt-")]


def _on(h: Harness, ref: str) -> list[str]:
    return sorted(
        n for n in git("ls-tree", "--name-only", ref, cwd=h.remote).split() if not n.startswith("prompt-")
    )


async def test_a_merge_commit_with_the_branch_kept_retargets_the_next_pr_to_main(h: Harness) -> None:
    await _run_plan(h)
    first, second = _pulls(h)
    assert second.base_ref == BATCH_1
    head_2 = git("rev-parse", BATCH_2, cwd=h.remote)
    h.fake.merge_pull(REPO, first.number, method="merge")
    await _settle(h)
    assert second.base_ref == "main"  # its Merge button now merges into main, not the dead branch
    assert git("rev-parse", BATCH_2, cwd=h.remote) == head_2  # history kept: nothing to rebuild
    assert _files(h, "main", BATCH_2) == ["story-003.txt"]
    state = _state(h)
    assert [b.merged for b in state.batches] == [True, False] and not state.summary_posted
    h.fake.merge_pull(REPO, second.number, method="merge")
    await _settle(h)
    state = _state(h)
    assert all(b.merged for b in state.batches) and state.summary_posted
    assert _on(h, "main") == ["README.md", "story-001.txt", "story-002.txt", "story-003.txt"]
    assert h.fake.repo(REPO).issues[1].state == "closed"  # "Closes #1" reached the default branch


@pytest.mark.parametrize("method", ["squash", "rebase"])
async def test_after_a_rewriting_merge_the_next_batch_shows_only_its_own_work(
    h: Harness, method: str
) -> None:
    await _run_plan(h)
    h.fake.repo(REPO).delete_branch_on_merge = True
    first, second = _pulls(h)
    story_3 = _state(h).stories["STORY-003"].commit
    h.fake.merge_pull(REPO, first.number, method=method)
    await _settle(h)
    assert second.base_ref == "main"
    # Rebuilt on main: batch 1's original commits are gone from it, only its own change shows.
    assert _files(h, "main", BATCH_2) == ["story-003.txt"]
    assert git("rev-list", "--count", f"main..{BATCH_2}", cwd=h.remote) == "2"  # its story, its merge
    state = _state(h)
    assert state.batches[1].head_sha == git("rev-parse", BATCH_2, cwd=h.remote)
    assert state.stories["STORY-003"].commit != story_3  # the same story, rebuilt on main
    assert _files(h, "main", "plan-cascade/1/story-003") == ["story-003.txt"]
    notes = [c for c in h.comments(second.number) if c.startswith("Rebased onto `main`")]
    assert len(notes) == 1 and "the checks carry over" in notes[0]
    body = h.fake.repo(REPO).issues[second.number].body
    assert body.startswith("<!-- plan-cascade:batch") and "Rebased onto `main`" in body
    rollups = [
        r
        for r in h.fake.repo(REPO).check_runs.values()
        if r.name == "plan-cascade" and r.head_sha == state.batches[1].head_sha
    ]
    assert [r.conclusion for r in rollups] == ["success"]  # carried over: the same tree
    h.fake.merge_pull(REPO, second.number, method=method)
    await _settle(h)
    state = _state(h)
    assert all(b.merged for b in state.batches) and state.summary_posted
    assert sum("Plan completed" in c for c in h.comments(1)) == 1
    assert _on(h, "main") == ["README.md", "story-001.txt", "story-002.txt", "story-003.txt"]
    assert h.fake.repo(REPO).issues[1].state == "closed"


async def test_a_batch_merged_into_the_dead_branch_below_does_not_count(h: Harness) -> None:
    await _run_plan(h)
    first, second = _pulls(h)
    # Batch 1 is merged, and batch 2's PR merged before GitHub told the bot: into batch 1's branch.
    h.fake.merge_pull(REPO, first.number, method="merge")
    h.fake.merge_pull(REPO, second.number, method="merge")
    await _settle(h)
    state = _state(h)
    assert state.batches[0].merged and not state.batches[1].merged
    assert state.batches[1].merged_into == BATCH_1 and not state.summary_posted
    said = f"#{second.number} (batch 2) was merged into `{BATCH_1}`, not `main`"
    assert any(said in c for c in h.comments(second.number))
    assert any(said in c for c in h.comments(1))
    assert not any("Plan completed" in c for c in h.comments(1))
    assert h.fake.repo(REPO).issues[1].state == "open"
    # GitHub redelivers the merge: nothing is said twice.
    await h.deliver("pull_request", pr_closed(h.fake, second.number))
    await h.drain()
    assert sum(said in c for c in h.comments(1)) == 1
    # `rebase` on the issue gives batch 2 a new pull request into main; merging it completes the plan.
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade rebase", user="maint", association="MEMBER")
    )
    await _settle(h)
    third = _pulls(h)[-1]
    assert third.number not in (first.number, second.number)
    assert (third.head_ref, third.base_ref) == (BATCH_2, "main")
    assert _files(h, "main", BATCH_2) == ["story-003.txt"]
    assert any(f"#{third.number}: opened for batch 2" in c for c in h.comments(1))
    h.fake.merge_pull(REPO, third.number, method="merge")
    await _settle(h)
    state = _state(h)
    assert all(b.merged for b in state.batches) and state.summary_posted
    assert h.fake.repo(REPO).issues[1].state == "closed"


async def test_top_down_merges_count_when_the_work_reaches_main(h: Harness) -> None:
    await _run_plan(h)
    first, second = _pulls(h)
    h.fake.merge_pull(REPO, second.number, method="merge")  # batch 2 into batch 1's branch first
    await _settle(h)
    state = _state(h)
    assert not any(b.merged for b in state.batches)
    assert any(f"once batch 1 (#{first.number})" in c for c in h.comments(second.number))
    h.fake.merge_pull(REPO, first.number, method="merge")  # …which carries it to main
    await _settle(h)
    state = _state(h)
    assert all(b.merged for b in state.batches) and state.summary_posted


async def test_rebase_redoes_a_story_that_conflicts_with_main(h: Harness) -> None:
    await _run_plan(h)
    first, second = _pulls(h)
    h.fake.merge_pull(REPO, first.number, method="squash")
    await _settle(h)
    # Someone else's change lands on main, touching the file batch 2's story writes.
    change = {"story-003.txt": "main's own line\n", "other.txt": "more\n"}
    h.fake.commit_to(REPO, "main", files=change, message="Someone's change")
    await _settle(h)
    assert await _pull_mergeable(h, second.number) is False
    await h.deliver(
        "issue_comment",
        commented(
            number=second.number, body="/plan-cascade rebase", user="maint", association="MEMBER", on_pr=True
        ),
    )
    await _settle(h)
    # The story was redone by its agent on top of main, with both sides of the conflict.
    prompt = git("show", f"{BATCH_2}:prompt-story-003.md", cwd=h.remote)
    assert "conflicts with `main`" in prompt and "main's own line" in prompt and "+done" in prompt
    assert git("show", f"{BATCH_2}:story-003.txt", cwd=h.remote) == "done"
    assert await _pull_mergeable(h, second.number) is True
    replies = [c for c in h.comments(second.number) if "STORY-003 conflicted with it" in c]
    assert replies and "gates re-ran" in replies[0]
    assert any(
        r.name == "plan-cascade / STORY-003 / files" and r.conclusion == "success"
        for r in h.fake.repo(REPO).check_runs.values()
        if r.head_sha == _state(h).stories["STORY-003"].commit
    )
    h.fake.merge_pull(REPO, second.number, method="squash")
    await _settle(h)
    assert _state(h).summary_posted


async def test_auto_rebase_rebuilds_a_pr_that_stops_merging_cleanly(h: Harness) -> None:
    await _run_plan(h, "execution:\n  auto_rebase: true\n")
    first, second = _pulls(h)
    h.fake.merge_pull(REPO, first.number, method="merge")
    await _settle(h)
    h.fake.commit_to(REPO, "main", files={"story-003.txt": "main's own line\n"}, message="Someone's change")
    await _settle(h)  # GitHub had not computed `mergeable` yet: the bot looks again 30 s later
    assert _state(h).batches[1].rebased_onto is None
    queue = h.runtime.queue
    queue.clock = lambda: utcnow() + timedelta(seconds=31)
    await _settle(h)
    assert git("show", f"{BATCH_2}:story-003.txt", cwd=h.remote) == "done"
    assert await _pull_mergeable(h, second.number) is True
    assert _state(h).batches[1].rebased_onto == git("rev-parse", "main", cwd=h.remote)


async def test_a_persons_push_is_never_overwritten(h: Harness, tmp_path: Path) -> None:
    await _run_plan(h)
    first, second = _pulls(h)
    work = tmp_path / "human"
    git("clone", "-q", "-b", BATCH_2, str(h.remote), str(work), cwd=tmp_path)
    (work / "human.txt").write_text("mine\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "human change", cwd=work)
    git("push", "-q", "origin", BATCH_2, cwd=work)
    mine = git("rev-parse", "HEAD", cwd=work)
    h.fake.merge_pull(REPO, first.number, method="squash")
    await _settle(h)
    assert git("rev-parse", BATCH_2, cwd=h.remote) == mine  # no force push over it
    (note,) = [c for c in h.comments(second.number) if "will not rebuild it" in c]
    assert (
        "git rebase --rebase-merges --onto" in note
        and f"git push --force-with-lease origin {BATCH_2}" in note
    )
    assert _state(h).batches[1].hands_off


async def test_a_persons_amended_head_keeps_the_bots_author_but_is_never_rebuilt_away(
    h: Harness, tmp_path: Path
) -> None:
    """Issue #47, defect 1: `commit --amend` (and `rebase`) keep the bot's author e-mail; whose
    head it is comes from what the bot pushed, never from the author."""
    await _run_plan(h)
    first, second = _pulls(h)
    work = tmp_path / "human"
    git("clone", "-q", "-b", BATCH_2, str(h.remote), str(work), cwd=tmp_path)
    bots = git("log", "-1", "--format=%ae", cwd=work)
    (work / "story-003.txt").write_text("done, and the maintainer's fix\n")
    git("commit", "-q", "-a", "--amend", "--no-edit", cwd=work)
    assert git("log", "-1", "--format=%ae", cwd=work) == bots  # the amend kept the bot's author
    git("push", "-q", "--force", "origin", BATCH_2, cwd=work)
    mine = git("rev-parse", "HEAD", cwd=work)
    h.fake.merge_pull(REPO, first.number, method="squash")
    await _settle(h)
    assert git("rev-parse", BATCH_2, cwd=h.remote) == mine  # not rebuilt away
    notes = [c for c in h.comments(second.number) if "will not rebuild it" in c]
    assert len(notes) == 1, h.comments(second.number)
    assert "a commit Plan Cascade did not push" in notes[0] and "amended or rebased" in notes[0]
    state = _state(h)
    assert state.batches[1].hands_off and state.batches[1].head_sha != mine
    await h.deliver(
        "issue_comment",
        commented(number=1, body="/plan-cascade rebase", user="maint", association="MEMBER"),
    )
    await _settle(h)
    assert git("rev-parse", BATCH_2, cwd=h.remote) == mine
    assert sum("will not rebuild it" in c for c in h.comments(second.number)) == 1  # said once
    h.fake.merge_pull(REPO, second.number, method="merge")
    await _settle(h)
    assert git("show", "main:story-003.txt", cwd=h.remote) == "done, and the maintainer's fix"


async def test_a_fix_on_batch_1_flows_up_to_batch_2(h: Harness) -> None:
    await _run_plan(h)
    first, second = _pulls(h)
    await h.deliver(
        "issue_comment",
        commented(number=first.number, body="/plan-cascade fix add the fix file", user="maint",
                  association="MEMBER", on_pr=True),
    )  # fmt: skip
    await _settle(h)
    assert git("show", f"{BATCH_1}:fix-001.txt", cwd=h.remote) == "done"
    assert git("show", f"{BATCH_2}:fix-001.txt", cwd=h.remote) == "done"  # batch 2 rebuilt on it
    assert _files(h, BATCH_1, BATCH_2) == ["story-003.txt"]
    assert _state(h).batches[1].head_sha == git("rev-parse", BATCH_2, cwd=h.remote)
    assert any(c.startswith("Rebased onto batch 1 after the fix") for c in h.comments(second.number))


async def _pull_mergeable(h: Harness, number: int) -> bool | None:
    """`mergeable` as GitHub says it once computed (it answers null first after a change)."""
    import httpx

    async with httpx.AsyncClient(transport=h.fake.transport(), base_url=h.fake.api_url) as client:
        for _ in range(3):
            value = (await client.get(f"/repos/{REPO}/pulls/{number}")).json()["mergeable"]
            if value is not None:
                return value
    return None


async def test_a_stacked_pr_github_closed_with_its_base_gets_a_new_one(h: Harness) -> None:
    """GitHub retargets the PRs on a merged branch it deletes, but people report it closing them
    instead when the branch goes through the API: the batch then gets a new pull request."""
    await _run_plan(h)
    first, second = _pulls(h)
    h.fake.merge_pull(REPO, first.number, method="squash")
    git("branch", "-D", BATCH_1, cwd=h.remote)  # deleted behind GitHub's back: no retarget…
    h.fake.repo(REPO).issues[second.number].state = "closed"  # …and the PR above it closed
    await _settle(h)
    third = _pulls(h)[-1]
    assert third.number not in (first.number, second.number)
    assert (third.head_ref, third.base_ref) == (BATCH_2, "main")
    assert _files(h, "main", BATCH_2) == ["story-003.txt"]
    assert _state(h).batches[1].pr_number == third.number
    h.fake.merge_pull(REPO, third.number, method="squash")
    await _settle(h)
    assert _state(h).summary_posted


async def test_a_closed_batch_whose_branch_a_person_amended_is_not_pushed_back(
    h: Harness, tmp_path: Path
) -> None:
    """Issue #47, defect 1, `_open_again`: the bot's head is put back only over a head it pushed."""
    await _run_plan(h)
    first, second = _pulls(h)
    work = tmp_path / "human"
    git("clone", "-q", "-b", BATCH_2, str(h.remote), str(work), cwd=tmp_path)
    (work / "story-003.txt").write_text("done, amended\n")
    git("commit", "-q", "-a", "--amend", "--no-edit", cwd=work)  # keeps the bot's author
    git("push", "-q", "--force", "origin", BATCH_2, cwd=work)
    mine = git("rev-parse", "HEAD", cwd=work)
    h.fake.merge_pull(REPO, first.number, method="squash")
    git("branch", "-D", BATCH_1, cwd=h.remote)
    h.fake.repo(REPO).issues[second.number].state = "closed"
    await _settle(h)
    assert git("rev-parse", BATCH_2, cwd=h.remote) == mine
    assert [p.number for p in _pulls(h)] == [first.number, second.number]  # no new PR over it
    notes = [c for c in h.comments(second.number) if "did not put its own head back" in c]
    assert len(notes) == 1 and "a commit Plan Cascade did not push" in notes[0]
    assert len(h.comments(second.number)) == len(set(h.comments(second.number)))
    assert _state(h).batches[1].hands_off


async def test_a_conflict_the_agent_cannot_redo_leaves_the_branch_and_drafts_the_pr(h: Harness) -> None:
    h.script.write_text(
        "#!/bin/bash\nset -e\n"
        'if grep -q "conflicts with" "$3"; then echo "cannot resolve it" >&2; exit 1; fi\n' + WRITE
    )
    await _run_plan(h)
    first, second = _pulls(h)
    h.fake.merge_pull(REPO, first.number, method="merge")
    await _settle(h)
    before = git("rev-parse", BATCH_2, cwd=h.remote)
    h.fake.commit_to(REPO, "main", files={"story-003.txt": "main's own line\n"}, message="Someone's change")
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade rebase", user="maint", association="MEMBER")
    )
    await _settle(h)
    assert git("rev-parse", BATCH_2, cwd=h.remote) == before  # nothing pushed
    (note,) = [c for c in h.comments(second.number) if "could not bring this batch onto" in c]
    assert "STORY-003: `story-003.txt`" in note and "stays a draft" in note
    assert h.fake.repo(REPO).pulls[second.number].draft
    state = _state(h)
    assert state.batches[1].draft and state.batches[1].head_sha == before
    assert state.stories["STORY-003"].status == "passed"  # it keeps its earlier work
    assert any("could not bring this batch onto" in c for c in h.comments(1)[-1:])
