"""Which packages a manifest or lockfile names, at which versions, and what a change adds. Pure.

Read: `pyproject.toml` (PEP 621, PEP 735, PDM, uv and Poetry tables), `requirements*.txt`
(and `*.txt` under `requirements/`), `uv.lock`, `poetry.lock` (ecosystem `pip`), and
`package.json`, `package-lock.json` (v1 to v3), `pnpm-lock.yaml` (v5 to v9), `yarn.lock`
(classic and berry) (ecosystem `npm`), the names GitHub's Advisory Database uses. A lockfile
entry is an exact version; a manifest entry is exact only when pinned (`==2.19.0`, `"4.17.15"`),
otherwise it keeps its range and is listed, not looked up. Packages from paths, git or URLs
(the project itself, a workspace member) are skipped: they are in no advisory database.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import yaml

from bot.environment.declared import normalise, pyproject_requirements
from bot.environment.repoview import table
from bot.environment.requirements import logical_lines, requirement_of

LOCKFILES = {"uv.lock", "poetry.lock", "package-lock.json", "pnpm-lock.yaml", "yarn.lock"}
MANIFESTS = {"pyproject.toml", "package.json"}
_REQUIREMENTS = re.compile(r"(?i)^(?:[\w.-]*[._-])?requirements?(?:[._-][\w.-]*)?\.(?:txt|in)$")
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*?)\s*(?:;.*)?$")
_PEP440_PIN = re.compile(r"^===?\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
_POETRY_PIN = re.compile(r"^(?:==?)?\s*(\d[A-Za-z0-9.+!_-]*)$")
_SEMVER = re.compile(r"^[v=]?\s*(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)$")
_PNPM_V5 = re.compile(r"^((?:@[^/@]+/)?[^/@]+)/(\d[^_/]*)(?:_.*)?$")
_NOT_REGISTRY = ("file:", "link:", "workspace:", "portal:", "patch:", "git", "http:", "https:", "github:")
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML has it: a pnpm lockfile can be megabytes."""
_NPM_TABLES = ("dependencies", "devDependencies", "optionalDependencies")


@dataclass(frozen=True, order=True)
class Pinned:
    """A package a file names: exact `version`, or (not `exact`) the range it allows."""

    ecosystem: str
    name: str
    version: str
    exact: bool = True


@dataclass(frozen=True)
class Change:
    """A package version a change brings in: new, or replacing `previous` (versions it had)."""

    ecosystem: str
    name: str
    version: str
    file: str
    exact: bool = True
    previous: str | None = None


def is_dependency_file(path: str) -> bool:
    """Whether this reader knows the file (never one under node_modules or a virtualenv)."""
    parts = PurePosixPath(path).parts
    if any(p in ("node_modules", ".venv", "venv", ".tox") for p in parts[:-1]):
        return False
    name = parts[-1] if parts else ""
    return name in LOCKFILES or name in MANIFESTS or _is_requirements(path)


def _is_requirements(path: str) -> bool:
    folder, _, name = path.rpartition("/")
    return bool(_REQUIREMENTS.match(name)) or (folder.endswith("requirements") and name.endswith(".txt"))


def packages(path: str, text: str) -> set[Pinned]:
    """The packages `text` (the file at `path`) names; empty when it cannot be parsed."""
    name = PurePosixPath(path).name
    text = text.removeprefix("\ufeff")  # npm and pip drop a byte-order mark: never hides a line
    try:
        if name == "pyproject.toml":
            return _pyproject(tomllib.loads(text))
        if name in ("uv.lock", "poetry.lock"):
            return _python_lock(tomllib.loads(text))
        if name == "package.json":
            return _package_json(json.loads(text))
        if name == "package-lock.json":
            return _package_lock(json.loads(text))
        if name == "pnpm-lock.yaml":
            return _pnpm(yaml.load(text, Loader=_SAFE_LOADER))  # noqa: S506 - a safe loader, C when built
        if name == "yarn.lock":
            return _yarn(text)
        if _is_requirements(path):
            return _requirements(text)
    except (ValueError, TypeError, AttributeError, yaml.YAMLError):
        return set()
    return set()


def changes(path: str, before: str | None, after: str) -> list[Change]:
    """The package versions the file at `path` names after and not before, sorted."""
    old = packages(path, before) if before is not None else set()
    versions: dict[tuple[str, str], set[str]] = {}
    for pin in old:
        versions.setdefault((pin.ecosystem, pin.name), set()).add(pin.version)
    found = []
    for pin in sorted(packages(path, after) - old):
        had = sorted(versions.get((pin.ecosystem, pin.name), set()) - {pin.version})
        found.append(Change(pin.ecosystem, pin.name, pin.version, path, pin.exact, ", ".join(had) or None))
    return found


def _pep508(requirement: str) -> Pinned | None:
    if requirement.lstrip().startswith(("-", ".", "/")) or "://" in requirement or " @ " in requirement:
        return None
    match = _REQUIREMENT.match(requirement.strip())
    if not match:
        return None
    name, spec = normalise(match.group(1)), match.group(2).replace(" ", "")
    pin = _PEP440_PIN.match(spec)
    if pin and "*" not in spec:
        return Pinned("pip", name, pin.group(1))
    return Pinned("pip", name, spec or "any version", exact=False)


def _requirements(text: str) -> set[Pinned]:
    """Read as pip reads it (`bot.environment.requirements`)."""
    found = set()
    for line in logical_lines(text):
        pin = _pep508(requirement_of(line)) if not line.startswith("-") else None
        if pin is not None:
            found.add(pin)
    return found


def _pyproject(data: dict[str, Any]) -> set[Pinned]:
    found = {pin for pin in map(_pep508, pyproject_requirements(data)) if pin is not None}
    poetry = table(data, "tool", "poetry")
    tables = [table(poetry, "dependencies"), table(poetry, "dev-dependencies")]
    tables += [table(group, "dependencies") for group in table(poetry, "group").values()]
    for deps in tables:
        for name, spec in deps.items():
            if name.lower() == "python":
                continue
            spec = spec.get("version") if isinstance(spec, dict) else spec
            if not isinstance(spec, str):
                continue  # a path, git or URL dependency
            pin = _POETRY_PIN.match(spec.strip())
            found.add(Pinned("pip", normalise(name), pin.group(1) if pin else spec.strip(), exact=bool(pin)))
    return found


def _python_lock(data: dict[str, Any]) -> set[Pinned]:
    found = set()
    for entry in data.get("package", []):
        source = entry.get("source") or {}  # uv: {registry = …}; Poetry: none = PyPI, "legacy" = an index
        registry = not source or "registry" in source or source.get("type") == "legacy"
        if registry and isinstance(entry.get("name"), str) and isinstance(entry.get("version"), str):
            found.add(Pinned("pip", normalise(entry["name"]), entry["version"]))
    return found


def _npm_spec(name: str, spec: str) -> Pinned | None:
    if spec.startswith("npm:"):  # an alias: "npm:lodash@4.17.15"
        target = spec[4:]
        at = target.rfind("@")
        name, spec = (target[:at], target[at + 1 :]) if at > 0 else (target, "")
    if spec.startswith(_NOT_REGISTRY) or ("/" in spec and not spec.startswith("@")):
        return None
    pin = _SEMVER.match(spec.strip())
    return Pinned("npm", name, pin.group(1) if pin else spec.strip() or "any version", exact=bool(pin))


def _package_json(data: dict[str, Any]) -> set[Pinned]:
    found = set()
    for key in _NPM_TABLES:
        for name, spec in table(data, key).items():
            pin = _npm_spec(name, spec) if isinstance(spec, str) else None
            if pin is not None:
                found.add(pin)
    return found


def _package_lock(data: dict[str, Any]) -> set[Pinned]:
    found = set()
    for key, entry in table(data, "packages").items():
        if "node_modules/" in key and isinstance(entry, dict) and not entry.get("link"):
            version = entry.get("version")
            if isinstance(version, str) and not str(entry.get("resolved", "")).startswith("file:"):
                found.add(Pinned("npm", entry.get("name") or key.rsplit("node_modules/", 1)[1], version))
    if not table(data, "packages"):  # lockfile v1: nested "dependencies"
        stack = [table(data, "dependencies")]
        while stack:
            for name, entry in stack.pop().items():
                if isinstance(entry, dict) and isinstance(entry.get("version"), str):
                    if _SEMVER.match(entry["version"]):
                        found.add(Pinned("npm", name, entry["version"]))
                    stack.append(table(entry, "dependencies"))
    return found


def _split_npm(spec: str) -> tuple[str, str] | None:
    """`name@version` (scoped names keep their leading `@`)."""
    at = spec.find("@", 1)
    return (spec[:at], spec[at + 1 :]) if at > 0 else None


def _pnpm(data: Any) -> set[Pinned]:
    found = set()
    keys = [*table(data, "packages"), *table(data, "snapshots")]
    for key in keys:
        spec = str(key).lstrip("/").split("(", 1)[0]
        v5 = _PNPM_V5.match(spec)  # /name/version_peers
        split = (v5.group(1), v5.group(2)) if v5 else _split_npm(spec)  # v6 and v9: name@version
        if split is not None and _SEMVER.match(split[1]):
            found.add(Pinned("npm", split[0], split[1]))
    return found


def _yarn(text: str) -> set[Pinned]:
    found = set()
    name: str | None = None
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#") and line.rstrip().endswith(":"):
            first = line.rstrip()[:-1].split(",")[0].strip().strip('"')
            split = _split_npm(first)
            name = split[0] if split is not None and "@workspace:" not in first else None
            continue
        stripped = line.strip()
        if name is not None and stripped.startswith("version"):
            version = stripped[len("version") :].strip().lstrip(":").strip().strip('"')
            if _SEMVER.match(version):
                found.add(Pinned("npm", name, version))
            name = None
    return found
