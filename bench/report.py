"""The performance table of docs/benchmarks.md, written from the benches' own output.

    .venv/bin/python bench/report.py --run execution -- --runs 5     # run a bench, record it, rewrite
    .venv/bin/python bench/report.py --from execution=out.json       # record a bench's --json output
    .venv/bin/python bench/report.py                                 # rewrite the table from the records
    .venv/bin/python bench/report.py --check                         # exit 1 when the table is not that

Each bench that prints JSON (`--json PATH`: `bench/execution.py`, `bench/ingest.py`) is recorded
in `bench/figures/<bench>.json` as it printed it, with the package version and the commit
measured; its rows of the table are formatted from those numbers here, never typed. The rows
of benches that print no JSON yet are kept in `bench/figures/transcribed.json` with the date,
machine and command of their last run, as the README had them. The table sits between
`START` and `END` in the page and nothing else of the page is touched.

`tests/test_benchmarks_doc.py` fails when the page's table is not what this renders, and when
a record is older than the code it measures by more than a release (its `version`).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "bench" / "figures"
PAGE = ROOT / "docs" / "benchmarks.md"
START = "<!-- benchmarks table: written by bench/report.py from bench/figures/*.json; do not edit -->"
END = "<!-- end of the benchmarks table -->"
HEADER = (
    "| benchmark (how to run) | figures | baseline, same run | target "
    "| measured (date · machine · command) |\n|---|---|---|---|---|"
)
ORDER = ["execution", "ingest", "github_economy", "transcribed"]
"""Records in the table's order (any other record follows, by name)."""

Row = tuple[str, str, str, str, str]


def package_version() -> str:
    """The version in pyproject.toml (what a record says it measured)."""
    found = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert found, "pyproject.toml has no version"
    return found.group(1)


def releases_behind(recorded: str, current: str) -> int:
    """How many releases `recorded` is behind `current` (major.minor steps; a major step counts 100)."""

    def parts(version: str) -> tuple[int, int]:
        major, minor, *_ = (int(p) for p in [*re.findall(r"\d+", version)[:3], "0", "0"])
        return major, minor

    (rm, rn), (cm, cn) = parts(recorded), parts(current)
    return (cm - rm) * 100 + (cn - rn)


def _measured(record: dict[str, Any]) -> str:
    command = re.sub(r" --json \S+", "", record["command"])  # where it printed to is no part of it
    if command.startswith("bench/"):
        command = f".venv/bin/python {command}"
    return f"{record['date']} · {record['machine']} · `{command}`"


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def execution_rows(record: dict[str, Any]) -> list[Row]:
    """`bench/execution.py --json`: the overhead, and when measured the parallelism and memory."""
    measured = _measured(record)
    over = record["overhead"]
    calls = ", ".join(f"{name} {count:g}" for name, count in over["github_calls"].items()) or "none"
    ratios = ", ".join(f"{r:.2f}" for r in over["ratios"])
    checks = [
        name
        for name, on in (("secret scan", over["secret_scan"]), ("dependency check", over["dependency_check"]))
        if on
    ]
    rows: list[Row] = [
        (
            "`bench/execution.py` overhead — 12 stories in 4 batches, instant agents (one shell script, in "
            "the sandbox), no gates; the server's default checks (" + " and ".join(checks) + " on, "
            "`publishing.commits: auto`); runs alternating, medians",
            f"engine {over['engine_s']:.2f} s, plain script {over['plain_s']:.2f} s: "
            f"**{over['ratio']:.2f}×** (median of {over['runs']}; each run {ratios}); GitHub answering in "
            f"{over['github_ms']:g} ms, its calls a run: {calls}"
            + (
                f"; CPU time {over['cpu_engine_s']:.2f} s vs {over['cpu_plain_s']:.2f} s = "
                f"{over['cpu_engine_s'] / over['cpu_plain_s']:.2f}×"
                if "cpu_engine_s" in over
                else ""
            ),
            "the same work as a plain script: clone, fetch, worktree add, the agent in the same bubblewrap "
            "sandbox, commit, push, worktree remove, the batch merges made in the mirror (as the engine "
            "makes clean ones), same parallelism",
            f"≤ 1.3× ({_met(over['ratio'] <= 1.3)})",
            measured,
        )
    ]
    parallel = record.get("parallel")
    if parallel:
        plain, integration = parallel["plain"], parallel["integration"]
        rows.append(
            (
                "`bench/execution.py` parallelism — 6 stories with 2 s gates, `max_parallel` 3 vs 1, "
                "median of 3",
                f"**{plain['efficiency']:.0%}** ({plain['serial_s']:.1f} s vs {plain['parallel_s']:.1f} s); "
                "with the batch's integration gate (2 s, once, after the merge): "
                f"{integration['serial_s']:.1f} s vs {integration['parallel_s']:.1f} s, "
                f"{integration['efficiency']:.0%} (78 % at best)",
                "`max_parallel: 1`",
                f"≥ 90 % ({_met(plain['efficiency'] >= 0.9)})",
                measured,
            )
        )
    memory = record.get("memory")
    if memory:
        rows.append(
            (
                "`bench/execution.py` memory (server RSS)",
                f"idle **{memory['idle_mb']} MB**; six stories running {memory['busy_mb']} MB",
                "—",
                f"idle < 150 MB ({_met(memory['idle_mb'] < 150)})",
                measured,
            )
        )
    return rows


def ingest_rows(record: dict[str, Any]) -> list[Row]:
    """`bench/ingest.py --json`: the default `serve`'s rate and p99 against the bare endpoint's."""
    servers = record["servers"]
    bare = servers["bare"]
    parts = []
    for name in [n for n in servers if n != "bare"]:
        s = servers[name]
        per_round = ", ".join(f"{r:.1f}×" for r in s["p99_ratios"])
        within = sum(r <= 2 for r in s["p99_ratios"])
        parts.append(
            f"`{name}`: {s['rate']:,.0f} deliveries/s = {s['rate'] / bare['rate']:.0%} of bare, p50 "
            f"{s['p50_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms; p99 per round against that round's bare: "
            f"{per_round} (**{within} of {len(s['p99_ratios'])} within 2×**); lost {s['lost']}, "
            f"duplicated {s['duplicated']}"
        )
    default = servers.get("serve")
    ok = default is not None and sum(r <= 2 for r in default["p99_ratios"]) >= 4
    return [
        (
            "`bench/ingest.py` — `wrk`, concurrency 50, bursts at each endpoint in turn, `issues.labeled` "
            "deliveries over 50 issues (each becomes a job), SQLite: the README's `serve` (workers on), "
            "`serve --no-workers`, a bare FastAPI endpoint",
            f"{record['rounds']} rounds of {record['seconds']} s; " + "; ".join(parts),
            f"bare: {bare['rate']:,.0f} deliveries/s, p50 {bare['p50_ms']:.1f} ms, "
            f"p99 {bare['p99_ms']:.1f} ms",
            f"`serve` p99 ≤ 2× bare in 4 of 5 rounds ({_met(ok)})",
            _measured(record),
        )
    ]


def github_economy_rows(record: dict[str, Any]) -> list[Row]:
    """`bench/github_economy.py --json`: rate-limited requests of a waiting plan and of a run."""
    waiting, plan = record["waiting"], record["plan"]
    return [
        (
            "`bench/github_economy.py` (in-process, fake GitHub answering `If-None-Match` with 304 like "
            "GitHub): a plan awaiting approval for 24 h, polled every simulated minute (a reader's 👍 in "
            "hour 5); a 20-story plan (4 batches of 5) from the label to the last PR",
            f"waiting: **{waiting['requests']}** rate-limited requests ({waiting['polls']} polls queued); "
            f"the plan: **{plan['requests']}**, of which {plan['rules_reads']} read branch rules "
            "(`publishing.commits: auto`)",
            "—",
            f"≤ 10 ({_met(waiting['requests'] <= 10)}); ≤ 250 ({_met(plan['requests'] <= 250)})",
            _measured(record),
        )
    ]


def transcribed_rows(record: dict[str, Any]) -> list[Row]:
    """Rows of benches that print no JSON yet, as last recorded by hand."""
    return [
        (row["benchmark"], row["figures"], row["baseline"], row["target"], _measured(row))
        for row in record["rows"]
    ]


RENDERERS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "execution": execution_rows,
    "ingest": ingest_rows,
    "github_economy": github_economy_rows,
    "transcribed": transcribed_rows,
}


def records(figures: Path = FIGURES) -> dict[str, dict[str, Any]]:
    """Every record in `figures` (bench/figures), by bench, in the table's order."""
    found = {path.stem: json.loads(path.read_text()) for path in figures.glob("*.json")}
    return {name: found[name] for name in sorted(found, key=lambda n: [*ORDER, n].index(n))}


def table(found: dict[str, dict[str, Any]]) -> str:
    """The table of these records, header to last row."""
    rows = [row for name, record in found.items() for row in RENDERERS[name](record)]
    cells = [
        "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |" for row in rows
    ]
    return "\n".join([HEADER, *cells])


def rewrite(page: str, rendered: str) -> str:
    """`page` with the text between the markers replaced by `rendered`."""
    head, start, rest = page.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"the page lacks the table's markers:\n{START}\n{END}")
    return f"{head}{START}\n{rendered}\n{END}{tail}"


def commit() -> str:
    """The commit measured (`-dirty` when the worktree had changes)."""
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=12"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def record(name: str, output: Path, figures: Path = FIGURES) -> None:
    """Keep a bench's JSON output as its record in `figures` (with the version and commit measured)."""
    if name not in RENDERERS:
        raise SystemExit(f"no table rows are made from {name!r}: one of {', '.join(RENDERERS)}")
    data = json.loads(output.read_text())
    data.update(version=package_version(), commit=commit())
    RENDERERS[name](data)  # it must render before it is kept
    figures.mkdir(exist_ok=True)
    (figures / f"{name}.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None, *, page_path: Path = PAGE, figures: Path = FIGURES) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", metavar="BENCH", help="run bench/BENCH.py --json (arguments after --)")
    parser.add_argument("--from", dest="sources", action="append", default=[], metavar="BENCH=PATH")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when the page's table is not the records'"
    )
    args, rest = parser.parse_known_args(argv)
    extra = rest[1:] if rest[:1] == ["--"] else rest
    if args.run:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out.json"
            subprocess.run(
                [sys.executable, str(ROOT / "bench" / f"{args.run}.py"), *extra, "--json", str(out)],
                check=True,
            )
            record(args.run, out, figures)
    for source in args.sources:
        name, _, path = source.partition("=")
        record(name, Path(path), figures)
    page = page_path.read_text()
    updated = rewrite(page, table(records(figures)))
    if args.check:
        if updated != page:
            print(
                f"{page_path.name}'s table is not what {figures.name}/ renders: run bench/report.py",
                file=sys.stderr,
            )
            return 1
        return 0
    page_path.write_text(updated)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
