"""Pushing commits to the fake GitHub's remote, as a contributor would."""

from __future__ import annotations

from pathlib import Path

from tests.execution_support import git


def push_branch(tmp: Path, remote: Path, branch: str, files: dict[str, str], email: str) -> str:
    """Commit `files` on top of main as `email` and push it as `branch`; returns the sha."""
    work = tmp / f"work-{branch.replace('/', '-')}"
    git("clone", "-q", str(remote), str(work), cwd=tmp)
    git("checkout", "-q", "-b", branch, cwd=work)
    for name, text in files.items():
        (work / name).write_text(text)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "change", cwd=work, email=email)
    git("push", "-q", "origin", branch, cwd=work)
    return git("rev-parse", "HEAD", cwd=work).strip()
