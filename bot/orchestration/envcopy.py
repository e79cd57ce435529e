"""The base check's environment, reused: a story's worktree gets a copy instead of a new setup.

The base check prepares the plan's environment once (`.venv`, `node_modules`) in a worktree of
the unchanged base. It is kept under the run's work root, and a story whose worktree holds
the same files setup depends on (every story of the first batch; a later one when nothing it
starts from touched a manifest or added or removed a file) gets a copy of it instead of
running setup again. A copy, never links: what an agent does to its environment stays in its
worktree. Paths of the base worktree written into the environment (console scripts'
interpreter lines, editable installs' `.pth` files and finders, `direct_url.json`) are
rewritten to the story's worktree, so the copy works where it lands.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import logging
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import ValidationError

from bot.environment.setup import ENV_DIRS
from bot.errors import WorkspaceError
from bot.gates.report import GateResult
from bot.orchestration.run import Run
from bot.orchestration.setup import setup_spec
from bot.plan.blocked import BlockedRequest
from bot.sandbox.process import run_process
from bot.sandbox.removal import discard, remove_tree
from bot.workspace.worktree import Worktree, head_sha

log = logging.getLogger(__name__)
KEPT = ".base-env"
_ORIGIN = "origin.json"
_NAMES = tuple(d.rstrip("/") for d in ENV_DIRS)
_SETUP_FILES = re.compile(
    r"(^|/)(pyproject\.toml|setup\.py|setup\.cfg|MANIFEST\.in|tox\.ini|[^/]*requirements[^/]*\.(txt|in)|"
    r"requirements/[^/]+|[^/]*\.lock|package\.json|package-lock\.json|npm-shrinkwrap\.json|"
    r"pnpm-lock\.yaml|pnpm-workspace\.yaml|\.npmrc|\.yarnrc(\.yml)?|\.python-version|go\.(mod|sum)|"
    r"Cargo\.(toml|lock)|\.gitmodules)$"
)
_REWRITE_LIMIT = 2_000_000
_FILES = "files"
MAX_WRITTEN_FILES = 20_000
MAX_WRITTEN_BYTES = 256 * 1024 * 1024
OUTPUT_CHARS = 20_000


def kept_dir(run: Run) -> Path:
    """Where the base check leaves its environment for the stories of this run."""
    return run.work_root / KEPT


async def setup_wrote(wt: Worktree) -> list[str] | None:
    """The files setup left in the worktree besides the environments (a version file written at
    build time, an in-place extension, `*.egg-info`): what a copy must bring too. None when
    there are too many to copy (then each story runs setup itself)."""
    try:
        listed = await wt.git("ls-files", "-z", "--others")
    except WorkspaceError:
        return None
    paths = [p for p in listed.stdout.split("\0") if p and not p.startswith(tuple(ENV_DIRS))]
    if len(paths) > MAX_WRITTEN_FILES:
        return None
    size = await asyncio.to_thread(_total_size, wt.path, paths)  # thousands of stat calls: off the loop
    return paths if size <= MAX_WRITTEN_BYTES else None


def _total_size(root: Path, paths: list[str]) -> int:
    size = 0
    for path in paths:
        try:
            size += (root / path).lstat().st_size
        except OSError:
            continue
    return size


async def keep_base_environment(
    run: Run, wt: Worktree, *, output: str, written: list[str] | None, blocked: Sequence[BlockedRequest] = ()
) -> bool:
    """Move the environment setup made in the base check's worktree aside for the stories; whether
    it was (the base check's gates then run in a copy of it, `reuse_base_environment`).

    `output` (setup's, on the base) is shown again in each story's setup check that copies it;
    `written` are the other files setup left in the worktree (`setup_wrote`), copied with it;
    `blocked` what the egress proxy refused setup there (each story that copies it reports it).
    """
    kept = kept_dir(run)
    await asyncio.to_thread(remove_tree, kept)
    if written is None:
        return False
    # Walking the tree (a `.venv`, `node_modules`) and copying thousands of files: off the loop.
    moved = await asyncio.to_thread(_keep, wt.path, kept, written)
    if moved is None:
        return False  # an environment all over the tree: each story sets up its own
    origin = {
        "path": str(wt.path),
        "base": await head_sha(wt),
        "setup": run.state.setup,
        "dirs": moved,
        "files": (kept / _FILES).is_dir(),
        "output": output[-OUTPUT_CHARS:],
        "blocked": [b.model_dump(mode="json") for b in blocked],
    }
    (kept / _ORIGIN).write_text(json.dumps(origin))
    return True


def _keep(root: Path, kept: Path, written: list[str]) -> list[str] | None:
    """Move the environments of `root` and copy what setup wrote into `kept`: the environments
    moved, or None when a `node_modules` below the top level (a workspace's) makes it unfit."""
    if _nested_node_modules(root):
        return None
    kept.mkdir(parents=True)
    moved = []
    for name in _NAMES:
        if (root / name).is_dir() and not (root / name).is_symlink():
            (root / name).rename(kept / name)
            moved.append(name)
    for path in written:
        source, target = root / path, kept / _FILES / path
        if source.is_file() or source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    return moved


def _nested_node_modules(root: Path) -> bool:
    """Whether a `node_modules` folder sits below the top level, outside any other `node_modules`."""
    for folder, dirs, _files in os.walk(root):
        if folder != str(root) and "node_modules" in dirs:
            return True
        dirs[:] = [d for d in dirs if d != "node_modules"]  # what is inside one never counts
    return False


async def reuse_base_environment(run: Run, wt: Worktree) -> GateResult | None:
    """A copy of the base check's environment in `wt` (its setup result), or None to run setup."""
    origin = _origin(run)
    if origin is None or origin.get("setup") != run.state.setup:
        return None
    started = time.monotonic()
    if not await _same_setup_files(run, origin["base"], await head_sha(wt)):
        return None
    copied = []
    for name in origin["dirs"]:
        target = wt.path / name
        if target.exists() or target.is_symlink():
            return None  # the branch tracks it (or a resumed worktree kept one): set up as usual
        proc = await run_process(
            ["cp", "-a", "--reflink=auto", str(kept_dir(run) / name), str(target)],
            cwd=wt.path,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            timeout=600,
            output_limit=4000,
        )
        if proc.exit_code != 0:
            log.warning("could not copy the base environment %s: %s", name, proc.output.strip()[-300:])
            await discard(target)
            return None
        copied.append(name)
    if origin.get("files"):  # on top of the checkout: setup's files are not tracked
        proc = await run_process(
            ["cp", "-a", "--reflink=auto", "-n", f"{kept_dir(run) / _FILES}/.", str(wt.path)],
            cwd=wt.path,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            timeout=600,
            output_limit=4000,
        )
        if proc.exit_code != 0:
            log.warning("could not copy what setup wrote on the base: %s", proc.output.strip()[-300:])
            return None
    if ".venv" in copied and origin["path"] != str(wt.path):  # (the base check's own gates: in place)
        await asyncio.to_thread(relocate, wt.path / ".venv", old=origin["path"], new=str(wt.path))
    took = time.monotonic() - started
    note = (
        f"The environment ({', '.join(copied) or 'nothing to copy'}) was copied from the one setup made on "
        f"the unchanged base ({origin['base'][:12]}) in {took:.1f} s; the setup commands did not run "
        "again, because no file they read differs here.\n\nTheir output on the base:\n"
    ) + str(origin.get("output", ""))
    return GateResult(
        name=setup_spec(run).name,
        command=setup_spec(run).command,
        exit_code=0,
        output=note,
        duration_s=took,
        blocked=_blocked(origin),
    )


def _blocked(origin: dict) -> list[BlockedRequest]:  # type: ignore[type-arg]
    """What the egress proxy refused the setup that made the copied environment."""
    try:
        return [BlockedRequest.model_validate(b) for b in origin.get("blocked", [])]
    except ValidationError:
        return []


def _origin(run: Run) -> dict | None:  # type: ignore[type-arg]
    try:
        origin = json.loads((kept_dir(run) / _ORIGIN).read_text())
    except (OSError, ValueError):
        return None
    return origin if isinstance(origin, dict) else None


async def _changes(run: Run, base: str, head: str) -> list[tuple[str, str]] | None:
    """(status, path) of each file that differs between two commits; None when git cannot tell."""
    try:
        result = await run.mirror.git("diff", "--no-renames", "--name-status", "-z", base, head)
    except WorkspaceError:
        return None
    fields = result.stdout.split("\0")
    return list(zip(fields[::2], fields[1::2], strict=False))


async def _same_setup_files(run: Run, base: str, head: str) -> bool:
    """Nothing setup reads differs between `base` and `head`, and no file was added or removed."""
    if base == head:
        return True
    changes = await _changes(run, base, head)
    return changes is not None and all(s == "M" and not _SETUP_FILES.search(p) for s, p in changes)


async def setup_files_changed(run: Run, base: str | None, head: str) -> bool:
    """Whether a file setup reads (a manifest, a lock file) differs between `base` and `head`."""
    if base is None or base == head:
        return base is None
    changes = await _changes(run, base, head)
    return changes is None or any(_SETUP_FILES.search(p) for _, p in changes)


def relocate(venv: Path, *, old: str, new: str) -> int:
    """Rewrite `old` (the base worktree) to `new` in the files of `venv` that name it; how many.

    Those are the console scripts' `#!` lines, `pyvenv.cfg`, editable installs' `.pth` files and
    finders, and `direct_url.json`: the places installers write absolute paths. Setup (the
    repository's code) made this folder and this runs unconfined, so no symlink is ever followed:
    every folder and file is opened relative to its parent's descriptor with `O_NOFOLLOW`, a
    linked one is left as it is, and a file is replaced (never written through), keeping its mode.
    """
    before, after = old.encode(), new.encode()
    try:
        root = _open_folder(str(venv))
    except OSError:
        return 0
    changed = 0
    try:
        changed += _rewrite(root, "pyvenv.cfg", before, after)
        with _folder(root, "bin") as scripts:
            changed += sum(_rewrite(scripts, name, before, after) for name in _names(scripts))
        with _folder(root, "lib") as lib:
            for version in (n for n in _names(lib) if n.startswith("python")):
                with _folder(lib, version) as inside, _folder(inside, "site-packages") as site:
                    changed += _relocate_site(site, before, after)
    finally:
        os.close(root)
    return changed


def _relocate_site(site: int | None, before: bytes, after: bytes) -> int:
    changed = 0
    for name in _names(site):
        if name.endswith(".dist-info"):
            with _folder(site, name) as info:
                changed += _rewrite(info, "direct_url.json", before, after)
        elif any(fnmatch.fnmatchcase(name, pattern) for pattern in _SITE_FILES):
            changed += _rewrite(site, name, before, after)
    return changed


_SITE_FILES = ("*.pth", "__editable__*.py", "_*editable*.py", "*.egg-link")
_NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO never blocks the open


def _open_folder(name: str, parent: int | None = None) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW, dir_fd=parent)


@contextlib.contextmanager
def _folder(parent: int | None, name: str) -> Iterator[int | None]:
    """The folder `name` in `parent` as a descriptor; None when it is missing or is a symlink."""
    fd = None
    if parent is not None:
        with contextlib.suppress(OSError):
            fd = _open_folder(name, parent)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _names(folder: int | None) -> list[str]:
    return sorted(os.listdir(folder)) if folder is not None else []


def _rewrite(folder: int | None, name: str, before: bytes, after: bytes) -> int:
    """1 when the regular file `name` in `folder` named `before` and now names `after`, else 0."""
    if folder is None:
        return 0
    try:
        fd = os.open(name, os.O_RDONLY | _NO_FOLLOW, dir_fd=folder)
    except OSError:  # a symlink (ELOOP), or gone
        return 0
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > _REWRITE_LIMIT:
            return 0
        data = file.read(_REWRITE_LIMIT + 1)
    if before not in data:
        return 0
    temporary = f".{name}.plan-cascade-relocate"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary, dir_fd=folder)
    out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o600, dir_fd=folder)
    with os.fdopen(out, "wb") as file:
        file.write(data.replace(before, after))
        os.fchmod(file.fileno(), stat.S_IMODE(info.st_mode))
    os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    return 1
