"""Which Node package manager a project uses, and how setup and gates run it. Pure.

package.json's `packageManager` (`pnpm@9.1.0`, `yarn@4.1.0`) names the manager and its exact
version; without it the lock file names the manager (pnpm-lock.yaml, yarn.lock, bun.lock,
package-lock.json), and npm is the last resort. pnpm and yarn run through corepack (Node's manager
of package managers, shipped with Node) when the project declares them, as its CI does with
`corepack enable`, or when they are not on the tool path: so a server needs neither installed.
Without `packageManager`, the pnpm that corepack runs is the major version that writes the lock
file's format (`lockfileVersion: '6.0'` is pnpm 8), and yarn is corepack's yarn classic, which
a `yarn.lock` without `.yarnrc.yml` is written for. yarn berry (`yarn@>=2`, `.yarnrc.yml`)
installs with `--immutable`, classic with `--frozen-lockfile`; a berry project that names no
version runs the release its `.yarnrc.yml`'s `yarnPath` names (yarn classic hands over to it),
else the major version that writes its `yarn.lock` (`__metadata: version: 8` is yarn 4). A
JupyterLab extension's scripts call `jlpm`, the yarn that the jupyterlab Python package ships (its
lock file is that yarn's, and no other release may reproduce it): when the Python project declares
jupyterlab, jlpm is the manager, found in `.venv/bin` once the Python setup has run.

Gates run the project's scripts through the same manager (`pnpm test`, `yarn test`): a script
that calls `pnpm` itself finds it, because setup and gates have corepack's shims on PATH
(`bot.orchestration.setup`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from bot.environment.declared import pyproject_requirements, requirement_names
from bot.environment.repoview import RepoView, table

NODE_LOCKS = {
    "npm": ("package-lock.json", "npm-shrinkwrap.json"),
    "pnpm": ("pnpm-lock.yaml",),
    "yarn": ("yarn.lock",),
    "bun": ("bun.lock", "bun.lockb"),
}
"""Each Node package manager's lock files, in the order they are looked for."""
COREPACK_MANAGERS = ("pnpm", "yarn")
"""The managers corepack provides (it also has npm, which comes with Node anyway)."""
NODE_TOOLS = ("corepack", *COREPACK_MANAGERS)
"""The programs whose presence on the tool path detection asks about."""
PNPM_FOR_LOCKFILE = {"9": "9", "6": "8", "5.4": "7", "5.3": "7"}
"""The pnpm major version for each `lockfileVersion`: the one that writes it (pnpm 10 writes 9.0
too, and 9 reads it), but 7 for pnpm 6's 5.3, which pnpm 7 reads as it is: pnpm 6 fails on the
Node of today (18 and later: `ERR_INVALID_THIS` on every download)."""
YARN_FOR_LOCKFILE = {"4": "2", "5": "3", "6": "3", "7": "4", "8": "4"}
"""The yarn major version that writes each berry `yarn.lock` format (`__metadata: version`)."""
_YARN_METADATA = re.compile(r"^__metadata:\s*\n\s+version:\s*['\"]?(\d+)", re.MULTILINE)
_YARN_PATH = re.compile(r"^yarnPath:", re.MULTILINE)
_JLPM = re.compile(r"(?<![\w.-])jlpm(?![\w.-])")
_LOCKFILE_VERSION = re.compile(r"^lockfileVersion:\s*['\"]?(\d+)(?:\.(\d+))?", re.MULTILINE)
_VERSION = re.compile(r"^\d+\.\d+\.\d+[\w.+-]*$")


@dataclass(frozen=True)
class NodeManager:
    """The package manager of a project, and how it is run."""

    name: str
    """npm, pnpm, yarn, bun, or jlpm (JupyterLab's yarn)."""
    version: str = ""
    """The exact version package.json declares, a major version read off the lock file, or ""."""
    declared: bool = False
    """Whether package.json's `packageManager` names it."""
    berry: bool = False
    """yarn 2 or later (`--immutable`)."""
    locked: bool = False
    """Whether its lock file is in the tree (a frozen install)."""
    corepack: bool = False
    """Whether setup runs it through corepack."""
    lockfile: str = ""
    """The lock file's format version, when it chose the version."""
    yarn_path: bool = False
    """Whether `.yarnrc.yml` names the yarn release to run (`yarnPath`)."""

    @property
    def program(self) -> str:
        """How setup calls it: `corepack pnpm@8` (a version corepack cannot read off package.json),
        `corepack pnpm` (it reads `packageManager`, or takes its default), or `pnpm`."""
        if not self.corepack:
            return self.name
        pinned = f"@{self.version}" if self.version and not self.declared else ""
        return f"corepack {self.name}{pinned}"

    def install(self) -> str:
        """The install command (frozen to the lock file when there is one)."""
        if self.name == "jlpm":
            return "jlpm install" + (" --immutable" if self.locked else "")
        if self.name == "npm":
            return "npm ci --no-audit --no-fund" if self.locked else "npm install --no-audit --no-fund"
        flag = " --immutable" if self.berry else " --frozen-lockfile"
        return f"{self.program} install" + (flag if self.locked else "")

    def run(self, script: str) -> str:
        """The gate command that runs package.json's `script` (`bun test` is bun's own runner, not it)."""
        if script == "test" and self.name != "bun":
            return f"{self.name} test"
        return f"{self.name} run {script}"

    def describe(self) -> str | None:
        """What the plan says about it: which manager and version run, and where they come from."""
        if self.name == "npm":
            return None
        if self.name == "jlpm":
            return (
                "Node: jlpm, the yarn that JupyterLab ships (the scripts call it; the Python setup "
                "installs jupyterlab into .venv); the gates run the scripts with `jlpm`"
            )
        if self.declared:
            what = f"{self.name} {self.version} (package.json's packageManager)"
        elif self.corepack and self.lockfile:
            lock = NODE_LOCKS[self.name][0]
            what = (
                f"{self.name} {self.version} (the newest {self.version}.x: {lock} is lockfile version "
                f"{self.lockfile} and package.json names no packageManager)"
            )
        elif self.yarn_path:
            what = "yarn berry, the release that .yarnrc.yml's yarnPath names (no packageManager)"
        elif self.corepack and self.name == "yarn" and not self.berry:
            what = "yarn classic, corepack's yarn 1 (yarn.lock, no .yarnrc.yml, no packageManager)"
        else:
            named = "yarn berry" if self.berry else self.name
            what = f"{named} (package.json names no packageManager version)"
        where = "through corepack" if self.corepack else "from the tool path"
        return f"Node: {what}, {where}; the gates run the scripts with `{self.name}`"


def declared_manager(manifest: dict[str, object]) -> tuple[str, str]:
    """package.json's `packageManager` as (name, version); ("", "") when it names none we know."""
    declared = manifest.get("packageManager")
    name, _, version = (declared if isinstance(declared, str) else "").partition("@")
    version = version.split("+", 1)[0]  # `pnpm@9.1.0+sha512.…`: the hash is corepack's business
    return (name, version) if name in NODE_LOCKS else ("", "")


def node_manager(view: RepoView, *, node_tools: Collection[str] = ()) -> NodeManager | None:
    """The project's package manager (None without package.json).

    `node_tools` are the programs of `NODE_TOOLS` on the tool path: pnpm and yarn go through
    corepack when it is there and the project declares them or they are not.
    """
    if not view.has("package.json"):
        return None
    name, version = declared_manager(view.json("package.json"))
    locked_by = next((m for m, locks in NODE_LOCKS.items() if any(view.has(lock) for lock in locks)), None)
    if not name and locked_by == "yarn" and _jupyterlab_extension(view):
        return NodeManager(name="jlpm", berry=True, locked=True)
    manager = name or locked_by or "npm"
    locked = any(view.has(lock) for lock in NODE_LOCKS[manager])
    berry = manager == "yarn" and (
        view.has(".yarnrc.yml") or (bool(name) and bool(version) and not version.startswith("1."))
    )
    wanted = bool(name) or manager not in node_tools  # declared, or no other way to run it
    corepack = manager in COREPACK_MANAGERS and "corepack" in node_tools and wanted
    lockfile, yarn_path = "", False
    if manager == "pnpm" and not name and locked:
        lockfile, version = _pnpm_for_lockfile(view.text("pnpm-lock.yaml") or "")
    if manager == "yarn" and berry and not name:
        yarn_path = _YARN_PATH.search(view.text(".yarnrc.yml") or "") is not None
        head = (view.text("yarn.lock") or "")[:2000] if locked and not yarn_path else ""
        found = _YARN_METADATA.search(head)
        if found and found.group(1) in YARN_FOR_LOCKFILE:
            lockfile, version = found.group(1), YARN_FOR_LOCKFILE[found.group(1)]
    if name and not _VERSION.match(version):
        version = ""  # a range or a tag: corepack refuses it, the tool on the path ignores it
    return NodeManager(
        name=manager,
        version=version,
        declared=bool(name) and bool(version),
        berry=berry,
        locked=locked,
        corepack=corepack,
        lockfile=lockfile,
        yarn_path=yarn_path,
    )


def _jupyterlab_extension(view: RepoView) -> bool:
    """Whether package.json's scripts call `jlpm` and the Python project depends on jupyterlab
    (so the Python setup installs it, and jlpm with it; a build requirement alone would not)."""
    scripts = table(view.json("package.json"), "scripts").values()
    if not any(isinstance(script, str) and _JLPM.search(script) for script in scripts):
        return False
    pyproject = view.toml("pyproject.toml") if view.has("pyproject.toml") else {}
    return "jupyterlab" in requirement_names(pyproject_requirements(pyproject))


def _pnpm_for_lockfile(text: str) -> tuple[str, str]:
    """(lockfile version, the pnpm major that writes it) from pnpm-lock.yaml's first lines."""
    found = _LOCKFILE_VERSION.search(text[:2000])
    if found is None:
        return "", ""
    major, minor = found.group(1), found.group(2) or "0"
    pnpm = PNPM_FOR_LOCKFILE.get(major) or PNPM_FOR_LOCKFILE.get(f"{major}.{minor}", "")
    return (f"{major}.{minor}", pnpm) if pnpm else ("", "")


def lockfile_to_read(paths: Collection[str], manifest: str | None) -> list[str]:
    """The lock file whose text detection needs too, when package.json names no manager: pnpm's,
    or yarn's in a berry project (`.yarnrc.yml`)."""
    view = RepoView.of(paths, lambda _: manifest)
    if "package.json" not in view.paths or declared_manager(view.json("package.json"))[0]:
        return []
    if "pnpm-lock.yaml" in view.paths:
        return ["pnpm-lock.yaml"]
    return ["yarn.lock"] if {"yarn.lock", ".yarnrc.yml"} <= view.paths else []


_COREPACK_RUN = re.compile(r"(?<![\w/.-])corepack\s+(pnpm|yarn)(@[\w.+-]+)?(?=[\s;&|)]|$)")
SHIMS = {"pnpm": ("pnpm", "pnpx"), "yarn": ("yarn", "yarnpkg")}
"""The programs corepack provides for each manager."""


def corepack_runs(commands: Sequence[str]) -> dict[str, str]:
    """The managers `commands` run through corepack, each as it asks for it (`pnpm@8`, `yarn`)."""
    found: dict[str, str] = {}
    for command in commands:
        for name, version in _COREPACK_RUN.findall(command):
            found.setdefault(name, name + version)
    return found


def corepack_shims(runs: Mapping[str, str], corepack: str) -> dict[str, str]:
    """Shell scripts (program name → text) that run each program of those managers through
    `corepack`, at the version setup asked for: what `corepack enable` would put on PATH."""
    scripts = {}
    for name, asked in sorted(runs.items()):
        version = asked.removeprefix(name)
        for program in SHIMS[name]:
            scripts[program] = (
                "#!/bin/sh\n# Written by Plan Cascade: the plan's setup runs this program through corepack.\n"
                f'exec {shlex.quote(corepack)} {program}{version} "$@"\n'
            )
    return scripts
