"""Verified commits through a stack's life: a fix on batch 1 flowing up, a squash merge and the
restack it causes, the last merge with a merge commit, all on a repository whose ruleset
requires signed commits on every branch (the stack tests' world, `tests.test_stacks`)."""

from __future__ import annotations

from bot.plan.state import PlanStatus
from tests.execution_support import git
from tests.harness import REPO, Harness, commented
from tests.test_stacks import BATCH_1, BATCH_2, _files, _pulls, _run_plan, _settle, _state, h  # noqa: F401


def _all_github_made(harness: Harness, base: str, head: str) -> list[str]:
    """The commits `base..head` GitHub did not make and sign (none, when all is well)."""
    commits = git("rev-list", f"{base}..{head}", cwd=harness.remote).split()
    assert commits, (base, head)
    made = set(harness.fake.made_commits)
    return [sha for sha in commits if sha not in made or not harness.fake.verified(REPO, sha)]


async def test_fixes_restacks_and_merges_keep_every_commit_verified(h: Harness) -> None:  # noqa: F811
    h.fake.add_ruleset(REPO, ["required_signatures"], include=["~ALL"])
    await _run_plan(h)
    h.fake.repo(REPO).delete_branch_on_merge = True
    first, second = _pulls(h)
    await h.deliver(
        "issue_comment",
        commented(number=first.number, body="/plan-cascade fix add the fix file", user="maint",
                  association="MEMBER", on_pr=True),
    )  # fmt: skip
    await _settle(h)
    assert git("show", f"{BATCH_2}:fix-001.txt", cwd=h.remote) == "done"  # the fix flowed up
    assert _all_github_made(h, "main", BATCH_1) == [] and _all_github_made(h, "main", BATCH_2) == []
    h.fake.merge_pull(REPO, first.number, method="squash")  # GitHub signs its squash commit
    await _settle(h)
    assert second.base_ref == "main" and _files(h, "main", BATCH_2) == ["story-003.txt"]
    assert _all_github_made(h, "main", BATCH_2) == []  # the restack's commits: GitHub's too
    state = _state(h)
    assert state.batches[1].head_sha == git("rev-parse", BATCH_2, cwd=h.remote)
    story_3 = git("rev-parse", "plan-cascade/1/story-003", cwd=h.remote)
    assert state.stories["STORY-003"].commit == story_3 and h.fake.verified(REPO, story_3)
    h.fake.merge_pull(REPO, second.number, method="merge")  # every commit it brings is signed
    await _settle(h)
    assert _state(h).status == PlanStatus.COMPLETED and all(b.merged for b in _state(h).batches)
