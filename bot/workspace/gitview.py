"""What a sandbox sees of its worktree's git: the history read-only, a HEAD and index of its own.

A worktree's `.git` file names its admin dir in the bare mirror (`<mirror>/worktrees/<id>`: HEAD,
index, logs, `commondir`, `gitdir`), and `commondir` leads to the mirror itself (objects, refs,
tags, packed-refs, config). Confined, a process sees, at the paths the `.git` file names:

- the mirror **read-only** (so `git log`, `git diff`, `git status`, `git describe --tags` work,
  and projects that take their version from git tags install with it);
- `<mirror>/worktrees` empty but for its own worktree: the admin dirs of other worktrees stay out
  of sight;
- over its own admin dir, a **scratch copy** of it, read-write, kept under the data dir where no
  sandbox reaches it by any other path and refreshed from the real one each time a confinement is
  made. What the process writes there (`git add`'s index, `git checkout`'s HEAD,
  `config.worktree`) never reaches the admin dir the bot's git uses, and is gone next time.

Writing objects or refs fails (the mirror is read-only): `git commit`, `git add` of new content,
`git stash`, `git fetch` do not work inside; the bot commits the worktree's files itself. Nothing
else of the data dir becomes visible: not the other mirrors, the caches, the database or the key.
The mirror holds no secret (the installation token only ever travels in git's environment).
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

SCRATCH_DIR = "sandbox-git"
"""Under the data dir: `<data>/sandbox-git/<mirror>/<worktree id>`, one scratch admin dir each."""


def scratch_for(*, root: Path, mirror: Path, admin_id: str) -> Path:
    """Where the scratch copy of the admin dir `admin_id` of `mirror` lives (the bot's alone)."""
    return root / SCRATCH_DIR / mirror.name / admin_id


@dataclass(frozen=True)
class GitView:
    """A worktree's git as its sandbox sees it; all paths are real (symlink-free) host paths."""

    mirror: Path
    """The bare mirror, bound read-only at its own path."""
    admin: Path
    """The worktree's admin dir in the mirror (what its `.git` file names): the scratch goes over it."""
    scratch: Path
    """The read-write copy of `admin` that the sandbox sees in its place."""

    def refresh(self) -> None:
        """Make the scratch copy the real admin dir's current files again (what the bot's git sees)."""
        remove_scratch(self.scratch)
        self.scratch.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.admin, self.scratch, symlinks=True)

    def mounts(self) -> list[str]:
        """The bubblewrap options that show this view (after the worktree's own binds)."""
        others = self.mirror / "worktrees"
        return [
            "--ro-bind", str(self.mirror), str(self.mirror),
            "--tmpfs", str(others),
            "--bind", str(self.scratch), str(self.admin),
            "--remount-ro", str(others),
        ]  # fmt: skip


def remove_scratch(path: Path) -> None:
    """Delete a scratch admin dir, whatever a sandbox left in it: symlinks are removed, never
    followed, and directories it made unwritable are opened up first (for a bot that is not root).
    Its sandboxes are gone by then (each dies with its command), so nothing changes it meanwhile."""
    if path.is_symlink():
        path.unlink()
        return
    if not path.is_dir():
        return
    path.chmod(stat.S_IRWXU)
    for top, dirs, _ in os.walk(path):
        for name in dirs:
            inner = os.path.join(top, name)
            if not os.path.islink(inner):
                os.chmod(inner, stat.S_IRWXU)
    shutil.rmtree(path)
