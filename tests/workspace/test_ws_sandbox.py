"""resolve_path and is_denied: every way out of the worktree is refused, normal paths pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.errors import SandboxViolation
from bot.sandbox import is_denied, resolve_path

DENY = [".github/workflows/**", "*.pem", "secrets"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A worktree-like directory with a .git file, a subdir, and symlinks in and out."""
    root = tmp_path / "repo"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / ".git").write_text("gitdir: /somewhere/else\n")
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret\n")
    os.symlink(outside, root / "out_dir")
    os.symlink(outside / "secret.txt", root / "out_file")
    os.symlink(tmp_path / "outside" / "missing.txt", root / "out_dangling")
    os.symlink("src/pkg", root / "in_dir")
    os.symlink(".git", root / "git_alias")
    return root


@pytest.mark.parametrize(
    ("user_path", "write"),
    [
        ("src/pkg/mod.py", False),
        ("src/pkg/mod.py", True),
        ("src/new/file.py", True),
        ("./src//pkg/../pkg/mod.py", True),
        ("src/pkg/..", False),
        (".", False),
        (".git", False),
        (".github/workflows/ci.yml", False),
        ("notes.pem", False),
        ("~notes.txt", True),
    ],
)
def test_normal_paths_are_allowed(root: Path, user_path: str, write: bool) -> None:
    resolved = resolve_path(root, user_path, write=write, deny=DENY)
    assert resolved == (root / user_path).resolve()
    assert resolved.is_relative_to(root.resolve())


def test_symlink_inside_the_root_resolves_to_its_target(root: Path) -> None:
    assert resolve_path(root, "in_dir/mod.py", write=True) == (root / "src" / "pkg" / "mod.py").resolve()


@pytest.mark.parametrize(
    ("user_path", "write", "reason"),
    [
        ("/etc/passwd", False, "absolute"),
        ("~/.ssh/id_rsa", False, "absolute"),
        ("../outside/secret.txt", False, r"'\.\.'"),
        ("src/../../outside/secret.txt", False, r"'\.\.'"),
        ("src/pkg/../../..", False, r"'\.\.'"),
        ("out_dir/secret.txt", False, "symlink"),
        ("out_file", False, "symlink"),
        ("out_file", True, "symlink"),
        ("out_dangling", True, "symlink"),
        ("out_dir/../outside/secret.txt", False, "symlink"),  # lexically inside, really outside
        (".git", True, r"\.git"),
        (".git/hooks/pre-commit", True, r"\.git"),
        ("src/sub/.git/config", True, r"\.git"),
        ("git_alias", True, r"\.git"),
        (".github/workflows/ci.yml", True, "denied"),
        (".github/workflows/nested/new.yml", True, "denied"),
        ("certs/deep/key.pem", True, "denied"),
        ("secrets/token.txt", True, "denied"),
        ("in\0valid", False, "NUL"),
        (".", True, "root"),
    ],
)
def test_escapes_are_refused(root: Path, user_path: str, write: bool, reason: str) -> None:
    with pytest.raises(SandboxViolation, match=reason) as caught:
        resolve_path(root, user_path, write=write, deny=DENY)
    assert caught.value.message.startswith("path ")


@pytest.mark.parametrize(
    ("rel", "globs", "expected"),
    [
        (".github/workflows/ci.yml", [".github/workflows/**"], True),
        (".github/workflows/a/b.yml", [".github/workflows/**"], True),
        (".github/dependabot.yml", [".github/workflows/**"], False),
        ("a/b/c.lock", ["**/*.lock"], True),
        ("c.lock", ["**/*.lock"], True),
        ("a/b/c.lock", ["a/*.lock"], False),
        ("a/c.lock", ["a/*.lock"], True),
        ("deep/dir/id.pem", ["*.pem"], True),
        ("vendor/lib/x.py", ["vendor"], True),
        ("src/vendor.py", ["vendor"], False),
        ("docs/a.md", ["docs/?.md"], True),
        ("docs/ab.md", ["docs/?.md"], False),
        ("x/file1", ["x/file[0-9]"], True),
        ("x/filea", ["x/file[!0-9]"], True),
        ("x/file1", ["x/file[!0-9]"], False),
        ("README.md", [], False),
        ("a+b(c).txt", ["a+b(c).txt"], True),
    ],
)
def test_is_denied(rel: str, globs: list[str], expected: bool) -> None:
    assert is_denied(rel, globs) is expected
