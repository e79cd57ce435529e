"""Repositories whose git output is far larger than their objects: a few KB on disk that print
hundreds of MB (a blob of one repeated line; trees that hold the same subtree twice, level after
level). Built straight into a bare repository's object store: nothing is checked out.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

LINE = b"all work and no play makes jack a dull boy\n"
ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "Bomb",
    "GIT_AUTHOR_EMAIL": "bomb@example.com",
    "GIT_COMMITTER_NAME": "Bomb",
    "GIT_COMMITTER_EMAIL": "bomb@example.com",
}


@dataclass(frozen=True)
class Bomb:
    """A bare repository: ``base`` has one small file; ``head`` adds the bombs."""

    path: Path
    base: str
    head: str
    big: str
    """The path of the blob of ``big_bytes`` bytes of `LINE` (also at ``AGENTS.md``)."""
    big_bytes: int
    tree_files: int
    """How many paths the doubling tree under ``d/`` lists."""


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=ENV, input=stdin, capture_output=True, check=True, timeout=120
    )
    return done.stdout.decode().strip()


def _blob_of_lines(repo: Path, size: int) -> str:
    """Write a blob of ``size`` bytes of `LINE` from a generator (never whole in memory)."""
    proc = subprocess.Popen(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=repo,
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    chunk = LINE * (2**20 // len(LINE))
    left = size
    while left > 0:
        piece = chunk[:left]
        proc.stdin.write(piece)
        left -= len(piece)
    proc.stdin.close()
    sha = proc.stdout.read().decode().strip()
    assert proc.wait(timeout=120) == 0
    return sha


def _tree(repo: Path, entries: list[tuple[str, str, str]]) -> str:
    """``git mktree`` of (mode, sha, name) entries."""
    kinds = {"100644": "blob", "040000": "tree"}
    listing = "".join(f"{mode} {kinds[mode]} {sha}\t{name}\n" for mode, sha, name in entries)
    return _git(repo, "mktree", stdin=listing.encode())


def build(path: Path, *, big_bytes: int, levels: int) -> Bomb:
    """The bomb repository at ``path``: a blob of ``big_bytes`` and a tree of 2**levels paths."""
    path.mkdir(parents=True)
    _git(path, "init", "--bare", "-q", "-b", "main")
    small = _git(path, "hash-object", "-w", "--stdin", stdin=b"work\n")
    base_tree = _tree(path, [("100644", small, "small.txt")])
    base = _git(path, "commit-tree", base_tree, "-m", "base")
    big = _blob_of_lines(path, big_bytes)
    level = _tree(path, [("100644", small, "work.txt")])
    for _ in range(levels):
        level = _tree(path, [("040000", level, "aaaaaaaa"), ("040000", level, "bbbbbbbb")])
    head_tree = _tree(
        path,
        [
            ("100644", big, "AGENTS.md"),
            ("100644", big, "big.txt"),
            ("040000", level, "d"),
            ("100644", small, "small.txt"),
        ],
    )
    head = _git(path, "commit-tree", head_tree, "-p", base, "-m", "a few KB that print hundreds of MB")
    _git(path, "update-ref", "refs/heads/main", head)
    return Bomb(path, base, head, "big.txt", big_bytes, 2**levels)
