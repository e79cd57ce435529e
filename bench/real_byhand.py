"""`bench/real_projects.py --by-hand`: each corpus project's own tests, as its developers run them.

The corpus's premise is that every suite passes on this machine; this checks it, unconfined,
with the project's `by_hand` commands (bench/real_corpus.py) in a fresh checkout of each.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

from bench.real_corpus import Project, download, make_repo


async def run_by_hand(project: Project, work: Path, *, timeout: float) -> tuple[bool, float, str]:
    """The project's tests as a developer runs them, unconfined: whether they pass, time, output tail."""
    archive = await asyncio.to_thread(download, project, work / "download")
    repo = work / "repo"
    await make_repo(archive, repo, version=project.version)
    uv_dir = str(Path(sys.executable).parent)  # uv comes with Plan Cascade
    env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}:{uv_dir}"}
    env.pop("VIRTUAL_ENV", None)
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_shell(
        project.by_hand, cwd=repo, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        return False, time.perf_counter() - started, f"timed out after {timeout:.0f} s"
    return proc.returncode == 0, time.perf_counter() - started, out.decode(errors="replace")[-300:]


async def check_by_hand(chosen: list[Project], base: Path, *, jobs: int, timeout: float, keep: bool) -> int:
    """`--by-hand`: does each project's suite pass as its developers run it? (The corpus's premise.)"""
    gate = asyncio.Semaphore(max(1, jobs))

    async def one(project: Project) -> bool:
        async with gate:
            work = base / project.name
            work.mkdir()
            passed, seconds, tail = await run_by_hand(project, work, timeout=timeout)
            last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
            print(
                f"{project.name} {project.version}: {'passed' if passed else 'FAILED'} in {seconds:.0f} s: "
                f"{last.strip()[:160]}  [{project.by_hand}]",
                flush=True,
            )
            return passed

    results = await asyncio.gather(*(one(p) for p in chosen))
    print(f"by hand: {sum(results)}/{len(results)} projects pass their own tests")
    if keep:
        print(f"work directories kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if all(results) else 1
