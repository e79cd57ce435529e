"""Real git repositories for workspace tests: a bare "remote" seeded with one commit, and a mirror of it.

Test-side git runs with an explicit cwd and env too (HOME is an empty directory, global
config is /dev/null), so the host's git config can never leak into a result.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.workspace import Mirror, git_env

Git = Callable[..., str]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty HOME: nothing of the host's configuration."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def git(home: Path) -> Git:
    """Run git synchronously for test setup and checks: ``git(*args, cwd=...)`` -> stdout."""
    identity = {
        "HOME": str(home),
        "GIT_AUTHOR_NAME": "Foreign Dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "Foreign Dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
    }

    def run(*args: str, cwd: Path) -> str:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env=git_env(base=identity), capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"git {args} failed: {done.stderr}"
        return done.stdout.strip()

    return run


@pytest.fixture
def remote(tmp_path: Path, git: Git) -> Path:
    """A bare repository with branch ``main`` holding README.md and src/app.py."""
    bare = tmp_path / "remote.git"
    git("init", "--bare", "-q", "-b", "main", str(bare), cwd=tmp_path)
    seed = tmp_path / "seed"
    git("clone", "-q", str(bare), str(seed), cwd=tmp_path)
    (seed / "README.md").write_text("hello\n")
    (seed / "src").mkdir()
    (seed / "src" / "app.py").write_text("print('v1')\n")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "initial", cwd=seed)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=seed)
    return bare


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    """A normal clone of ``remote`` used to make foreign changes (already checked out on main)."""
    return tmp_path / "seed"


@pytest.fixture
async def mirror(tmp_path: Path, remote: Path, home: Path) -> Mirror:
    """A mirror of ``remote`` through a file:// URL, already cloned."""
    mirror = Mirror(root=tmp_path / "work", clone_url=remote.as_uri(), env={"HOME": str(home)})
    await mirror.ensure()
    return mirror


@pytest.fixture
async def planted(mirror: Mirror, seed: Path, git: Git) -> str:
    """A tag `bot/s` on the remote (anyone who can push makes tags) on a commit adding
    `planted.txt`, fetched into the mirror: a merge of branch `bot/s` must never take it."""
    (seed / "planted.txt").write_text("not the story's work\n")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "planted", cwd=seed)
    git("tag", "bot/s", cwd=seed)
    git("push", "-q", "origin", "bot/s", cwd=seed)
    await mirror.fetch()
    return "bot/s"
