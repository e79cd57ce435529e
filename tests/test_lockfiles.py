"""What manifests and lockfiles name, what a change to them adds, and vulnerable ranges: on literal files."""

from __future__ import annotations

import json

import pytest

from bot.environment.lockfiles import Change, Pinned, changes, is_dependency_file, packages
from bot.environment.versions import in_range


def pins(path: str, text: str) -> set[tuple[str, str, bool]]:
    return {(p.name, p.version, p.exact) for p in packages(path, text)}


def test_requirements_pins_ranges_and_what_is_not_a_package() -> None:
    text = (
        "# comment\nRequests[socks]==2.19.0 ; python_version > '3'\nflask>=2.0,<3\nPyYAML\n"
        "-r other.txt\n-e .\n./local/pkg\ngit+https://example.com/x.git#egg=x\nmypkg @ https://e.com/x.whl\n"
        "numpy == 1.26.4  # pinned\nstar==1.*\n"
    )
    assert pins("requirements-dev.txt", text) == {
        ("requests", "2.19.0", True),
        ("flask", ">=2.0,<3", False),
        ("pyyaml", "any version", False),
        ("numpy", "1.26.4", True),
        ("star", "==1.*", False),
    }


def test_pyproject_reads_pep621_groups_and_poetry() -> None:
    text = """
[project]
dependencies = ["requests==2.19.0", "attrs>=23"]
[project.optional-dependencies]
dev = ["pytest==8.0.0"]
[dependency-groups]
lint = ["ruff==0.6.0"]
[tool.poetry.dependencies]
python = "^3.11"
django = "4.2.1"
celery = {version = "^5.3", extras = ["redis"]}
local = {path = "../local"}
[tool.poetry.group.test.dependencies]
hypothesis = "==6.0.0"
"""
    assert pins("pyproject.toml", text) == {
        ("requests", "2.19.0", True),
        ("attrs", ">=23", False),
        ("pytest", "8.0.0", True),
        ("ruff", "0.6.0", True),
        ("django", "4.2.1", True),
        ("celery", "^5.3", False),
        ("hypothesis", "6.0.0", True),
    }


def test_uv_and_poetry_locks_keep_registry_packages_only() -> None:
    uv = """
version = 1
[[package]]
name = "demo"
version = "0.1.0"
source = { editable = "." }
[[package]]
name = "PyYAML"
version = "5.3"
source = { registry = "https://pypi.org/simple" }
[[package]]
name = "fromgit"
version = "1.0"
source = { git = "https://example.com/x.git" }
"""
    assert pins("uv.lock", uv) == {("pyyaml", "5.3", True)}
    poetry = """
[[package]]
name = "requests"
version = "2.19.0"
[[package]]
name = "mine"
version = "0.1"
[package.source]
type = "directory"
url = "../mine"
"""
    assert pins("poetry.lock", poetry) == {("requests", "2.19.0", True)}


def test_package_json_exact_ranges_aliases_and_skipped_sources() -> None:
    text = json.dumps(
        {
            "dependencies": {"lodash": "4.17.15", "react": "^18.2.0", "@babel/core": "=7.0.0"},
            "devDependencies": {"alias": "npm:left-pad@1.3.0", "local": "file:../local", "gh": "user/repo"},
            "peerDependencies": {"ignored": "1.0.0"},
        }
    )
    assert pins("package.json", text) == {
        ("lodash", "4.17.15", True),
        ("react", "^18.2.0", False),
        ("@babel/core", "7.0.0", True),
        ("left-pad", "1.3.0", True),
    }


def test_package_lock_v3_and_v1() -> None:
    v3 = {
        "lockfileVersion": 3,
        "packages": {
            "": {"name": "demo", "version": "1.0.0"},
            "node_modules/lodash": {"version": "4.17.15"},
            "node_modules/a/node_modules/@scope/b": {"version": "2.0.0"},
            "node_modules/linked": {"link": True, "resolved": "packages/linked"},
            "packages/linked": {"version": "0.0.1"},
        },
    }
    assert pins("package-lock.json", json.dumps(v3)) == {
        ("lodash", "4.17.15", True),
        ("@scope/b", "2.0.0", True),
    }
    v1 = {
        "lockfileVersion": 1,
        "dependencies": {"a": {"version": "1.0.0", "dependencies": {"b": {"version": "2.0.0"}}}},
    }
    assert pins("package-lock.json", json.dumps(v1)) == {("a", "1.0.0", True), ("b", "2.0.0", True)}


@pytest.mark.parametrize(
    "text",
    [
        "lockfileVersion: '9.0'\npackages:\n  lodash@4.17.15:\n    resolution: {integrity: x}\n"
        "  '@babel/core@7.0.0':\n    resolution: {integrity: y}\n"
        "snapshots:\n  '@babel/core@7.0.0(supports-color@8.1.1)': {}\n",
        "lockfileVersion: '6.0'\npackages:\n  /lodash@4.17.15:\n    resolution: {integrity: x}\n"
        "  /@babel/core@7.0.0(supports-color@8.1.1):\n    resolution: {integrity: y}\n",
        "lockfileVersion: 5.4\npackages:\n  /lodash/4.17.15:\n    resolution: {integrity: x}\n"
        "  /@babel/core/7.0.0_supports-color@8.1.1:\n    resolution: {integrity: y}\n",
    ],
)
def test_pnpm_locks_of_every_version(text: str) -> None:
    assert pins("pnpm-lock.yaml", text) == {("lodash", "4.17.15", True), ("@babel/core", "7.0.0", True)}


def test_yarn_classic_and_berry() -> None:
    classic = (
        '# yarn lockfile v1\n\n"lodash@^4.17.0", lodash@^4.17.15:\n  version "4.17.15"\n  resolved "x"\n\n'
        '"@babel/core@^7.0.0":\n  version "7.0.0"\n'
    )
    berry = (
        '__metadata:\n  version: 6\n\n"lodash@npm:^4.17.15":\n  version: 4.17.15\n'
        '  resolution: "lodash@npm:4.17.15"\n\n'
        '"demo@workspace:.":\n  version: 0.0.0-use.local\n'
    )
    assert pins("yarn.lock", classic) == {("lodash", "4.17.15", True), ("@babel/core", "7.0.0", True)}
    assert pins("yarn.lock", berry) == {("lodash", "4.17.15", True)}


def test_a_change_lists_added_and_upgraded_versions_with_what_they_replace() -> None:
    before = "requests==2.31.0\nflask==3.0.0\n"
    after = "requests==2.19.0\nflask==3.0.0\npyyaml==5.3\n"
    assert changes("requirements.txt", before, after) == [
        Change("pip", "pyyaml", "5.3", "requirements.txt"),
        Change("pip", "requests", "2.19.0", "requirements.txt", previous="2.31.0"),
    ]
    assert changes("requirements.txt", None, "a==1.0\n") == [Change("pip", "a", "1.0", "requirements.txt")]
    assert changes("package.json", "{}", "not json") == []  # a broken file names nothing


def test_which_files_are_read() -> None:
    assert all(
        is_dependency_file(p)
        for p in (
            "pyproject.toml",
            "web/package.json",
            "requirements/dev.txt",
            "dev-requirements.txt",
            "uv.lock",
        )
    )
    assert not any(
        is_dependency_file(p)
        for p in ("node_modules/x/package.json", "README.md", ".venv/lib/pyproject.toml")
    )
    assert Pinned("pip", "a", "1") < Pinned("pip", "b", "1")


@pytest.mark.parametrize(
    ("ecosystem", "version", "vulnerable", "inside"),
    [
        ("pip", "2.19.0", "<= 2.19.1", True),
        ("pip", "2.20.0", "<= 2.19.1", False),
        ("pip", "5.4", "< 5.4", False),
        ("pip", "5.4b1", "< 5.4", True),
        ("npm", "4.17.15", ">= 3.7.0, < 4.17.19", True),
        ("npm", "3.6.0", ">= 3.7.0, < 4.17.19", False),
        ("npm", "1.0.0-beta.2", "< 1.0.0", True),
        ("npm", "1.0.0", "= 1.0.0", True),
        ("npm", "10.0.0", "< 9.0", False),
        ("npm", "not-a-version", "< 1.0.0", None),
        ("pip", "1.0", "~> nonsense", None),
    ],
)
def test_vulnerable_ranges(ecosystem: str, version: str, vulnerable: str, inside: bool | None) -> None:
    assert in_range(ecosystem, version, vulnerable) is inside
