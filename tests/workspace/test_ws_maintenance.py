"""git's automatic upkeep of the mirror: once a run, at its fetch, never after each commit.

A commit-graph task forced to run whenever git's automatic maintenance runs
(`maintenance.commit-graph.auto = -1`) makes the upkeep visible: it writes
`objects/info/commit-graphs/`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import bot.workspace.mirror as mirror_module
from bot.workspace import Mirror, Worktree, add_worktree, commit_staged, stage_all
from tests.workspace.conftest import Git

BOT_NAME, BOT_EMAIL = "plan-cascade[bot]", "123+plan-cascade[bot]@users.noreply.github.com"


@pytest.fixture(autouse=True)
def _keys_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mirror refuses config the bot did not write; these two are the test's own."""
    keys = {"maintenance.commit-graph.enabled", "maintenance.commit-graph.auto"}
    monkeypatch.setattr(mirror_module, "MIRROR_CONFIG_KEYS", mirror_module.MIRROR_CONFIG_KEYS | keys)


def _upkeep_shows(mirror: Mirror, git: Git) -> Path:
    git("config", "maintenance.commit-graph.enabled", "true", cwd=mirror.path)
    git("config", "maintenance.commit-graph.auto", "-1", cwd=mirror.path)
    graphs = mirror.path / "objects" / "info" / "commit-graphs"
    shutil.rmtree(graphs, ignore_errors=True)
    return graphs


async def _changed_worktree(mirror: Mirror, tmp_path: Path, git: Git) -> tuple[Path, Worktree]:
    """Where the upkeep shows, and a worktree with a new file, not staged yet."""
    graphs = _upkeep_shows(mirror, git)
    wt = await add_worktree(mirror, branch="bot/m", base_ref="origin/main", path=tmp_path / "m")
    (wt.path / "new.txt").write_text("new\n")
    return graphs, wt


async def test_a_worktree_commit_starts_no_upkeep_and_the_mirrors_fetch_does(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    graphs, wt = await _changed_worktree(mirror, tmp_path, git)
    await stage_all(wt)
    sha = await commit_staged(wt, message="new", author_name=BOT_NAME, author_email=BOT_EMAIL, trailers={})
    assert sha is not None
    assert not graphs.exists(), "a commit ran git's automatic maintenance"

    await mirror.fetch()
    assert graphs.is_dir(), "the mirror's fetch did not run git's automatic maintenance"


async def test_git_outside_the_bot_still_runs_its_upkeep_after_a_commit(
    mirror: Mirror, tmp_path: Path, git: Git
) -> None:
    """The check above can fail: the same commit made by a plain git does start the upkeep."""
    graphs, wt = await _changed_worktree(mirror, tmp_path, git)
    git("add", "-A", cwd=wt.path)
    git("commit", "-q", "-m", "new", cwd=wt.path)
    assert graphs.is_dir()
