"""The protected-paths check reads the paths of the index's change (issue 52): after `git add -A`
the change a commit will make names every path that differs from HEAD, which is what `git status`
listed in a process of its own. What the check refuses is the same either way; where that change
cannot be read whole (too large), git lists the paths as before."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.orchestration.secretgate import read_staged
from bot.workspace import Mirror, Worktree, add_worktree, stage_all
from bot.workspace import outgoing as outgoing_module
from bot.workspace.policy import policy_violations
from tests.support import audit_threads

Git = Callable[..., str]
DENY = ["locked/**", ".github/workflows/**"]


async def _changed_worktree(mirror: Mirror, tmp_path: Path, git: Git) -> Worktree:
    """A worktree whose agent did every kind of change the check looks at."""
    wt = await add_worktree(mirror, branch="bot/agent", base_ref="origin/main", path=tmp_path / "wt")
    root = wt.path
    (root / "locked").mkdir()
    (root / "locked" / "kept.txt").write_text("kept\n")  # committed first: then changed below
    (root / "moved.txt").write_text("moved\n")
    await stage_all(wt)
    await wt.git("commit", "-q", "-m", "base", identity=("a", "a@example.com"))
    (root / "locked" / "kept.txt").write_text("changed\n")  # a protected file changed
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "evil.yml").write_text("on: push\n")  # a protected file made
    os.rename(root / "moved.txt", root / "locked" / "moved.txt")  # moved into a protected place
    (root / "README.md").unlink()  # deleted: allowed
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / "new.txt").write_text("new\n")  # allowed
    (root / "out").symlink_to("/etc/passwd")  # a symlink out of the worktree
    (root / "in").symlink_to("src/app.py")  # one inside: allowed
    nested = root / "vendor" / "lib"
    nested.mkdir(parents=True)
    git("init", "-q", str(nested), cwd=tmp_path)  # a repository inside the worktree
    (nested / "x.txt").write_text("x\n")
    git("add", "-A", cwd=nested)
    git("commit", "-q", "-m", "nested", cwd=nested)
    return wt


def _names(problems: list[str]) -> list[str]:
    return sorted(p.split(" (", 1)[0].rstrip("/") for p in problems)


async def test_the_index_change_names_what_git_status_names(mirror: Mirror, tmp_path: Path, git: Git) -> None:
    wt = await _changed_worktree(mirror, tmp_path, git)
    by_status = await policy_violations(wt, deny=DENY)  # staged or not: the same
    await stage_all(wt)
    staged = await read_staged(wt, since=(await wt.git("rev-parse", "HEAD")).stdout.strip())
    assert staged is not None and staged.paths() is not None
    by_read = await policy_violations(wt, deny=DENY, changed=staged.paths())
    assert (
        _names(by_read)
        == _names(by_status)
        == [
            ".github/workflows/evil.yml",
            "locked/kept.txt",
            "locked/moved.txt",
            "out",
            "vendor/lib",
        ]
    )
    assert any("a symlink to /etc/passwd" in p for p in by_read)


async def test_with_the_paths_read_no_git_lists_them_again(mirror: Mirror, tmp_path: Path, git: Git) -> None:
    wt = await _changed_worktree(mirror, tmp_path, git)
    await stage_all(wt)
    staged = await read_staged(wt, since=(await wt.git("rev-parse", "HEAD")).stdout.strip())
    assert staged is not None
    with audit_threads("subprocess.Popen", lambda args: "status" in args[1]) as listed:
        assert await policy_violations(wt, deny=DENY, changed=staged.paths())
    assert listed == []


async def test_a_change_too_large_to_read_is_listed_by_git(
    mirror: Mirror,
    tmp_path: Path,
    git,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    wt = await _changed_worktree(mirror, tmp_path, git)
    await stage_all(wt)
    monkeypatch.setattr(outgoing_module, "MAX_DIFF_BYTES", 64)
    staged = await read_staged(wt, since=(await wt.git("rev-parse", "HEAD")).stdout.strip())
    assert staged is not None and staged.paths() is None
    staged.cancel()
    assert ".github/workflows/evil.yml" in await policy_violations(wt, deny=DENY, changed=None)


async def test_commits_the_agent_made_itself_leave_the_listing_to_git(
    mirror: Mirror, tmp_path: Path, git
) -> None:  # type: ignore[no-untyped-def]
    """HEAD moved: the index's change on the scanned commit is not this commit's change."""
    wt = await _changed_worktree(mirror, tmp_path, git)
    before = (await wt.git("rev-parse", "HEAD~1")).stdout.strip()
    await stage_all(wt)
    assert await read_staged(wt, since=before) is None


async def test_a_story_whose_agent_committed_nothing_starts_no_git_status(tmp_path: Path) -> None:
    """The story's own flow: its change is read once, for the check and for the secret scan."""
    from bot.orchestration.story import run_story
    from bot.plan.state import StoryStatus
    from tests.execution_support import agent_script, approved_state, config_for, make_remote, make_run

    script = agent_script(tmp_path, "agent.sh", 'echo done > "$2/story-001.txt"\n')
    prd = "version: 1\ntitle: One\nsummary: s\nstories:\n  - id: STORY-001\n    title: Write\n"
    prd += "    acceptance_criteria: [\"story-001.txt contains the line 'done'\"]\n"
    run = make_run(tmp_path, make_remote(tmp_path), approved_state(prd), config_for(script))
    await run.mirror.ensure()
    await run.mirror.fetch()
    with audit_threads("subprocess.Popen", lambda args: "status" in args[1]) as listed:
        await run_story(run, "STORY-001", "refs/remotes/origin/main")
    assert run.state.stories["STORY-001"].status == StoryStatus.PASSED
    assert listed == []
