"""Writing to the fake GitHub's bare repository the way GitHub's servers do, without a work tree.

- `merge_tree`: the tree a merge of two commits gives, or None when they conflict (what
  `mergeable` and the merge button depend on); needs git 2.38 (`merge-tree --write-tree`);
- `replay`: commits re-applied one by one on a new parent, as `git rebase` does without
  `--rebase-merges` (the "Rebase and merge" button). git 2.39 has no `merge-tree --merge-base`,
  so each step merges `theirs` with a throwaway commit of `ours`' tree whose only parent is
  `theirs`' parent: their merge base is then exactly that parent, as in a cherry-pick;
- `write_files`: a new tree from a parent's with some files changed, in a temporary index;
- `commit`, `move_branch`, `delete_branch`: objects and refs, refs moved only from the value
  the caller saw (a compare-and-swap, as a push is).
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot.testing.fake_github_git import read_commit, run_git

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
ZERO = "0" * 40


class GitWriteError(RuntimeError):
    """git refused a write the fake expected to succeed (a ref moved under it, a broken object)."""


@dataclass(frozen=True)
class Person:
    """An author or committer; `date` (ISO 8601) defaults to now."""

    name: str
    email: str
    date: str | None = None

    def env(self, role: str) -> dict[str, str]:
        env = {f"GIT_{role}_NAME": self.name, f"GIT_{role}_EMAIL": self.email}
        if self.date:
            env[f"GIT_{role}_DATE"] = self.date
        return env


GITHUB = Person("GitHub", "noreply@github.com")
"""The committer of every commit GitHub's merge buttons create."""


def _ok(done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        raise GitWriteError(f"{what}: {done.stderr.strip()}")
    return done.stdout.strip()


def tree_of(git_dir: Path, rev: str) -> str:
    return _ok(run_git(git_dir, "rev-parse", "--verify", f"{rev}^{{tree}}"), f"tree of {rev}")


def merge_tree(git_dir: Path, ours: str, theirs: str) -> str | None:
    """The tree of merging `theirs` into `ours` (from their merge base), or None on a conflict."""
    done = run_git(git_dir, "merge-tree", "--write-tree", "--no-messages", ours, theirs)
    if done.returncode == 1:
        return None
    return _ok(done, f"merge-tree {ours} {theirs}").split()[0]


def commit(
    git_dir: Path, *, tree: str, parents: list[str], message: str, author: Person, committer: Person = GITHUB
) -> str:
    args = ["commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    env = author.env("AUTHOR") | committer.env("COMMITTER")
    return _ok(run_git(git_dir, *args, "-F", "-", env=env, stdin=message), "commit-tree")


def move_branch(git_dir: Path, branch: str, new: str, old: str | None) -> None:
    """Point `branch` at `new` if it is still at `old` (None: create it; it must not exist)."""
    done = run_git(git_dir, "update-ref", f"refs/heads/{branch}", new, old or ZERO)
    _ok(done, f"moving {branch}")


def delete_branch(git_dir: Path, branch: str, old: str) -> None:
    _ok(run_git(git_dir, "update-ref", "-d", f"refs/heads/{branch}", old), f"deleting {branch}")


def rebase_todo(git_dir: Path, onto: str, head: str) -> list[str]:
    """What `git rebase onto` would replay of `head`: its non-merge commits not in `onto`
    (nor already there as the same patch), parents before children."""
    done = run_git(
        git_dir, "rev-list", "--reverse", "--topo-order", "--no-merges", "--cherry-pick", "--right-only",
        f"{onto}...{head}", "--",
    )  # fmt: skip
    return _ok(done, "rev-list").split()


def replay(git_dir: Path, onto: str, commits: list[str]) -> str | None:
    """`commits` re-applied one by one on `onto` as new commits (authors kept, GitHub commits
    them); a commit that changes nothing any more is dropped, as `git rebase` drops it.

    Returns the last new commit (`onto` when every commit was dropped), or None when a commit
    does not apply (a conflict) or has no parent to diff against.
    """
    tip = onto
    for sha in commits:
        original = read_commit(git_dir, sha)
        if original is None or len(original.parents) != 1:
            return None
        parent = original.parents[0]
        ours = commit(git_dir, tree=tree_of(git_dir, tip), parents=[parent], message="replay", author=GITHUB)
        tree = merge_tree(git_dir, ours, sha)
        if tree is None:
            return None
        if tree == tree_of(git_dir, tip) and tree_of(git_dir, sha) != tree_of(git_dir, parent):
            continue  # its change is there already
        author = Person(original.author_name, original.author_email, original.author_date)
        tip = commit(git_dir, tree=tree, parents=[tip], message=original.message + "\n", author=author)
    return tip


def write_files(git_dir: Path, parent: str | None, files: dict[str, str | None]) -> str:
    """The tree of `parent` with `files` written (path → text) or removed (path → None)."""
    with tempfile.TemporaryDirectory(prefix="fake-github-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _ok(run_git(git_dir, "read-tree", parent or EMPTY_TREE, env=env), "read-tree")
        lines = []
        for path, text in files.items():
            if text is None:  # mode 0 removes the entry (`--force-remove` wants a work tree)
                lines.append(f"0 {ZERO}\t{path}\n")
                continue
            blob = _ok(run_git(git_dir, "hash-object", "-w", "--stdin", stdin=text), "hash-object")
            lines.append(f"100644 {blob}\t{path}\n")
        done = run_git(git_dir, "update-index", "--index-info", env=env, stdin="".join(lines))
        _ok(done, "update-index")
        return _ok(run_git(git_dir, "write-tree", env=env), "write-tree")


def changed_paths(git_dir: Path, sha: str) -> dict[str, list[str]]:
    """What a commit changed against its first parent, as a `push` delivery lists it."""
    found = read_commit(git_dir, sha)
    parent = found.parents[0] if found is not None and found.parents else EMPTY_TREE
    done = run_git(git_dir, "diff", "--name-status", "--no-renames", "-z", parent, sha, "--")
    fields = _ok(done, "diff").split("\0")
    changes: dict[str, list[str]] = {"added": [], "removed": [], "modified": []}
    kinds = {"A": "added", "D": "removed"}
    for status, path in zip(fields[0::2], fields[1::2], strict=False):
        if path:
            changes[kinds.get(status[:1], "modified")].append(path)
    return changes
