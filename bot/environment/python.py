"""The Python environment a project declares, as one setup command. Pure.

In order:
1. A lock file, through its own tool: `uv.lock` → `uv sync --frozen`; `poetry.lock` and
   `pdm.lock` → Poetry / PDM run from the package index by `uvx`, into `.venv`. Their dev/test
   groups and extras are included.
2. Else uv's project semantics: a `[project]` is installed editable only when it is a package
   (`tool.uv.package`, else it has a `[build-system]`); otherwise only its dependencies are
   installed (a "virtual" project: a flat layout that setuptools could not build stays
   installable). A project with only `setup.py`/`setup.cfg` (or a Poetry table without a
   lock) is installed editable.
3. Without a lock file, plus its test declarations: dev/test extras and dependency groups,
   `[tool.pdm.dev-dependencies]`, `[tool.uv] dev-dependencies`, Poetry's dev groups (by name,
   unpinned), requirement files (`bot.environment.declared.requirement_files`), and tox.ini's
   `[testenv]` when nothing else provides the test runner. A lock file is the whole truth.
4. Plus each detected gate's tool the above does not provide, pinned only where the project
   pins it (`tool_pins`).

Every value taken from the repository is shell-quoted: the approver sees what runs.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from bot.environment.declared import (
    DEV_NAMES,
    ToxEnv,
    clean_requirement,
    group_requirements,
    poetry_names,
    provides,
    requirement_files,
    requirement_lines,
    requirement_names,
    setup_cfg_extras,
    setup_py_extras,
    tool_pins,
    tox_env,
)
from bot.environment.repoview import RepoView, strings, table

UV_VENV = "uv venv -q .venv"
UV_INSTALL = "uv pip install -q --python .venv/bin/python"
PIP_VENV = "python3 -m venv .venv"
PIP_INSTALL = ".venv/bin/pip install -q"


@dataclass
class _Install:
    """What one `pip install` gets: arguments, and the names they are known to bring."""

    args: list[str] = field(default_factory=list)
    provided: set[str] = field(default_factory=set)

    def requirements(self, items: list[str]) -> None:
        for item in items:
            requirement = clean_requirement(item)
            if requirement:
                self.args.append(shlex.quote(requirement))
                self.provided |= requirement_names([requirement])


def _dev(names: Collection[str]) -> list[str]:
    return [name for name in DEV_NAMES if name in names]


def _editable(extras: list[str]) -> str:
    return "-e " + shlex.quote(f".[{','.join(extras)}]" if extras else ".")


def python_setup(view: RepoView, *, uv: bool, tools: Collection[str]) -> str | None:
    """The command that makes `.venv` for the project, or None when it declares no Python
    environment and no gate needs a tool. `tools` are the detected gates' tools."""
    pyproject = view.toml("pyproject.toml") if view.has("pyproject.toml") else {}
    locked = _locked(view, pyproject) if uv else None
    if locked is not None:
        command, provided = locked
        extra = _Install()
    else:
        extra = _unlocked(view, pyproject)
        command, provided = None, extra.provided
    pins = tool_pins(view)
    for tool in tools:
        if not provides(provided, tool):
            extra.args.append(shlex.quote(pins.get(tool, tool)))
    venv, install = (UV_VENV, UV_INSTALL) if uv else (PIP_VENV, PIP_INSTALL)
    if command is not None:
        return f"{command} && {install} {' '.join(extra.args)}" if extra.args else command
    if not extra.args:
        return None
    return f"{venv} && {install} {' '.join(extra.args)}"


def _locked(view: RepoView, pyproject: dict[str, Any]) -> tuple[str, set[str]] | None:
    """The lock file's install command and what it installs, or None without a lock file."""
    if not pyproject:
        return None
    project = table(pyproject, "project")
    extras = _dev(table(project, "optional-dependencies"))
    groups = _dev(table(pyproject, "dependency-groups"))
    chosen = requirement_names(strings(project.get("dependencies")))
    for extra in extras:
        chosen |= requirement_names(strings(table(project, "optional-dependencies").get(extra)))
    if view.has("uv.lock"):
        uv_table = table(pyproject, "tool", "uv")
        defaults = strings(uv_table.get("default-groups")) or ["dev"]
        for group in {*groups, *defaults}:
            chosen |= requirement_names(group_requirements(pyproject, group))
        chosen |= requirement_names(strings(uv_table.get("dev-dependencies")))
        args = ["uv sync -q --frozen"]
        args += ["--all-packages"] if table(uv_table, "workspace") else []
        args += [f"--extra {shlex.quote(e)}" for e in extras] + [f"--group {shlex.quote(g)}" for g in groups]
        return " ".join(args), chosen
    if view.has("poetry.lock"):
        poetry_groups = _dev(table(pyproject, "tool", "poetry", "group"))
        chosen |= poetry_names(pyproject, groups=poetry_groups)
        args = [
            UV_VENV,
            "&& POETRY_VIRTUALENVS_IN_PROJECT=true",
            "uvx --from poetry poetry install --no-interaction",
        ]
        args += [f"--with {shlex.quote(','.join(poetry_groups))}"] if poetry_groups else []
        args += [f"--extras {shlex.quote(' '.join(extras))}"] if extras else []
        return " ".join(args), chosen
    if view.has("pdm.lock"):  # PDM installs every dev group by default; extras by name
        for group in table(pyproject, "dependency-groups"):
            chosen |= requirement_names(group_requirements(pyproject, group))
        for items in table(pyproject, "tool", "pdm", "dev-dependencies").values():
            chosen |= requirement_names(strings(items))
        args = [UV_VENV, "&& uvx pdm install --frozen-lockfile"] + [f"-G {shlex.quote(e)}" for e in extras]
        return " ".join(args), chosen
    return None


def _test_declarations(view: RepoView, pyproject: dict[str, Any]) -> tuple[list[str], list[str], set[str]]:
    """Requirement strings of the pdm/uv/Poetry dev tables, the requirement files to install,
    and every name the project (with those) is known to bring, tox.ini aside."""
    project = table(pyproject, "project")
    optional = table(project, "optional-dependencies")
    tool = table(pyproject, "tool")
    requirements = [
        item for items in table(tool, "pdm", "dev-dependencies").values() for item in strings(items)
    ]
    requirements += strings(table(tool, "uv").get("dev-dependencies"))
    poetry = table(tool, "poetry")
    requirements += [*table(poetry, "dev-dependencies")]
    for group in _dev(table(poetry, "group")):
        requirements += [*table(poetry, "group", group, "dependencies")]
    files = [f.path for f in requirement_files(view) if f.role != "other"]
    known = requirement_names(strings(project.get("dependencies")) + requirements) | poetry_names(pyproject)
    for extra in _dev(optional):
        known |= requirement_names(strings(optional.get(extra)))
    for group in _dev(table(pyproject, "dependency-groups")):
        known |= requirement_names(group_requirements(pyproject, group))
    for path in files:
        known |= requirement_names(requirement_lines(view.text(path) or ""))
    cfg_extras = setup_cfg_extras(view)
    for extra in _dev(cfg_extras):
        known |= requirement_names(cfg_extras[extra])
    return requirements, files, known


def _unlocked(view: RepoView, pyproject: dict[str, Any]) -> _Install:
    """The arguments of one install: the project, its test declarations, the files."""
    install = _Install()
    requirements, files, install.provided = _test_declarations(view, pyproject)
    # tox.ini's test environment is the last resort: when nothing else brings the test runner.
    tox = tox_env(view) if not provides(install.provided, "pytest") else ToxEnv()
    project = table(pyproject, "project")
    poetry_name = table(pyproject, "tool", "poetry").get("name")
    if project:
        optional = table(project, "optional-dependencies")
        extras = _dev(optional) + [e for e in tox.extras if e in optional and e not in DEV_NAMES]
        package = table(pyproject, "tool", "uv").get("package")
        if package if isinstance(package, bool) else "build-system" in pyproject:
            install.args.append(_editable(extras))
        else:  # not meant to be built: its dependencies only, as uv does for a virtual project
            install.args += ["-r pyproject.toml"] + [f"--extra {shlex.quote(e)}" for e in extras]
    elif isinstance(poetry_name, str) or view.has("setup.py") or view.has("setup.cfg"):
        named = {*setup_cfg_extras(view), *setup_py_extras(view), *tox.extras}
        install.args.append(_editable(_dev(named) + [e for e in tox.extras if e not in DEV_NAMES]))
    if pyproject:
        declared = table(pyproject, "dependency-groups")
        groups = _dev(declared)
        for group in [*groups, *[g for g in tox.groups if g in declared and g not in groups]]:
            install.args.append(f"--group {shlex.quote(group)}")
    for path in [*files, *[f for f in tox.files if f not in files]]:
        install.args.append(f"-r {shlex.quote(path)}")
    install.requirements(requirements + tox.deps)
    for group in tox.groups:
        install.provided |= requirement_names(group_requirements(pyproject, group))
    for path in tox.files:
        install.provided |= requirement_names(requirement_lines(view.text(path) or ""))
    optional = table(project, "optional-dependencies")
    for extra in tox.extras:
        install.provided |= requirement_names(strings(optional.get(extra)))
    return install
