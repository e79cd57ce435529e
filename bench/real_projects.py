"""Real projects out of the box (issue #26): do detected setup and gates work on real repositories?

    .venv/bin/python bench/real_projects.py [--only NAME ...] [--jobs N] [--keep] [--json PATH]

Each project of the corpus below is downloaded from its package registry (a PyPI sdist, an npm
tarball) by name and version, checked against the sha256 pinned here, unpacked, and made a git
repository like the project's own checkout: the sdist's generated metadata (`PKG-INFO`,
`*.egg-info`) left out, one commit, tagged `v<version>`, so git-versioned builds (hatch-vcs,
setuptools-scm, pdm's scm source) must find their version in git, as they do in a real one. Then a
one-story plan runs on it through local mode's public entry point (`start_run`: the engine,
setup, sandbox and gates the server uses), exactly as a repository with no
`.github/plan-cascade.yml` gets it: detected setup, detected gates, README defaults, and the
server's settings from this environment: its sandbox (`required` unless PLAN_CASCADE_SANDBOX
says otherwise; bubblewrap, the data dir hidden) and its tool PATH (PLAN_CASCADE_TOOL_PATH,
default /usr/local/bin:/usr/bin:/bin). The story's agent is the default `builtin` agent driven
by a scripted model (no LLM): it writes `docs/plan-cascade-bench.md` and finishes, a change no
gate can object to.

It prints, per project, the setup that was detected and ran, each check run's conclusion (setup,
the detected gates, the batch's integration gates, and any run on the base that the engine
reports), setup and gate times; then the summary: how many projects are green (every check run
success or neutral and the test gate success; target >= 90 % of the corpus) and whether any
output said "command not found" (target: none). `--json PATH` writes the same as data.

Needs the network to PyPI and npm (downloads and setup), bubblewrap, git, node/npm.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from bot.errors import LLMError  # noqa: E402
from bot.llm.base import Completion, Message, ToolSpec  # noqa: E402
from bot.llm.scripted import tool_reply  # noqa: E402
from bot.local.runner import INTERRUPTED, LocalContext, RunRequest, shared_data_dir, start_run  # noqa: E402
from bot.local.store import LocalRun, RunStore  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.workspace.git import git_env, run_git  # noqa: E402

BENCH_FILE = "docs/plan-cascade-bench.md"
PROJECT_TIMEOUT = 900
"""Seconds one project's whole run may take (setup, up to three gate rounds, integration)."""
GREEN = ("success", "neutral")
NOT_FOUND = re.compile(r"command not found|\bsh: \d+: \S+: not found")
"""bash's and dash's (npm scripts') words for a program that is not on PATH."""


@dataclass(frozen=True)
class Project:
    """One corpus entry: what to download, and what kind of project it is."""

    name: str
    version: str
    registry: str  # "pypi" or "npm"
    sha256: str
    backend: str
    layout: str
    test_deps: str
    """Where the project declares what its tests need."""
    by_hand: str
    """How a developer installs and runs its tests (`--by-hand` checks the corpus with these)."""


PY = "uv venv -q .venv && uv pip install -q --python .venv/bin/python {} && .venv/bin/python -m pytest -q"
NODE = "npm install --no-audit --no-fund && npm test"


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
]


# -- the corpus, from its registries ----------------------------------------------------
def download(project: Project, into: Path) -> Path:
    """The project's sdist or tarball from its registry, its sha256 checked against the pin."""
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
@dataclass
class Check:
    """One gate's (or setup's) run, from the terminal line local mode prints for it."""

    scope: str
    name: str
    verdict: str
    seconds: float
    detail: str = ""


@dataclass
class Outcome:
    project: str
    kind: str
    setup: list[str] = field(default_factory=list)
    setup_source: str = ""
    status: str = ""
    reason: str = ""
    attempts: int = 0
    story_gates: dict[str, str] = field(default_factory=dict)
    batch_gates: dict[str, str] = field(default_factory=dict)
    base: dict[str, Any] = field(default_factory=dict)
    """Whatever the run file says about runs on the base (nothing before base judging exists)."""
    checks: list[Check] = field(default_factory=list)
    feedback: str = ""
    seconds: float = 0.0
    error: str = ""
    command_not_found: bool = False
    green: bool = False
    red: list[str] = field(default_factory=list)
    """Why it is not green."""


_FINISHED = re.compile(
    r"^\s*\S+ (?P<scope>.+?) (?P<name>\S+) (?P<verdict>[a-z]+)(?: \((?P<why>[^)]*)\))? "
    r"in (?P<secs>[\d.]+)s(?::\s?(?P<tail>.*))?$"
)
"""`✓ STORY-001 test passed in 1.2s`, `✗ batch-1 lint failed (exit 1) in 0.3s: tail`: local mode's
line for a finished check; the scope may have words of its own (a run on the base, say)."""


def checks_in(console_text: str) -> list[Check]:
    """Every finished gate line local mode printed (setup included, base runs too when reported)."""
    found = []
    for line in console_text.splitlines():
        match = _FINISHED.match(line)
        if match:
            detail = " ".join(x for x in (match["why"], match["tail"]) if x)
            found.append(
                Check(match["scope"], match["name"], match["verdict"], float(match["secs"]), detail.strip())
            )
    return found


def why_red(outcome: Outcome) -> list[str]:
    """Why a project is not green (none when it is): every check run success or neutral, and a
    test gate that succeeded."""
    reasons = [outcome.error] if outcome.error else []
    if outcome.status != "completed":
        reasons.append(f"plan {outcome.status or 'not run'}")
    if "test" not in outcome.story_gates:
        reasons.append("no test gate ran")
    conclusions = {**outcome.story_gates, **{f"integration {k}": v for k, v in outcome.batch_gates.items()}}
    reasons += [f"{name} {c}" for name, c in conclusions.items() if c not in GREEN]
    return reasons


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
    everything = "\n".join([text, outcome.feedback, outcome.reason, outcome.error])
    outcome.command_not_found = NOT_FOUND.search(everything) is not None
    outcome.red = why_red(outcome)
    outcome.green = not outcome.red
    return outcome


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
    # What the engine records of gate runs on the base, whatever it calls it (`base_gates`, …).
    for scope, fields in (("story", story.model_dump(mode="json")), ("plan", state.model_dump(mode="json"))):
        outcome.base |= {
            f"{scope}.{k}": v for k, v in fields.items() if "base" in k and k != "base_branch" and v
        }


# -- the table -------------------------------------------------------------------------
def gate_cells(outcome: Outcome) -> str:
    """`scope: gate verdict seconds, …` for every check run, in the order they ran."""
    parts: dict[str, list[str]] = {}
    seen: set[tuple[str, str, float]] = set()
    for check in outcome.checks:
        if check.name == "setup" and (check.scope, check.name, check.seconds) in seen:
            continue  # the same setup, reported again beside each attempt's gates
        seen.add((check.scope, check.name, check.seconds))
        parts.setdefault(check.scope, []).append(f"{check.name} {check.verdict} {check.seconds:.1f}s")
    return " | ".join(f"{scope}: {', '.join(items)}" for scope, items in parts.items()) or "-"


def table(outcomes: list[Outcome]) -> list[str]:
    """One row per project: setup, its time, each check's final conclusion, green or not."""
    header = (
        "project",
        "setup (detected)",
        "story checks (first run s)",
        "base runs",
        "integration",
        "green",
    )
    rows = [header]
    for o in outcomes:
        first: dict[str, float] = {}
        for check in o.checks:
            if check.scope == "STORY-001":
                first.setdefault(check.name, check.seconds)
        story = [f"{k}={v}" + (f"({first[k]:.1f})" if k in first else "") for k, v in o.story_gates.items()]
        others = [c for c in o.checks if c.scope != "STORY-001" and not c.scope.startswith("batch-")]
        rows.append(
            (
                o.project,
                short_setup(o.setup),
                " ".join(story) or "-",
                " ".join(f"{c.scope}:{c.name}={c.verdict}" for c in others)
                or ("recorded" if o.base else "-"),
                " ".join(f"{k}={v}" for k, v in o.batch_gates.items()) or "-",
                "yes" if o.green else "no",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]


def short_setup(commands: list[str]) -> str:
    """The setup's install arguments (`-e '.[tests]' --group dev`), or `none`."""
    if not commands:
        return "none"
    return " && ".join(c.split(".venv/bin/python ", 1)[-1] if "uv pip install" in c else c for c in commands)


def report(outcomes: list[Outcome], *, total_seconds: float) -> str:
    lines = [*table(outcomes), ""]
    for o in outcomes:
        setup = " && ".join(o.setup) if o.setup else f"none ({o.setup_source or 'not planned'})"
        final = ", ".join(f"{k}={v}" for k, v in o.story_gates.items()) or "-"
        integration = ", ".join(f"{k}={v}" for k, v in o.batch_gates.items()) or "-"
        mark = "GREEN" if o.green else "red (" + "; ".join(o.red) + ")"
        lines.append(
            f"## {o.project} [{o.kind}] {mark}: plan {o.status or '-'}, "
            f"{o.attempts} attempt(s), {o.seconds:.0f} s"
        )
        lines.append(f"   setup (detected): {setup}")
        lines.append(f"   story checks: {final}; integration: {integration}")
        lines.append(f"   runs: {gate_cells(o)}")
        if o.base:
            lines.append(f"   base (run file): {json.dumps(o.base)[:600]}")
        if o.error:
            lines.append(f"   error: {o.error}")
        if o.reason and not o.green:
            lines.append("   reason: " + o.reason.strip().replace("\n", "\n           ")[-1500:])
        if o.feedback:
            lines.append(
                "   gate output (retry feedback, tail): " + o.feedback[-1200:].replace("\n", "\n           ")
            )
        if o.command_not_found:
            lines.append('   !! "command not found" in the output')
    green = [o for o in outcomes if o.green]
    missing = [o.project for o in outcomes if o.command_not_found]
    share = 100 * len(green) / len(outcomes) if outcomes else 0.0
    lines.append("")
    lines.append(
        f"green: {len(green)}/{len(outcomes)} projects ({share:.0f} %; target >= 90 %): "
        + (", ".join(o.project for o in green) or "none")
    )
    lines.append(
        f'"command not found": {len(missing)} project(s) (target: none)'
        + (": " + ", ".join(missing) if missing else "")
    )
    lines.append(f"total {total_seconds:.0f} s")
    return "\n".join(lines)


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


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
