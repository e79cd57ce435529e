"""How long a story's setup takes, the first time and the second (issue #26's target).

    .venv/bin/python bench/setup.py [project==version]

Takes a real Python project from the package index (its source distribution; attrs by
default), detects its setup the way a plan does (every dependency from the index), and runs
it as the server does: the production `prepare` path in the sandbox with network, with the
repository's caches under a fresh data dir, in the worktree of the plan's base check. The base
check keeps that environment, and a story's worktree then gets a copy of it (the production
`reuse_base_environment` path) instead of running setup again. The copy is checked: its Python
finds the project's installed metadata, at the story's path. For comparison, setup is also run
again from the warm cache in a third worktree (what each story did before). Target: the
second story's setup at most 25 % of the first.

Needs the package index (PyPI, or what pip is configured with) and bubblewrap for the sandbox
(without it, setup runs unconfined, as `PLAN_CASCADE_SANDBOX=auto` does).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.real_corpus import registry_egress  # noqa: E402
from bot.environment.setup import detect_setup  # noqa: E402
from bot.orchestration.envcopy import keep_base_environment, reuse_base_environment, setup_wrote  # noqa: E402
from bot.orchestration.setup import prepare  # noqa: E402
from bot.sandbox.confinement import Sandbox  # noqa: E402
from bot.sandbox.process import uv_program  # noqa: E402
from bot.workspace.worktree import add_worktree  # noqa: E402
from tests.execution_support import approved_state, make_remote, make_run  # noqa: E402

PRD = """version: 1
title: Bench
summary: One story.
stories:
  - id: STORY-001
    title: One
    acceptance_criteria: ["the test suite passes in the prepared environment"]
"""


def project_files(spec: str, into: Path) -> dict[str, str]:
    """The text files of `spec`'s source distribution (downloaded from the index)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            spec,
            "-d",
            str(into),
        ],
        check=True,
    )
    [archive] = list(into.glob("*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    top = next(p for p in into.iterdir() if p.is_dir())
    files = {}
    for path in top.rglob("*"):
        if path.is_file():
            try:
                files[str(path.relative_to(top))] = path.read_text()
            except UnicodeDecodeError:
                continue
    return files


async def main(spec: str) -> int:
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        files = project_files(spec, tmp / "sdist")
        commands = detect_setup(list(files), files.get, uv=uv_program(None) is not None).commands
        print(f"{spec}: {len(files)} files; setup (detected): {' && '.join(commands)}")
        remote = make_remote(tmp, files)
        egress = registry_egress()  # the README's default list, plus this machine's inward addresses
        state = approved_state(PRD).model_copy(update={"setup": commands, "setup_source": "detected"})
        from bot.config.load import load_repo_config

        run = make_run(
            tmp,
            remote,
            state,
            load_repo_config("setup_timeout_seconds: 1800\n"),
            sandbox=Sandbox(mode="auto", setup_egress=tuple(egress.split(",")) if egress else None),
        )
        await run.mirror.fetch()
        dist = spec.split("==")[0]
        cache = tmp / "data" / "cache"

        async def worktree(name: str):  # type: ignore[no-untyped-def]
            path = run.work_root / name
            wt = await add_worktree(
                run.mirror, branch=f"bench-{name}", base_ref="refs/remotes/origin/main", path=path
            )
            home = run.work_root / f".home-{name}"
            home.mkdir(parents=True)
            return wt, home

        base, home = await worktree("base-check")
        started = time.perf_counter()
        first = await prepare(run, base, home)
        first_s = time.perf_counter() - started
        assert first is not None
        if not first.passed:
            print(first.output[-3000:])
            return 1
        await keep_base_environment(run, base, output=first.output, written=await setup_wrote(base))
        size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
        print(f"first setup (the base check): {first_s:.1f} s; the cache holds {size / 1e6:.1f} MB")

        story, _ = await worktree("story-001")
        started = time.perf_counter()
        second = await reuse_base_environment(run, story)
        second_s = time.perf_counter() - started
        if second is None:
            print("the base environment was not reused")
            return 1
        probe = subprocess.run(
            [
                str(story.path / ".venv" / "bin" / "python"),
                "-c",
                f"import importlib.metadata as m; print(m.version({dist!r}))",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        works = probe.returncode == 0
        print(f"second setup (a story, copied): {second_s:.2f} s; works: {works} {probe.stdout.strip()}")

        again, home3 = await worktree("story-002")
        started = time.perf_counter()
        rerun = await prepare(run, again, home3)
        rerun_s = time.perf_counter() - started
        print(f"compare: setup again, warm cache: {rerun_s:.1f} s (passed: {bool(rerun and rerun.passed)})")
        ratio = second_s / first_s
        print(f"second / first: {100 * ratio:.0f} % (target <= 25 %; again: {100 * rerun_s / first_s:.0f} %)")
        shutil.rmtree(tmp, ignore_errors=True)
        return 0 if ratio <= 0.25 and works else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "attrs==25.4.0")))
