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
import json
import logging
import re
import shutil
import time
from pathlib import Path

from bot.environment.setup import ENV_DIRS
from bot.errors import WorkspaceError
from bot.gates.report import GateResult
from bot.orchestration.run import Run
from bot.orchestration.setup import setup_spec
from bot.workspace.process import run_process
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
    size = 0
    for path in paths:
        try:
            size += (wt.path / path).lstat().st_size
        except OSError:
            continue
    return paths if len(paths) <= MAX_WRITTEN_FILES and size <= MAX_WRITTEN_BYTES else None


async def keep_base_environment(run: Run, wt: Worktree, *, output: str, written: list[str] | None) -> bool:
    """Move the environment setup made in the base check's worktree aside for the stories; whether
    it was (the base check's gates then run in a copy of it, `reuse_base_environment`).

    `output` (setup's, on the base) is shown again in each story's setup check that copies it;
    `written` are the other files setup left in the worktree (`setup_wrote`), copied with it.
    """
    kept = kept_dir(run)
    await asyncio.to_thread(shutil.rmtree, kept, True)
    nested = [p for p in wt.path.glob("*/**/node_modules") if "node_modules" not in p.parent.parts]
    if nested or written is None:
        return False  # an environment all over the tree: each story sets up its own
    kept.mkdir(parents=True)
    moved = []
    for name in _NAMES:
        if (wt.path / name).is_dir() and not (wt.path / name).is_symlink():
            (wt.path / name).rename(kept / name)
            moved.append(name)
    for path in written:
        source, target = wt.path / path, kept / _FILES / path
        if source.is_file() or source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(shutil.copy2, source, target, follow_symlinks=False)
    origin = {
        "path": str(wt.path),
        "base": await head_sha(wt),
        "setup": run.state.setup,
        "dirs": moved,
        "files": (kept / _FILES).is_dir(),
        "output": output[-OUTPUT_CHARS:],
    }
    (kept / _ORIGIN).write_text(json.dumps(origin))
    return True


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
            await asyncio.to_thread(shutil.rmtree, target, True)
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
    )


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
    finders, and `direct_url.json`: the places installers write absolute paths.
    """
    before, after = old.encode(), new.encode()
    candidates = [venv / "pyvenv.cfg", *(p for p in (venv / "bin").glob("*") if p.is_file())]
    for site in venv.glob("lib/python*/site-packages"):
        candidates += [*site.glob("*.pth"), *site.glob("__editable__*.py"), *site.glob("_*editable*.py")]
        candidates += list(site.glob("*.dist-info/direct_url.json"))
        candidates += list(site.glob("*.egg-link"))
    changed = 0
    for path in candidates:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _REWRITE_LIMIT:
            continue
        data = path.read_bytes()
        if before in data:
            path.write_bytes(data.replace(before, after))
            changed += 1
    return changed
