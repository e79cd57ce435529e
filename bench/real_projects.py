"""Real projects out of the box (issues #26, #41): do detected setup and gates work on real repositories?

    .venv/bin/python bench/real_projects.py [--only NAME ...] [--jobs N] [--keep] [--json PATH]
    .venv/bin/python bench/real_projects.py --by-hand    # the corpus's premise: its own tests pass

Each project of the corpus (bench/real_corpus.py) is downloaded from its package registry (a
PyPI sdist, an npm tarball, an upstream release in Debian's archive) by name and version,
checked against the sha256 pinned there, unpacked, and made a git repository like the project's
own checkout: the sdist's generated metadata (`PKG-INFO`, `*.egg-info`) left out, one commit,
tagged `v<version>`, so git-versioned builds (hatch-vcs, setuptools-scm, pdm's scm source) must
find their version in git, as in a real one. Then a one-story plan runs on it through local
mode's public entry point (`start_run`: the engine, setup, sandbox and gates the server uses),
exactly as a repository with no `.github/plan-cascade.yml` gets it: detected setup, detected
gates, README defaults, and the server's settings from this environment: its sandbox (`required`
unless PLAN_CASCADE_SANDBOX says otherwise; bubblewrap, the data dir hidden) and its tool PATH
(PLAN_CASCADE_TOOL_PATH, default /usr/local/bin:/usr/bin:/bin), its setup variables
(PLAN_CASCADE_SETUP_ENV, and PLAN_CASCADE_PUBLIC_ENV for those that are no secret) and the TLS
trust settings of this environment. The story's agent is
the default `builtin` agent driven by a scripted model (no LLM): it writes
`docs/plan-cascade-bench.md` and finishes, a change no gate can object to.

It prints, per project, the setup that was detected and ran, each check run's conclusion (setup,
the detected gates, the batch's integration gates, and any run on the base that the engine
reports), setup and gate times; then the summary: how many projects are green (every check run
success or neutral and the test gate success; target >= 90 % of the corpus) and whether any
output said "command not found" (target: none). `--json PATH` writes the same as data.

Needs the network to PyPI, npm and Debian (downloads and setup), bubblewrap, git, node with
corepack, Go and Rust.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from bench.real_byhand import check_by_hand  # noqa: E402
from bench.real_corpus import CORPUS, Project, download, make_repo, registry_egress  # noqa: E402
from bench.real_report import Outcome, checks_in, report, why_red  # noqa: E402
from bot.errors import LLMError  # noqa: E402
from bot.llm.base import Completion, Message, ToolSpec  # noqa: E402
from bot.llm.scripted import tool_reply  # noqa: E402
from bot.local.runner import INTERRUPTED, LocalContext, RunRequest, shared_data_dir, start_run  # noqa: E402
from bot.local.store import LocalRun, RunStore  # noqa: E402
from bot.plan.baseline import summary_line  # noqa: E402
from bot.runtime.settings import Settings  # noqa: E402

BENCH_FILE = "docs/plan-cascade-bench.md"
PROJECT_TIMEOUT = 900
"""Seconds one project's whole run may take (setup, up to three gate rounds, integration)."""
NOT_FOUND = re.compile(r"command not found|\bsh: \d+: \S+: not found")
"""bash's and dash's (npm scripts') words for a program that is not on PATH."""


# -- the story's agent: the builtin agent on a scripted model ------------------------------
class BenchModel:
    """A model that writes BENCH_FILE and finishes; it refuses anything else (the review).

    Every prompt it is given is kept: a retry's prompt carries the failed gates' output.
    """

    model = "bench-scripted"
    provider = "scripted"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def complete(
        self, *, system: str, messages: list[Message], tools: list[ToolSpec] | None = None, **_: Any
    ) -> Completion:
        names = {tool.name for tool in tools or []}
        if "write" not in names:
            raise LLMError("the bench's scripted model reviews nothing")
        if messages[-1].role != "tool":
            self.prompts.append(messages[0].content)
            text = "# Plan Cascade bench\n\nA harmless file: the story changes nothing that matters.\n"
            return tool_reply("write", {"path": BENCH_FILE, "content": text})
        return tool_reply("finish", {"summary": f"wrote {BENCH_FILE}"})


PRD = """version: 1
title: Plan Cascade bench
summary: One harmless story, to see that the detected setup and gates work out of the box.
stories:
  - id: STORY-001
    title: Add docs/plan-cascade-bench.md
    acceptance_criteria: ["docs/plan-cascade-bench.md exists and says it is harmless"]
    files: [docs/plan-cascade-bench.md]
"""


# -- one project -----------------------------------------------------------------------
async def run_project(project: Project, work: Path, *, timeout: float) -> Outcome:
    """Download, make the repository, run the one-story plan as the server would; what happened."""
    outcome = Outcome(project=f"{project.name} {project.version}", kind=project.registry)
    started = time.perf_counter()
    buffer = io.StringIO()
    model = BenchModel()
    try:
        archive = await asyncio.to_thread(download, project, work / "download")
        repo = work / "repo"
        await make_repo(archive, repo, version=project.version)
        prd = work / "prd.yaml"
        prd.write_text(PRD)
        data = work / "data"
        settings = Settings(data_dir=data)  # the server's defaults: sandbox required, data dir hidden
        ctx = LocalContext(
            console=Console(file=buffer, width=400, no_color=True, force_terminal=False),
            ask=None,
            llm_for=lambda config, name: model,
            data_root=data,
            tool_path=settings.tool_path,
            sandbox=settings.sandbox_policy(),
        )
        request = RunRequest(repo=repo, prd_file=prd, yes=True)
        try:
            code = await asyncio.wait_for(start_run(request, ctx), timeout)
        except TimeoutError:
            code = INTERRUPTED
        if code == INTERRUPTED:  # local mode takes the cancel as an interrupt, and says so
            outcome.error = f"timed out after {timeout:.0f} s"
        records = RunStore(shared_data_dir(repo, data)).all()
        if records:
            read_record(outcome, records[0])
    except Exception as exc:  # one project's failure is a row of the table, not the end of the bench
        outcome.error = f"{type(exc).__name__}: {exc}"
    outcome.seconds = time.perf_counter() - started
    text = buffer.getvalue()
    outcome.checks = checks_in(text)
    retry = next((p for p in reversed(model.prompts) if "quality gate(s) failed" in p), "")
    feedback = retry[retry.find("quality gate(s) failed") :] if retry else ""
    outcome.feedback = feedback.split("\n## Rules")[0].rstrip("`\n ")[:6000]
    (work / "console.txt").write_text(text)
    everything = "\n".join([text, outcome.feedback, outcome.reason, outcome.error, outcome.base_setup_output])
    outcome.command_not_found = NOT_FOUND.search(everything) is not None
    outcome.red = why_red(outcome)
    outcome.green = not outcome.red
    return outcome


def read_record(outcome: Outcome, record: LocalRun) -> None:
    """The plan's setup, status and each check run's conclusion, from local mode's run file."""
    state = record.state
    outcome.setup, outcome.setup_source = list(state.setup), str(state.setup_source)
    outcome.status = state.status.value
    story = state.stories["STORY-001"]
    outcome.reason = story.reason or ""
    outcome.attempts = story.attempts
    outcome.story_gates = dict(story.gates)
    if state.batches:
        outcome.batch_gates = dict(state.batches[0].gates)
    check = state.base_check
    if check is not None:
        outcome.base = {g.name: g.conclusion for g in check.gates}
        if check.setup is not None:
            outcome.base = {"setup": check.setup, **outcome.base}
        outcome.base_line = summary_line(check)
        outcome.base_setup_output = check.setup_output


def code_version() -> str:
    """The commit of the code under test (and `+changes` when the tree has uncommitted ones)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "bot"], capture_output=True, text=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "an unknown commit"
    return head + ("+changes" if dirty.stdout.strip() else "")


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="run this project (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="projects at once (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the work directories")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument("--timeout", type=float, default=PROJECT_TIMEOUT, help="seconds per project")
    parser.add_argument(
        "--by-hand",
        action="store_true",
        help="only check the corpus: each project's tests as a developer runs them",
    )
    args = parser.parse_args(argv)
    known = {p.name: p for p in CORPUS}
    unknown = [name for name in args.only if name not in known]
    if unknown:
        parser.error(f"not in the corpus: {', '.join(unknown)} (known: {', '.join(known)})")
    chosen = [known[name] for name in args.only] if args.only else CORPUS
    if "PLAN_CASCADE_SETUP_EGRESS" not in os.environ and (egress := registry_egress()):
        os.environ["PLAN_CASCADE_SETUP_EGRESS"] = egress
        print(f"the registries resolve to non-public addresses here: PLAN_CASCADE_SETUP_EGRESS={egress}")
    base = Path(tempfile.mkdtemp(prefix="plan-cascade-real-"))
    print(f"Plan Cascade at {code_version()}; {len(chosen)} project(s)", flush=True)
    gate = asyncio.Semaphore(max(1, args.jobs))
    started = time.perf_counter()

    if args.by_hand:
        return await check_by_hand(chosen, base, jobs=args.jobs, timeout=args.timeout, keep=args.keep)

    async def one(project: Project) -> Outcome:
        async with gate:
            work = base / project.name
            work.mkdir()
            print(f"{project.name} {project.version}: running", flush=True)
            outcome = await run_project(project, work, timeout=args.timeout)
            print(
                f"{project.name} {project.version}: {'green' if outcome.green else 'red'} "
                f"in {outcome.seconds:.0f} s",
                flush=True,
            )
            return outcome

    outcomes = list(await asyncio.gather(*(one(p) for p in chosen)))
    total = time.perf_counter() - started
    print(report(outcomes, total_seconds=total))
    if args.json:
        pins = {p.name: asdict(p) for p in chosen}
        rows = [{**asdict(o), "pin": pins[o.project.split()[0]]} for o in outcomes]
        summary = {
            "green": sum(o.green for o in outcomes),
            "projects": len(outcomes),
            "command_not_found": [o.project for o in outcomes if o.command_not_found],
            "seconds": round(total, 1),
        }
        args.json.write_text(json.dumps({"summary": summary, "projects": rows}, indent=1))
    if args.keep:
        print(f"work directories kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    green = sum(o.green for o in outcomes)
    return (
        0
        if outcomes and green >= 0.9 * len(outcomes) and not any(o.command_not_found for o in outcomes)
        else 1
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
