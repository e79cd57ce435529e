"""Fixtures for the agent tests: a real git worktree, an empty HOME outside it, a task builder."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bot.agent import AgentTask
from bot.config.repo import AgentLimits
from tests.agent.agent_builders import MakeTask
from tests.plan.plan_builders import build_prd, build_story


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    """A git repository with README.md, src/app.py and .github/workflows/ci.yml."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "README.md").write_text("hello\n")
    (root / "src" / "app.py").write_text("def main():\n    return 'v1'\n")
    (root / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    done = subprocess.run(
        ["git", "init", "-q", str(root)],
        capture_output=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty HOME outside the worktree."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def make_task(worktree: Path, home: Path, tmp_path: Path) -> MakeTask:
    """Build an AgentTask for STORY-001 in `worktree`; keyword arguments override fields.

    `limits` may be given as a dict of AgentLimits fields.
    """

    def build(**overrides: Any) -> AgentTask:
        story = build_story(1, title="Change the greeting", files=["src/app.py"])
        values: dict[str, Any] = {
            "story": story,
            "prd": build_prd(story),
            "phase": "implementation",
            "worktree": worktree,
            "home": home,
            "prompt": "Change the greeting in src/app.py to v2.",
            "deny": [".github/workflows/**"],
            "transcript_path": tmp_path / "transcripts" / "STORY-001.jsonl",
        }
        limits = overrides.pop("limits", {})
        values["limits"] = AgentLimits(**limits) if isinstance(limits, dict) else limits
        values.update(overrides)
        return AgentTask(**values)

    return build
