"""Node setup detection, rule by rule, on literal file trees (pure: nothing runs, nothing installs).

Which package manager and version a project uses (package.json's `packageManager`, else its lock
file), whether it runs through corepack, which lock file detection reads, the gates' commands and
corepack's shims. `tests/test_setup_node.py` runs setup and gates for real.
"""

from __future__ import annotations

import asyncio
import json

from bot.environment.node import corepack_runs, corepack_shims, lockfile_to_read
from bot.environment.setup import DetectedSetup, detect_setup, planned_setup
from tests.test_setup_detect import gates


def test_yarn_classic_and_pnpm_without_package_manager_run_through_corepack_unless_on_the_tool_path() -> None:
    """Most yarn-classic projects have a yarn.lock and no `packageManager`: on a server without a
    global yarn, corepack provides yarn 1 (before, `yarn install` ended "command not found")."""

    def node(files: dict[str, str], tools: tuple[str, ...]) -> DetectedSetup:
        return detect_setup(
            ["package.json", *files], {"package.json": "{}", **files}.get, uv=True, node_tools=tools
        )

    classic = node({"yarn.lock": ""}, ("corepack",))
    assert classic.commands == ["corepack yarn install --frozen-lockfile"]
    assert classic.notes == [
        "Node: yarn classic, corepack's yarn 1 (yarn.lock, no .yarnrc.yml, no packageManager), through "
        "corepack; the gates run the scripts with `yarn`"
    ]
    assert node({"yarn.lock": ""}, ("corepack", "yarn")).commands == ["yarn install --frozen-lockfile"]
    assert node({"yarn.lock": ""}, ()).commands == ["yarn install --frozen-lockfile"]
    # pnpm: the major version that writes the lock file's format.
    for lockfile, major in (("'9.0'", "9"), ("'6.0'", "8"), ("5.4", "7"), ("5.3", "7")):
        found = node({"pnpm-lock.yaml": f"lockfileVersion: {lockfile}\n\nimporters: {{}}\n"}, ("corepack",))
        assert found.commands == [f"corepack pnpm@{major} install --frozen-lockfile"], lockfile
        assert f"pnpm {major} (the newest {major}.x: pnpm-lock.yaml is lockfile version" in found.notes[0]
    unknown = node({"pnpm-lock.yaml": "lockfileVersion: 42\n"}, ("corepack",))
    assert unknown.commands == ["corepack pnpm install --frozen-lockfile"]  # corepack's default pnpm
    assert node({"pnpm-lock.yaml": "lockfileVersion: '6.0'\n"}, ("corepack", "pnpm")).commands == [
        "pnpm install --frozen-lockfile"  # the operator's pnpm
    ]


def test_the_lock_file_is_read_only_when_package_json_names_no_manager() -> None:
    tree = {
        "package.json": json.dumps({"packageManager": "pnpm@9.1.0"}),
        "pnpm-lock.yaml": "lockfileVersion: '6.0'\n",
    }
    asked: list[str] = []

    async def list_tree() -> list[str]:
        return list(tree)

    async def read(path: str) -> str | None:
        asked.append(path)
        return tree[path]

    declared = asyncio.run(planned_setup(None, list_tree, read, uv=True, node_tools=("corepack",)))
    assert asked == ["package.json"] and declared.commands == ["corepack pnpm install --frozen-lockfile"]
    assert declared.notes == [
        "Node: pnpm 9.1.0 (package.json's packageManager), through corepack; "
        "the gates run the scripts with `pnpm`"
    ]
    tree["package.json"] = "{}"
    asked.clear()
    locked = asyncio.run(planned_setup(None, list_tree, read, uv=True, node_tools=("corepack",)))
    assert asked == ["package.json", "pnpm-lock.yaml"]
    assert locked.commands == ["corepack pnpm@8 install --frozen-lockfile"]
    assert locked.read == ["package.json", "pnpm-lock.yaml"]


def test_node_gates_run_the_scripts_through_the_projects_package_manager() -> None:
    scripts = {"scripts": {"test": "pnpm vitest run", "lint": "eslint .", "typecheck": "tsc"}}
    manifest = json.dumps(scripts)
    assert gates({"package.json": manifest, "pnpm-lock.yaml": ""}) == {
        "typecheck": "pnpm run typecheck",
        "test": "pnpm test",
        "lint": "pnpm run lint",
    }
    assert gates({"package.json": manifest, "yarn.lock": ""})["test"] == "yarn test"
    assert gates({"package.json": manifest, "bun.lock": ""})["test"] == "bun run test"  # not bun's own runner
    assert gates({"package.json": manifest, "package-lock.json": ""})["test"] == "npm test"
    declared = json.dumps({**scripts, "packageManager": "yarn@4.1.0"})
    assert gates({"package.json": declared})["lint"] == "yarn run lint"


def test_corepack_shims_run_each_program_at_the_version_setup_asked_for() -> None:
    setup = [
        "uv sync -q --frozen",
        "corepack pnpm@8 install --frozen-lockfile",
        "cd web && corepack yarn install",
    ]
    runs = corepack_runs(setup)
    assert runs == {"pnpm": "pnpm@8", "yarn": "yarn"}
    assert corepack_runs(["npm ci", "echo corepack-pnpm", "/opt/corepack pnpm install"]) == {}
    shims = corepack_shims(runs, "/usr/bin/corepack")
    assert sorted(shims) == ["pnpm", "pnpx", "yarn", "yarnpkg"]
    assert shims["pnpm"].endswith('\nexec /usr/bin/corepack pnpm@8 "$@"\n')
    assert shims["pnpx"].endswith('\nexec /usr/bin/corepack pnpx@8 "$@"\n')
    assert shims["yarnpkg"].endswith('\nexec /usr/bin/corepack yarnpkg "$@"\n')
    assert (
        "exec '/opt/my node/corepack' yarn"
        in corepack_shims({"yarn": "yarn"}, "/opt/my node/corepack")["yarn"]
    )


def test_yarn_berry_without_package_manager_runs_its_yarn_path_or_the_version_of_its_lock_file() -> None:
    """A `.yarnrc.yml` is yarn 2+: `--immutable`. Without `packageManager`, the release its
    `yarnPath` names runs (corepack's yarn classic hands over to it), else the major version that
    writes the lock file's format; never yarn 1 on a berry lock file."""
    manifest = {"package.json": "{}"}
    lock = '# This file is generated by running "yarn install"\n\n__metadata:\n  version: 8\n  cacheKey: 10\n'

    def berry(files: dict[str, str]) -> DetectedSetup:
        files = {**manifest, **files}
        return detect_setup(list(files), files.get, uv=True, node_tools=("corepack",))

    by_lock = berry({"yarn.lock": lock, ".yarnrc.yml": "nodeLinker: node-modules\n"})
    assert by_lock.commands == ["corepack yarn@4 install --immutable"]
    assert "yarn 4 (the newest 4.x: yarn.lock is lockfile version 8 and" in by_lock.notes[0]
    assert berry({"yarn.lock": lock.replace("version: 8", "version: 6"), ".yarnrc.yml": ""}).commands == [
        "corepack yarn@3 install --immutable"
    ]
    released = berry({"yarn.lock": lock, ".yarnrc.yml": "yarnPath: .yarn/releases/yarn-3.6.4.cjs\n"})
    assert released.commands == ["corepack yarn install --immutable"]
    assert "the release that .yarnrc.yml's yarnPath names" in released.notes[0]
    assert lockfile_to_read(["package.json", "yarn.lock", ".yarnrc.yml"], "{}") == ["yarn.lock"]
    assert lockfile_to_read(["package.json", "yarn.lock"], "{}") == []  # classic: the lock is not read
    declared = json.dumps({"packageManager": "yarn@4.1.0"})
    assert lockfile_to_read(["package.json", "yarn.lock", ".yarnrc.yml"], declared) == []


def test_a_jupyterlab_extension_installs_and_runs_its_scripts_with_jlpm() -> None:
    """Its scripts call `jlpm`, the yarn JupyterLab ships, which made its berry lock file: the
    newest yarn 3 changes that lock's TypeScript patch hash and `--immutable` refuses it."""
    pyproject = (
        '[build-system]\nrequires = ["hatchling", "jupyterlab~=4.0.0"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "ext"\nversion = "1"\ndependencies = ["jupyterlab>=4,<5"]\n'
    )
    manifest = {"scripts": {"build": "jlpm run build:lib", "test": "ts-mocha tests/*_spec.ts"}}
    files = {
        "pyproject.toml": pyproject,
        "package.json": json.dumps(manifest),
        "yarn.lock": "__metadata:\n  version: 6\n",
        ".yarnrc.yml": "nodeLinker: node-modules\n",
    }
    found = detect_setup(list(files), files.get, uv=True, node_tools=("corepack",))
    assert found.commands == [
        "uv venv -q .venv && uv pip install -q --python .venv/bin/python -e .",
        "jlpm install --immutable",
    ]
    assert found.notes[0].startswith("Node: jlpm, the yarn that JupyterLab ships")
    assert gates(files)["test"] == "jlpm test"
    # jupyterlab only as a build requirement: the environment would have no jlpm.
    files["pyproject.toml"] = pyproject.replace('dependencies = ["jupyterlab>=4,<5"]', "dependencies = []")
    assert detect_setup(list(files), files.get, uv=True, node_tools=("corepack",)).commands[1] == (
        "corepack yarn@3 install --immutable"
    )
