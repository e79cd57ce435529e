"""What a story's environment needs before its agent and gates run: the setup commands. Pure.

`setup:` in `.github/plan-cascade.yml` lists them; without it they are detected from what the
repository declares for the ecosystems gate detection knows (Python: `bot.environment.python`, Node, Go,
Rust), and the files detection read are recorded with them; `setup: []` turns setup off.
The commands chosen are recorded in the plan, shown in the plan comment and approved with
it, so what runs is what the maintainer saw.

Environments live where each ecosystem expects them (`.venv`, `node_modules`) and are kept
out of commits; package caches live under the data dir, one set per repository.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bot.environment.declared import GATE_TOOLS, requirement_files
from bot.environment.node import NODE_LOCKS, lockfile_to_read, node_manager
from bot.environment.pygates import python_gates
from bot.environment.python import python_setup
from bot.environment.repoview import RepoView

ENV_DIRS = (".venv/", "node_modules/")
"""Directories setup creates in a worktree: never committed (the mirror's info/exclude)."""
READ_FILES = (
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "tox.ini",
    "pytest.ini",
    "mypy.ini",
    ".mypy.ini",
    ".pre-commit-config.yaml",
    "package.json",
    ".yarnrc.yml",
)
"""Files whose text detection may read; requirement files too, and pnpm-lock.yaml or a berry
yarn.lock when package.json names no manager (`bot.environment.node`). For the others (lock files, ruff.toml),
being in the tree is enough."""
NO_LOCKFILE = "no lockfile: `{command}` resolves the dependencies' versions now, they are not pinned"
SetupSource = Literal["configured", "detected", "none"]
COMMAND_NOT_FOUND = 127
"""The shell's exit status for a program it cannot find."""
TOOL_PATH_SETTING = "PLAN_CASCADE_TOOL_PATH"
_NOT_FOUND = re.compile(
    r"^(?:\S+: )?(?:line )?(?:\d+: )?(?P<program>[\w.+/-]{1,100}): (?:command )?not found\s*$", re.MULTILINE
)
"""dash's `sh: 1: cargo: not found`, bash's `bash: line 1: cargo: command not found`."""


@dataclass
class DetectedSetup:
    """Setup commands detected from a repository, the files they were based on, and notes."""

    commands: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class PlannedSetup(DetectedSetup):
    """A new plan's setup: detected, or the `setup:` key's (then nothing was read)."""

    source: SetupSource = "none"

    def state_fields(self) -> dict[str, Any]:
        """The PlanState fields that record it."""
        return {
            "setup": self.commands,
            "setup_source": self.source,
            "setup_read": self.read,
            "setup_notes": self.notes,
        }


def files_to_read(paths: Collection[str]) -> list[str]:
    """The files of a tree (its `paths`) whose text setup detection may need."""
    view = RepoView.of(paths, lambda _: None)
    return [p for p in READ_FILES if p in view.paths] + [f.path for f in requirement_files(view)]


async def planned_setup(
    configured: Collection[str] | None,
    tree: Callable[[], Awaitable[Collection[str]]],
    read: Callable[[str], Awaitable[str | None]],
    *,
    uv: bool,
    node_tools: Collection[str] = (),
) -> PlannedSetup:
    """A new plan's setup: `configured` (the `setup:` key) when set, else detected.

    `tree` lists the repository's file paths and `read` gives one file's text at the plan's
    base; they are asked only when detecting, and only for files in the tree (concurrently).
    `node_tools` are the programs of `bot.environment.node.NODE_TOOLS` on the tool path.
    """
    if configured is not None:
        return PlannedSetup(commands=list(configured), source="configured" if configured else "none")
    paths = await tree()
    wanted = files_to_read(paths)
    texts = dict(zip(wanted, await asyncio.gather(*(read(p) for p in wanted)), strict=True))
    for lock in lockfile_to_read(paths, texts.get("package.json")):
        texts[lock] = await read(lock)
    found = detect_setup(paths, texts.get, uv=uv, node_tools=node_tools)
    return PlannedSetup(
        commands=found.commands,
        read=found.read,
        notes=found.notes,
        source="detected" if found.commands else "none",
    )


def detect_setup(
    paths: Collection[str], read: Callable[[str], str | None], *, uv: bool, node_tools: Collection[str] = ()
) -> DetectedSetup:
    """Setup commands for a repository whose files are `paths` (`read` gives a file's text).

    `uv` chooses uv (fast, cached; it runs Poetry and PDM from the index) over pip for Python;
    `node_tools` are the Node tools on the tool path: pnpm and yarn run through corepack when it is
    there and the project declares them or they are not (`bot.environment.node`).
    """
    view = RepoView.of(paths, read)
    found = DetectedSetup()
    tools = [GATE_TOOLS[kind] for kind in python_gates(view)]
    python = python_setup(view, uv=uv, tools=tools)
    if python:
        found.commands.append(python)
    node = _node(view, found, node_tools=node_tools)
    if node:
        found.commands.append(node)
        if not any(view.has(lock) for locks in NODE_LOCKS.values() for lock in locks):
            found.notes.append(NO_LOCKFILE.format(command=node))
    if view.has("go.mod"):
        found.commands.append("go mod download")
    if view.has("Cargo.toml"):
        found.commands.append("cargo fetch")
    found.read = sorted(view.consulted) if found.commands else []
    return found


def _node(view: RepoView, found: DetectedSetup, *, node_tools: Collection[str]) -> str | None:
    """The install command of package.json's package manager (workspaces install from the top);
    which manager and version run is noted for the plan."""
    manager = node_manager(view, node_tools=node_tools)
    if manager is None:
        return None
    if manager.name == "npm" and not manager.locked and not manager.declared:
        manifest = view.json("package.json")
        if not any(manifest.get(key) for key in ("dependencies", "devDependencies", "workspaces")):
            return None
    note = manager.describe()
    if note:
        found.notes.append(note)
    return manager.install()


def setup_env(worktree: Path, caches: Path, *, home: Path, shims: Path | None = None) -> dict[str, str]:
    """Variables that point installers at the repository's caches and tools at its environment.

    `PATH` here lists only the environment's own directories, and `shims` (corepack's programs for
    the managers setup runs through it): the caller puts them in front of its tool PATH.
    """
    path = [worktree / ".venv" / "bin", worktree / "node_modules" / ".bin", *([shims] if shims else [])]
    return {
        "PATH": ":".join(map(str, path)),
        "VIRTUAL_ENV": str(worktree / ".venv"),
        "UV_CACHE_DIR": str(caches / "uv"),
        "UV_LINK_MODE": "copy",
        "UV_NATIVE_TLS": "1",  # the machine's certificate store, as the operator configured it
        "PIP_CACHE_DIR": str(caches / "pip"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "npm_config_cache": str(caches / "npm"),
        "YARN_CACHE_FOLDER": str(caches / "yarn"),
        "YARN_GLOBAL_FOLDER": str(caches / "yarn-berry"),  # yarn 2+'s shared cache (PnP reads it)
        "npm_config_store_dir": str(caches / "pnpm-store"),
        "npm_config_package_import_method": "copy",  # no hard link from the worktree into the store
        "GOMODCACHE": str(caches / "go-mod"),
        "GOCACHE": str(home / ".cache" / "go-build"),
        "CARGO_HOME": str(caches / "cargo"),
        "COREPACK_HOME": str(caches / "corepack"),
        "COREPACK_ENABLE_DOWNLOAD_PROMPT": "0",  # nobody is there to answer
        "COREPACK_ENABLE_AUTO_PIN": "0",  # never write `packageManager` into the project's package.json
        "POETRY_CACHE_DIR": str(caches / "poetry"),
        "PDM_CACHE_DIR": str(caches / "pdm"),
    }


def with_env_path(env: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """`env` plus `extra`, the environment's PATH entries in front of the tools' PATH."""
    merged = {**env, **{k: v for k, v in extra.items() if k != "PATH"}}
    if "PATH" in extra:
        merged["PATH"] = f"{extra['PATH']}:{env.get('PATH', '')}".rstrip(":")
    return merged


def missing_program(exit_code: int | None, output: str) -> str | None:
    """The program setup could not find, when it exited 127 and the shell said which (else None)."""
    if exit_code != COMMAND_NOT_FOUND:
        return None
    found = _NOT_FOUND.findall(output)
    return found[-1] if found else None


def missing_program_hint(program: str) -> str:
    """Why setup stopped when `program` is not on the tool PATH: the server's, not the project's."""
    rustup = " (rustup's `~/.cargo/bin`, for example)" if Path(program).name in ("cargo", "rustc") else ""
    return (
        f"`{program}` is not on the server's tool PATH (exit 127: command not found), so this is the "
        f"server's setup, not the project's: whoever runs Plan Cascade installs `{program}` there or adds "
        f"the directory that holds it to `{TOOL_PATH_SETTING}`{rustup}"
    )
