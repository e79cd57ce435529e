"""The corpus of bench/real_projects.py: real projects, pinned, fetched from their registries.

Each entry names a project's release and the sha256 of its sdist (PyPI), tarball (npm) or
upstream release archive (Debian), what kind of project it is (build backend or package manager,
layout, where its tests' needs are declared) and how its developers run its tests. Nothing is
vendored: `download` fetches the archive at bench time and refuses one whose checksum differs;
`make_repo` makes it a git checkout.

npm tarballs carry no lock file (npm leaves `package-lock.json`, `yarn.lock`, `pnpm-lock.yaml`
out of every package), and GitHub, crates.io and the Go module proxy are out of reach of the
machines this bench runs on. So the projects with a lock file come from Debian's archive, whose
`.orig.tar.gz` of a package is the upstream release as published: for postcss-reporter and
postcss-value-parser the archive of the git tag (lock file included), for a Rust crate the
`.crate` crates.io serves, for a Go module the tag's archive; and the yarn berry project is a
JupyterLab extension whose PyPI sdist ships its JavaScript side with `yarn.lock`. Go modules and
Rust crates whose dependencies need the Go module proxy or crates.io cannot set up here, so the
ones taken have no dependencies: their setup (`go mod download`, `cargo fetch`) and gates still
run as for any other, with the toolchain in the sandbox.
`python bench/real_projects.py --by-hand` runs each project's own tests that way (unconfined, see
bench/real_byhand.py), to check the corpus's premise: every suite passes on this machine.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bot.workspace.git import git_env, run_git


@dataclass(frozen=True)
class Project:
    """One corpus entry: what to download, and what kind of project it is."""

    name: str
    version: str
    registry: str  # "pypi", "npm" or "debian"
    sha256: str
    backend: str
    layout: str
    test_deps: str
    """Where the project declares what its tests need."""
    by_hand: str
    """How a developer installs and runs its tests (`--by-hand` checks the corpus with these)."""
    archive: str = ""
    """Debian: the archive's path in the pool (`pool/main/…/<package>_<version>.orig.tar.gz`)."""


PY = "uv venv -q .venv && uv pip install -q --python .venv/bin/python {} && .venv/bin/python -m pytest -q"
NODE = "npm install --no-audit --no-fund && npm test"
DEBIAN = "https://deb.debian.org/debian/"


CORPUS = [
    Project(
        "six",
        "1.17.0",
        "pypi",
        sha256="ff70335d468e7eb6ec65b95b99d3a2836546063f63acc5171de367e834932a81",
        backend="setuptools, setup.py only",
        layout="flat (one module)",
        test_deps="nothing: plain pytest",
        by_hand=PY.format("-e . pytest"),
    ),
    Project(
        "python-slugify",
        "9.2.0",
        "pypi",
        sha256="cee32948083476013804de1667724fb1362dacb71e47b1d5d92adf8db6ee3298",
        backend="setuptools, setup.py",
        layout="flat",
        test_deps="dev.requirements.txt, tox.ini",
        by_hand=PY.format("-e . -r dev.requirements.txt"),
    ),
    Project(
        "toolz",
        "1.2.0",
        "pypi",
        sha256="9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
        backend="setuptools + setuptools-git-versioning",
        layout="flat, tests in the package",
        test_deps="PEP 735 group test",
        by_hand=PY.format("-e . --group test"),
    ),
    Project(
        "cachetools",
        "5.5.0",
        "pypi",
        sha256="2cc24fb4cbe39633fb7badd9db9ca6295d766d9c2995f245725a46715d050f2a",
        backend="setuptools, setup.cfg (pyproject: build-system only)",
        layout="src",
        test_deps="tox.ini deps only",
        by_hand=PY.format("-e . pytest"),
    ),
    Project(
        "humanize",
        "4.17.0",
        "pypi",
        sha256="1d6a36c453dbfbb3f0b34601d2e0b4ce5d48d780305cd45714843f0068fde6ac",
        backend="hatchling + hatch-vcs",
        layout="src",
        test_deps="extra [tests]",
        by_hand=PY.format("-e '.[tests]'"),
    ),
    Project(
        "more-itertools",
        "10.5.0",
        "pypi",
        sha256="5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6",
        backend="flit-core",
        layout="flat",
        test_deps="tox.ini, requirements/development.txt",
        by_hand=PY.format("-e . pytest"),
    ),
    Project(
        "packaging",
        "24.2",
        "pypi",
        sha256="c228a6dc5e932d346bc5739379109d49e8853dd8223571c7c5b55260edc0b97f",
        backend="flit-core",
        layout="src",
        test_deps="tests/requirements.txt",
        by_hand=PY.format("-e . -r tests/requirements.txt"),
    ),
    Project(
        "itsdangerous",
        "2.2.0",
        "pypi",
        sha256="e0050c0b7da1eea53ffaf149c0cfbb5c6e2e2b69c4bef22c81fa6eb73e5f6173",
        backend="flit-core",
        layout="src",
        test_deps="requirements/tests.txt",
        by_hand=PY.format("-e . -r requirements/tests.txt"),
    ),
    Project(
        "cleo",
        "2.1.0",
        "pypi",
        sha256="0b2c880b5d13660a7ea651001fb4acb527696c01f15c9ee650f377aa543fd523",
        backend="poetry-core, [tool.poetry] metadata (no [project])",
        layout="src",
        test_deps="[tool.poetry.group.dev.dependencies]",
        by_hand=PY.format("-e . pytest pytest-mock"),
    ),
    Project(
        "tomlkit",
        "0.15.2",
        "pypi",
        sha256="83e32755ba1d20d9340bd069ee97e9f6232ba2346b63ffcba425de01f7e327a6",
        backend="poetry-core",
        layout="flat",
        test_deps="PEP 735 group dev",
        by_hand=PY.format("-e . --group dev"),
    ),
    Project(
        "dep-logic",
        "0.7.2",
        "pypi",
        sha256="2a3c49526075b0bc6825f0ea8c2d9f464de48b7b85f3f3d2900b4e5950fefedf",
        backend="pdm-backend, scm version",
        layout="src",
        test_deps="[tool.pdm.dev-dependencies]",
        by_hand=PY.format("-e . pytest"),
    ),
    Project(
        "deep-is",
        "0.1.4",
        "npm",
        sha256="0c03aa83c6bf68e7c2cc2c5b5a2d732c1879e7711b08011b0bc48df10d10bf3c",
        backend="npm",
        layout="flat",
        test_deps="devDependencies (tape), no lockfile",
        by_hand=NODE,
    ),
    Project(
        "xtend",
        "4.0.2",
        "npm",
        sha256="bd22a01d43c799be7bb53dfa9e775b132045e39525e51efb977528a00041ba48",
        backend="npm",
        layout="flat",
        test_deps="devDependencies (tape), no lockfile",
        by_hand=NODE,
    ),
    Project(
        "concat-map",
        "0.0.1",
        "npm",
        sha256="35902dd620cf0058c49ea614120f18a889d984269a90381b7622e79c2cfe4261",
        backend="npm",
        layout="flat",
        test_deps="devDependencies (tape), no lockfile",
        by_hand=NODE,
    ),
    Project(
        "fast-json-stable-stringify",
        "2.1.0",
        "npm",
        sha256="1e2df822c43e0a2b448e5df79bf8e6d3e085c86e30456cd383a2f96215fd1687",
        backend="npm",
        layout="flat",
        test_deps="devDependencies (eslint, nyc, tape), no lockfile",
        by_hand=NODE,
    ),
    Project(
        "postcss-reporter",
        "7.0.5",
        "debian",
        sha256="e7132eae7cba2c3d39fd7f523d59c641d2a059eb74871f7df079b9e2dc4ef083",
        backend="pnpm (pnpm-lock.yaml, lockfile 5.3: pnpm 6), no packageManager",
        layout="flat; its test script calls pnpm",
        test_deps="devDependencies (tape, eslint, stylelint, less)",
        by_hand=(  # pnpm 7 on PATH, as a developer has it (pnpm 6 fails on Node 18 and later)
            "mkdir -p .bin && printf '#!/bin/sh\\nexec corepack pnpm@7 \"$@\"\\n' > .bin/pnpm && "
            'chmod +x .bin/pnpm && export PATH="$PWD/.bin:$PATH" && '
            "pnpm install --frozen-lockfile && pnpm test"
        ),
        archive="pool/main/n/node-postcss-reporter/node-postcss-reporter_7.0.5+~7.0.1.orig.tar.gz",
    ),
    Project(
        "postcss-value-parser",
        "4.2.0",
        "debian",
        sha256="d3816de888b561be711a684d9cf0b90508b6d5014db973af06e6f7304e2e63d3",
        backend="yarn classic (yarn.lock), no packageManager",
        layout="lib/; its pretest script calls yarn",
        test_deps="devDependencies (tape, eslint, prettier)",
        by_hand="corepack yarn install --frozen-lockfile && corepack yarn test",
        archive="pool/main/n/node-postcss-value-parser/node-postcss-value-parser_4.2.0.orig.tar.gz",
    ),
    Project(
        "jupyterlab-execute-time",
        "3.3.0",
        "pypi",
        sha256="900fd1aebbfd3d943d3625eef973eed555bb2745d49840402783959c8a1dfc3a",
        backend="yarn berry (yarn.lock v6, .yarnrc.yml) through jlpm; hatchling",
        layout="a JupyterLab extension: TypeScript in src/, Python package beside it",
        test_deps="devDependencies (ts-mocha, chai); jupyterlab in [project] dependencies",
        by_hand=(
            "uv venv -q .venv && uv pip install -q --python .venv/bin/python -e . && "
            ".venv/bin/jlpm install --immutable && .venv/bin/jlpm test"
        ),
    ),
    Project(
        "go-cmp",
        "0.5.9",
        "debian",
        sha256="41a074c2fcfc72f813736f8ca8e3116e260a6b79af407d9da0d4c5e4c3f61acf",
        backend="Go module (go.mod, no dependencies)",
        layout="packages under cmp/",
        test_deps="the standard library",
        by_hand="go mod download && go test ./...",
        archive="pool/main/g/golang-github-google-go-cmp/golang-github-google-go-cmp_0.5.9.orig.tar.gz",
    ),
    Project(
        "uuid",
        "1.3.0",
        "debian",
        sha256="7f7f37c47980e0afcc178a9ffc390bec29ed2371919b4c07658eb01791a7f921",
        backend="Go module (go.mod, no dependencies)",
        layout="one package at the top",
        test_deps="the standard library",
        by_hand="go mod download && go test ./...",
        archive="pool/main/g/golang-github-google-uuid/golang-github-google-uuid_1.3.0.orig.tar.gz",
    ),
    Project(
        "scopeguard",
        "1.2.0",
        "debian",
        sha256="94143f37725109f92c262ed2cf5e59bce7498c01bcc1502d7b9afe439a4e9f49",
        backend="Rust crate (Cargo.lock, no dependencies)",
        layout="src/lib.rs, examples/",
        test_deps="none",
        by_hand="cargo fetch && cargo test --no-fail-fast",
        archive="pool/main/r/rust-scopeguard/rust-scopeguard_1.2.0.orig.tar.gz",
    ),
    Project(
        "fnv",
        "1.0.7",
        "debian",
        sha256="3f9eec918d3f24069decb9af1554cad7c880e2da24a9afd88aca000531ab82c1",
        backend="Rust crate (no Cargo.lock, no dependencies)",
        layout="lib.rs at the top",
        test_deps="none",
        by_hand="cargo fetch && cargo test --no-fail-fast",
        archive="pool/main/r/rust-fnv/rust-fnv_1.0.7.orig.tar.gz",
    ),
]


# -- the corpus, from its registries ----------------------------------------------------
def download(project: Project, into: Path) -> Path:
    """The project's sdist, tarball or release archive from its registry, its sha256 checked
    against the pin."""
    into.mkdir(parents=True, exist_ok=True)
    if project.registry == "pypi":
        index = f"https://pypi.org/pypi/{project.name}/json"
        with urllib.request.urlopen(index, timeout=60) as answer:
            release = json.load(answer)["releases"].get(project.version) or []
        [sdist] = [f for f in release if f["packagetype"] == "sdist"]
        archive = into / sdist["filename"]
        url = urllib.parse.urljoin(index, sdist["url"])  # the index may answer with a relative URL
        if not url.startswith("https://"):
            raise SystemExit(f"{project.name}: the index gave {url!r}, not an https URL")
        with urllib.request.urlopen(url, timeout=120) as answer:  # noqa: S310 (https checked above)
            archive.write_bytes(answer.read())
    elif project.registry == "debian":
        archive = into / project.archive.rsplit("/", 1)[-1]
        with urllib.request.urlopen(DEBIAN + project.archive, timeout=120) as answer:  # noqa: S310 (https)
            archive.write_bytes(answer.read())
    else:
        packed = subprocess.run(
            ["npm", "pack", f"{project.name}@{project.version}", "--silent", "--pack-destination", str(into)],
            check=True,
            capture_output=True,
            text=True,
            timeout=180,
        )
        archive = into / packed.stdout.strip().splitlines()[-1]
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != project.sha256:
        raise SystemExit(f"{archive.name}: sha256 {digest}, pinned {project.sha256}: refusing to run it")
    return archive


async def make_repo(archive: Path, repo: Path, *, version: str) -> None:
    """The archive's files as a git checkout on `main`: one commit, tagged `v<version>`.

    What the sdist's build generated is left out: with `PKG-INFO` there, a versioning plugin
    that cannot run git falls back to it, and the bench would not see what a checkout gets.
    """
    with tarfile.open(archive) as tar:
        tar.extractall(repo.parent / "unpacked", filter="data")
    [top] = list((repo.parent / "unpacked").iterdir())
    top.rename(repo)
    for generated in [repo / "PKG-INFO", *repo.glob("*.egg-info"), *repo.glob("src/*.egg-info")]:
        if generated.is_dir():
            shutil.rmtree(generated)
        else:
            generated.unlink(missing_ok=True)
    identity = {"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com"}
    identity |= {"GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    env = git_env(base=identity)
    for args in (
        ["init", "-q"],
        ["symbolic-ref", "HEAD", "refs/heads/main"],
        ["add", "-A"],
        ["commit", "-q", "--no-gpg-sign", "-m", f"{archive.name} as released"],
        ["tag", f"v{version}"],
    ):
        await run_git(args, cwd=repo, env=env)


def registry_egress() -> str | None:
    """The setup egress list this machine needs, when the default one cannot work here.

    Setup reaches the package registries only through the egress proxy, which refuses a name
    that resolves to a non-public address unless that address is listed too. Where the
    registries resolve inward (a mirror on a private or reserved address, as on some build
    machines), the defaults are kept and those addresses added; None when the defaults work.
    """
    import socket

    from bot.network.proxy import DEFAULT_SETUP_EGRESS, public

    extra: set[str] = set()
    for host in DEFAULT_SETUP_EGRESS:
        try:
            infos = socket.getaddrinfo(host, 443, type=socket.SOCK_STREAM)
        except OSError:
            continue
        for info in infos:
            address = str(info[4][0])
            if not public(address):
                extra |= {f"{address}:443", f"{address}:80"} if ":" not in address else {f"[{address}]:443"}
    if not extra:
        return None
    return ",".join([*DEFAULT_SETUP_EGRESS, *sorted(extra)])
