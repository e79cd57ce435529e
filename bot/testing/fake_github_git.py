"""What the fake GitHub knows of a repository's commits: a real bare git directory, when it has one.

GitHub's REST API refuses check runs on commits it does not have and pull requests whose
branches are missing or hold no new commits; the fake answers the same from the bare
repository the tests push to (the `file://` clone URL), or from commits and branches a test
registered by hand (`FakeGitHub.add_commit`, `add_branch`) when there is no git directory.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

_SHA = re.compile(r"^[0-9a-f]{40}$")
_NOREPLY = re.compile(
    r"^(?:\d+\+)?([A-Za-z0-9-]+(?:\[bot\])?)@users\.noreply\.[A-Za-z0-9.-]+$", re.IGNORECASE
)


def is_sha(value: str) -> bool:
    """A full 40-character hex object name."""
    return bool(_SHA.match(value or ""))


def noreply_login(email: str) -> str | None:
    """The login GitHub maps a `…@users.noreply.<its host>` address to."""
    match = _NOREPLY.match(email.strip())
    return match.group(1) if match else None


@dataclass(frozen=True)
class GitCommit:
    """One commit as the commits API describes it."""

    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    author_date: str
    committer_name: str
    committer_email: str
    committer_date: str
    message: str


def run_git(
    git_dir: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """git on the bare repository, without any user's or system's configuration."""
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), *args],
        capture_output=True,
        text=True,
        check=False,
        input=stdin,
        env={
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": "/nonexistent",
            **(env or {}),
        },
    )


def resolve(git_dir: Path, ref: str) -> str | None:
    """The commit `ref` (a branch name, `refs/…` or a sha) names, or None."""
    if not ref or ref.startswith("-"):
        return None
    candidates = [ref] if ref.startswith("refs/") or is_sha(ref) else [f"refs/heads/{ref}", ref]
    for candidate in candidates:
        done = run_git(
            git_dir, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}"
        )
        if done.returncode == 0:
            return done.stdout.strip()
    return None


def branch_sha(git_dir: Path, branch: str) -> str | None:
    """The tip of `refs/heads/<branch>`, or None when there is no such branch."""
    if not branch or branch.startswith("-"):
        return None
    done = run_git(git_dir, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}")
    return done.stdout.strip() if done.returncode == 0 else None


_FORMAT = "%H%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%cn%x1f%ce%x1f%cI%x1f%B%x1e"


def _parse(output: str) -> list[GitCommit]:
    commits = []
    for record in output.split("\x1e"):
        fields = record.strip("\n").split("\x1f")
        if len(fields) != 9:
            continue
        sha, parents, an, ae, ad, cn, ce, cd, message = fields
        commits.append(GitCommit(sha, tuple(parents.split()), an, ae, ad, cn, ce, cd, message.strip()))
    return commits


def commits_between(git_dir: Path, base: str, head: str) -> list[GitCommit]:
    """Commits reachable from `head` and not from `base`, oldest first (what a PR shows)."""
    done = run_git(git_dir, "log", "--reverse", f"--format={_FORMAT}", f"{base}..{head}", "--")
    return _parse(done.stdout) if done.returncode == 0 else []


def read_commit(git_dir: Path, sha: str) -> GitCommit | None:
    """One commit, or None when the repository does not have it."""
    if not is_sha(sha):
        return None
    done = run_git(git_dir, "log", "-1", f"--format={_FORMAT}", sha, "--")
    found = _parse(done.stdout) if done.returncode == 0 else []
    return found[0] if found else None


def show_file(git_dir: Path, ref: str, path: str) -> str | None:
    """The text of `path` at `ref`, or None."""
    sha = resolve(git_dir, ref)
    if sha is None or path.startswith("-"):
        return None
    done = run_git(git_dir, "cat-file", "blob", f"{sha}:{path}")
    return done.stdout if done.returncode == 0 else None


def list_files(git_dir: Path, ref: str) -> dict[str, str]:
    """Every file at `ref`: path → text (the tree API's view, for small test repositories)."""
    sha = resolve(git_dir, ref)
    if sha is None:
        return {}
    done = run_git(git_dir, "ls-tree", "-r", "--name-only", "-z", sha)
    files = {}
    for path in done.stdout.split("\0"):
        if path:
            files[path] = show_file(git_dir, sha, path) or ""
    return files


def pull_diff(git_dir: Path, base: str, head: str) -> str | None:
    """The diff a pull request shows: from the merge base of `base` and `head` to `head`."""
    base_sha, head_sha = resolve(git_dir, base), resolve(git_dir, head)
    if base_sha is None or head_sha is None:
        return None
    done = run_git(git_dir, "diff", "--no-color", "--no-ext-diff", f"{base_sha}...{head_sha}")
    return done.stdout if done.returncode == 0 else None
