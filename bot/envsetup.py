"""What a story's environment needs before its agent and gates run: the setup commands. Pure.

`setup:` in `.github/plan-cascade.yml` lists them; without it they are detected from the
repository's manifests for the ecosystems gate detection knows (Python, Node, Go, Rust);
`setup: []` turns setup off. The commands chosen are recorded in the plan, shown in the plan
comment and approved with it, so what runs is what the maintainer saw.

Environments live where each ecosystem expects them (`.venv`, `node_modules`) and are kept
out of commits; package caches live under the data dir, one set per repository.
"""

from __future__ import annotations

import tomllib
from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path
from typing import Literal

ENV_DIRS = (".venv/", "node_modules/")
"""Directories setup creates in a worktree: never committed (the mirror's info/exclude)."""
DEV_EXTRAS = ("dev", "test", "tests", "testing")
PYTHON_REQUIREMENTS = (
    "requirements.txt",
    "requirements-dev.txt",
    "requirements-test.txt",
    "requirements_dev.txt",
)
MANIFESTS = ("pyproject.toml", "package.json")
"""Files whose content detection reads; for the others, being there is enough."""
SetupSource = Literal["configured", "detected", "none"]


async def planned_setup(
    configured: Collection[str] | None,
    top_level: Callable[[], Awaitable[Collection[str]]],
    read: Callable[[str], Awaitable[str | None]],
    *,
    uv: bool,
) -> tuple[list[str], SetupSource]:
    """A new plan's setup: `configured` (the `setup:` key) when set, else detected.

    `top_level` lists the repository's top-level files and `read` gives one's text at the
    plan's base; they are asked only when detecting.
    """
    if configured is not None:
        return list(configured), "configured" if configured else "none"
    paths = await top_level()
    texts = {name: await read(name) for name in MANIFESTS if name in paths}
    commands = detect_setup(paths, texts.get, uv=uv)
    return commands, "detected" if commands else "none"


def detect_setup(paths: Collection[str], read: Callable[[str], str | None], *, uv: bool) -> list[str]:
    """Setup commands for a repository whose top-level files are `paths` (`read` gives a file's text).

    `uv` chooses uv (fast, cached) over pip for Python environments.
    """
    found = set(paths)
    commands: list[str] = []
    python = _python(found, read, uv=uv)
    if python:
        commands.append(python)
    if "package-lock.json" in found or "npm-shrinkwrap.json" in found:
        commands.append("npm ci --no-audit --no-fund")
    elif "pnpm-lock.yaml" in found:
        commands.append("pnpm install --frozen-lockfile")
    elif "yarn.lock" in found:
        commands.append("yarn install --frozen-lockfile")
    if "go.mod" in found:
        commands.append("go mod download")
    if "Cargo.toml" in found:
        commands.append("cargo fetch")
    return commands


def _python(found: set[str], read: Callable[[str], str | None], *, uv: bool) -> str | None:
    venv = "uv venv -q .venv" if uv else "python3 -m venv .venv"
    install = "uv pip install -q --python .venv/bin/python" if uv else ".venv/bin/pip install -q"
    if "pyproject.toml" in found:
        try:
            project = tomllib.loads(read("pyproject.toml") or "")
        except tomllib.TOMLDecodeError:
            project = {}
        extras = sorted(set(project.get("project", {}).get("optional-dependencies", {})) & set(DEV_EXTRAS))
        groups = sorted(set(project.get("dependency-groups", {})) & set(DEV_EXTRAS))
        if "project" not in project and not groups:
            return None  # a pyproject.toml for tools only (ruff, black): nothing to install
        target = f"-e '.[{','.join(extras)}]'" if extras else "-e ."
        group_args = "".join(f" --group {g}" for g in groups)
        return f"{venv} && {install} {target}{group_args}"
    requirements = [name for name in PYTHON_REQUIREMENTS if name in found]
    if requirements:
        return f"{venv} && {install} " + " ".join(f"-r {name}" for name in requirements)
    return None


def setup_env(worktree: Path, caches: Path, *, home: Path) -> dict[str, str]:
    """Variables that point installers at the repository's caches and tools at its environment.

    `PATH` here lists only the environment's own directories: the caller puts them in front of
    its tool PATH.
    """
    return {
        "PATH": f"{worktree / '.venv' / 'bin'}:{worktree / 'node_modules' / '.bin'}",
        "VIRTUAL_ENV": str(worktree / ".venv"),
        "UV_CACHE_DIR": str(caches / "uv"),
        "UV_LINK_MODE": "copy",
        "UV_NATIVE_TLS": "1",  # the machine's certificate store, as the operator configured it
        "PIP_CACHE_DIR": str(caches / "pip"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "npm_config_cache": str(caches / "npm"),
        "YARN_CACHE_FOLDER": str(caches / "yarn"),
        "GOMODCACHE": str(caches / "go-mod"),
        "GOCACHE": str(home / ".cache" / "go-build"),
        "CARGO_HOME": str(caches / "cargo"),
    }


def with_env_path(env: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """`env` plus `extra`, the environment's PATH entries in front of the tools' PATH."""
    merged = {**env, **{k: v for k, v in extra.items() if k != "PATH"}}
    if "PATH" in extra:
        merged["PATH"] = f"{extra['PATH']}:{env.get('PATH', '')}".rstrip(":")
    return merged
