"""How long a story's setup takes, the first time and the second (issue #14's cache target).

    .venv/bin/python bench/setup.py [project==version]

Takes a real Python project from the package index (its source distribution; attrs by
default), detects its setup the way a plan does (`uv venv` and an editable install with its
test extras, every dependency from the index), and runs it as a story's setup runs: the
production `prepare` path, in the sandbox with network, with the repository's caches under
a fresh data dir. Then it runs setup again in a second, fresh worktree of the same repository
(the second story of a batch). Target: the second at most 25 % of the first.

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

from bot.envsetup import MANIFESTS, detect_setup  # noqa: E402
from bot.orchestration.setup import prepare  # noqa: E402
from bot.workspace.jail import Sandbox  # noqa: E402
from bot.workspace.process import uv_program  # noqa: E402
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
        top = {name: text for name, text in files.items() if "/" not in name}
        commands = detect_setup(
            list(top), {n: top.get(n) for n in MANIFESTS}.get, uv=uv_program(None) is not None
        )
        print(f"{spec}: {len(files)} files; setup (detected): {' && '.join(commands)}")
        remote = make_remote(tmp, files)
        state = approved_state(PRD).model_copy(update={"setup": commands, "setup_source": "detected"})
        from bot.repoconfig import load_repo_config

        run = make_run(
            tmp,
            remote,
            state,
            load_repo_config("setup_timeout_seconds: 1800\n"),
            sandbox=Sandbox(mode="auto"),
        )
        await run.mirror.fetch()
        times, sizes = [], []
        for n in (1, 2):
            path = tmp / f"wt{n}"
            wt = await add_worktree(
                run.mirror, branch=f"bench-{n}", base_ref="refs/remotes/origin/main", path=path
            )
            home = tmp / f"home{n}"
            home.mkdir()
            started = time.perf_counter()
            result = await prepare(run, wt, home)
            times.append(time.perf_counter() - started)
            assert result is not None
            if not result.passed:
                print(result.output[-3000:])
                return 1
            sizes.append(sum(f.stat().st_size for f in (tmp / "data" / "cache").rglob("*") if f.is_file()))
            grown = sizes[-1] - (sizes[-2] if n > 1 else 0)
            print(f"setup {n}: {times[-1]:.1f} s; the cache grew by {grown / 1e6:.1f} MB (what was fetched)")
        print(f"second / first: {100 * times[1] / times[0]:.0f} % (target <= 25 %)")
        shutil.rmtree(tmp, ignore_errors=True)
        return 0 if times[1] <= 0.25 * times[0] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "attrs==25.4.0")))
