"""What a sandbox sees of its worktree's git: the history to read, and a repository of its own to write.

A worktree's `.git` file names its admin dir in the bare mirror (`<mirror>/worktrees/<id>`: HEAD,
index, logs, `commondir`, `gitdir`), and `commondir` leads to the mirror (objects, refs, tags,
packed-refs, config). Confined, a process sees at those paths a **private copy** of them, made
from the real ones each time a confinement is made and kept under the data dir, where no sandbox
reaches it by any other path:

- `<mirror>`: the mirror's HEAD, config, `info/` and refs (branches and tags, all in one
  `packed-refs`), read-write;
- `<mirror>/worktrees/<id>`: its own worktree's admin dir, read-write; no other worktree's;
- `<mirror>/objects`: an empty object store, read-write, whose `info/alternates` names the
  mirror's real objects, bound read-only at `<mirror>/objects/shared`.

So every git command works inside, `git log`/`diff`/`status`/`describe --tags` as well as `add`,
`stash`, `commit` and `switch -c`, and a project that takes its version from its tags installs
with it; but what a process writes (objects, refs, HEAD, index, config) lands in its private copy:
it never reaches the bot's git, and the next confinement starts again from what the bot's git sees.
The work that counts is the worktree's files, which the bot commits itself. Nothing else of the
data dir shows: not the other mirrors, the caches, the database or the key, nor the mirror's
reflogs, hooks or `FETCH_HEAD`. The mirror holds no secret anyway (the installation token only
ever travels in git's environment).

Making the copy is file I/O (a few dozen files and folders to remove and to make, each a
millisecond or more on a slow disk): `refresh` is called from a thread, never on the event loop
(see `Sandbox.confinement`).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from bot.errors import WorkspaceError

SCRATCH_DIR = "sandbox-git"
"""Under the data dir: `<data>/sandbox-git/<mirror>/<worktree id>`, one private repository each."""
SHARED = "shared"
"""Where the mirror's real objects show inside the private object store (read-only)."""
COPIED = ("HEAD", "config", "shallow")
"""The mirror's own files a repository needs (its refs and `info/` are copied besides)."""
_SHA = re.compile(rb"[0-9a-f]{40}([0-9a-f]{24})?")

PRIVATE_CONFIG = "\n[core]\n\tcheckStat = minimal\n"
"""Added to the copy's config: inside, the worktree's files belong to another uid than the one
the bot's git recorded in the index, and with the default check every `git status` would read
every file again to compare it."""


def scratch_for(*, root: Path, mirror: Path, admin_id: str) -> Path:
    """Where the private copy for the worktree `admin_id` of `mirror` lives (the bot's alone)."""
    return root / SCRATCH_DIR / mirror.name / admin_id


@dataclass(frozen=True)
class GitView:
    """A worktree's git as its sandbox sees it; all paths are real (symlink-free) host paths."""

    mirror: Path
    """The bare mirror: the private copy shows at its path, its real objects read-only inside."""
    admin_id: str
    """The worktree's admin dir in the mirror is `worktrees/<admin_id>` (what its `.git` file names)."""
    scratch: Path
    """The private copy (a bare repository with the worktree's admin dir and no objects of its own)."""

    def refresh(self) -> None:
        """Make the private copy again from what the bot's git sees now."""
        try:
            self._copy()
        except OSError as exc:  # the message reaches the plan comment: no server path in it
            why = exc.strerror or type(exc).__name__
            raise WorkspaceError(f"the sandbox's copy of the repository could not be made ({why})") from exc

    def _copy(self) -> None:
        remove_scratch(self.scratch)
        (self.scratch / "objects" / SHARED).mkdir(parents=True)
        (self.scratch / "objects" / "info").mkdir()
        (self.scratch / "objects" / "info" / "alternates").write_text(f"{self.mirror / 'objects' / SHARED}\n")
        for name in COPIED:
            if (self.mirror / name).is_file():
                shutil.copyfile(self.mirror / name, self.scratch / name)
        with (self.scratch / "config").open("a") as config:
            config.write(PRIVATE_CONFIG)
        _copy_settled(self.mirror / "info", self.scratch / "info")
        for name in ("refs/heads", "refs/tags"):
            (self.scratch / name).mkdir(parents=True)
        _copy_refs(self.mirror, self.scratch)
        admin = Path("worktrees") / self.admin_id
        shutil.copytree(self.mirror / admin, self.scratch / admin, symlinks=True)

    def mounts(self) -> list[str]:
        """The bubblewrap options that show this view (after the worktree's own binds)."""
        return [
            "--bind", str(self.scratch), str(self.mirror),
            "--ro-bind", str(self.mirror / "objects"), str(self.mirror / "objects" / SHARED),
        ]  # fmt: skip


def _copy_settled(source: Path, target: Path) -> None:
    """Copy the files under `source` that are not being written (`*.lock`); ones that vanish
    meanwhile (the bot's git works on other worktrees of the mirror at the same time) are skipped."""
    for top, _, files in os.walk(source):
        here = target / Path(top).relative_to(source)
        here.mkdir(parents=True, exist_ok=True)
        for name in files:
            if not name.endswith(".lock"):
                try:
                    shutil.copyfile(Path(top) / name, here / name)
                except FileNotFoundError:
                    continue


def _copy_refs(source: Path, target: Path) -> None:
    """The branches and tags of `source` into `target` as one `packed-refs`: one file to make
    instead of one per loose ref and per folder of them. A loose ref wins over its packed entry,
    as in git; the loose ones are read first (`pack-refs` may be moving them into `packed-refs`
    meanwhile: read in this order, none is missed). What is no plain commit id (a symbolic ref)
    stays a loose file. No `pack-refs with:` traits are claimed: git peels what has no `^` line."""
    loose: dict[bytes, bytes] = {}
    root = os.fsencode(source)
    for top, _, files in os.walk(os.path.join(root, b"refs")):
        for name in files:
            if name.endswith(b".lock"):
                continue
            try:
                with open(os.path.join(top, name), "rb") as ref:
                    value = ref.read()
            except FileNotFoundError:
                continue  # deleted, or moved into packed-refs, meanwhile
            refname = os.path.relpath(os.path.join(top, name), root).replace(os.sep.encode(), b"/")
            if _SHA.fullmatch(value.strip()):
                loose[refname] = value.strip()
            else:
                path = target / os.fsdecode(refname)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(value)
    try:
        packed = (source / "packed-refs").read_bytes()
    except FileNotFoundError:
        packed = b""
    entries: dict[bytes, bytes] = {}  # refname → its lines in packed-refs (with a tag's `^` line)
    owner: bytes | None = None
    for line in packed.splitlines():
        if line.startswith(b"^"):
            if owner is not None:
                entries[owner] += line + b"\n"
        elif not line.startswith(b"#") and b" " in line:
            owner = line.partition(b" ")[2]
            entries[owner] = line + b"\n"
    entries.update({ref: b"%s %s\n" % (sha, ref) for ref, sha in loose.items()})
    (target / "packed-refs").write_bytes(b"".join(entries[ref] for ref in sorted(entries)))


def remove_scratch(path: Path) -> None:
    """Delete a private copy, whatever a sandbox left in it: symlinks are removed, never
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
