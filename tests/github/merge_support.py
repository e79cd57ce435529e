"""A fake GitHub over a real bare repository holding a stack of batch branches like the bot's:
batch 1 is two `--no-ff` merges of story branches on `main`, batch 2 one more on batch 1."""

from __future__ import annotations

from pathlib import Path

from bot.testing.fake_github import FakeGitHub
from tests.execution_support import git, make_remote

REPO = "octo/widgets"
BATCH_1 = "plan-cascade/1/batch-1"
BATCH_2 = "plan-cascade/1/batch-2"
INSTALLATION = 77


def fake_with_remote(tmp: Path) -> tuple[FakeGitHub, Path]:
    remote = make_remote(tmp, {"README.md": "# widgets\n"})
    fake = FakeGitHub(installation_id=INSTALLATION)
    fake.add_repo(REPO, clone_url=f"file://{remote}")
    return fake, remote


def build_stack(tmp: Path, remote: Path) -> None:
    """Push BATCH_1 (stories a and b merged `--no-ff` on main) and BATCH_2 (story c on it)."""
    work = tmp / "stack"
    git("clone", "-q", str(remote), str(work), cwd=tmp)

    def story(name: str, base: str, path: str, message: str) -> None:
        git("checkout", "-q", "-b", name, base, cwd=work)
        (work / path).write_text(f"{path}\n")
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", message, cwd=work)

    story("story-a", "main", "a.txt", "Add a")
    story("story-b", "main", "b.txt", "Add b")
    git("checkout", "-q", "-b", BATCH_1, "main", cwd=work)
    git("merge", "-q", "--no-ff", "-m", "Merge story a", "story-a", cwd=work)
    git("merge", "-q", "--no-ff", "-m", "Merge story b", "story-b", cwd=work)
    story("story-c", BATCH_1, "c.txt", "Add c")
    git("checkout", "-q", "-b", BATCH_2, BATCH_1, cwd=work)
    git("merge", "-q", "--no-ff", "-m", "Merge story c", "story-c", cwd=work)
    git("push", "-q", "origin", BATCH_1, BATCH_2, cwd=work)


def head(remote: Path, rev: str) -> str:
    return git("rev-parse", rev, cwd=remote)
