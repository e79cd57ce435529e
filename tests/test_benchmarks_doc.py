"""docs/benchmarks.md's figures are the benches' own output (`bench/report.py`), never older than
the code they measure by more than a release, each with its date, machine and command."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = load_report()

EXECUTION: dict[str, Any] = {
    "bench": "execution",
    "date": "2026-11-29",
    "machine": "2 cores, 23 GB, Linux 6.18, Python 3.11.7, load 0.4 at the start",
    "command": "bench/execution.py --runs 3",
    "version": "0.1.0",
    "overhead": {
        "engine_s": 1.52,
        "plain_s": 1.25,
        "ratio": 1.216,
        "runs": 3,
        "ratios": [1.2, 1.22, 1.31],
        "secret_scan": True,
        "dependency_check": True,
        "github_ms": 0,
        "github_calls": {"branch rules": 1.0},
    },
}


def test_the_table_is_what_the_recorded_bench_output_renders() -> None:
    page = report.PAGE.read_text()
    assert report.START in page and report.END in page
    assert report.rewrite(page, report.table(report.records())) == page, "run bench/report.py"


def test_every_record_is_at_most_a_release_older_than_the_code() -> None:
    current = report.package_version()
    for name, record in report.records().items():
        behind = report.releases_behind(record["version"], current)
        assert behind <= 1, f"bench/figures/{name}.json measured {record['version']}, the code is {current}"


def test_every_row_says_when_where_and_how_it_was_measured() -> None:
    for name, record in report.records().items():
        for row in report.RENDERERS[name](record):
            date, machine, command = row[4].split(" · ")
            assert len(date) == 10 and date.startswith("20"), (name, row[0][:60])
            assert "core" in machine, (name, row[0][:60])
            assert "bench/" in command, (name, row[0][:60])


def test_a_regression_in_the_output_shows_in_the_row() -> None:
    """The row's figures come from the numbers the bench printed, target verdict included."""
    (row,) = report.execution_rows(EXECUTION)
    assert "**1.22×**" in row[1] and "1.31" in row[1] and "branch rules 1" in row[1]
    assert "secret scan and dependency check on" in row[0]
    assert row[3] == "≤ 1.3× (met)"
    slower = copy.deepcopy(EXECUTION)
    slower["overhead"].update(ratio=1.55, secret_scan=True, dependency_check=False)
    (row,) = report.execution_rows(slower)
    assert row[3] == "≤ 1.3× (**missed**)" and "**1.55×**" in row[1]
    assert "dependency check" not in row[0]


def test_releases_behind() -> None:
    assert report.releases_behind("0.1.0", "0.1.3") == 0
    assert report.releases_behind("0.1.0", "0.2.0") == 1
    assert report.releases_behind("0.1.0", "0.3.0") == 2
    assert report.releases_behind("0.9.0", "1.0.0") > 1


def test_recording_a_run_rewrites_the_table(tmp_path: Path) -> None:
    figures, page = tmp_path / "figures", tmp_path / "benchmarks.md"
    page.write_text(f"# B\n\n{report.START}\nold table\n{report.END}\n\nprose\n")
    paths = {"page_path": page, "figures": figures}
    output = tmp_path / "out.json"
    output.write_text(json.dumps({k: v for k, v in EXECUTION.items() if k != "version"}))
    assert report.main(["--check"], **paths) == 1  # the page is not what the records say
    assert report.main(["--from", f"execution={output}"], **paths) == 0
    written = page.read_text()
    assert "old table" not in written and "**1.22×**" in written and written.endswith("\n\nprose\n")
    kept = json.loads((figures / "execution.json").read_text())
    assert kept["version"] == report.package_version() and kept["commit"]
    assert report.main(["--check"], **paths) == 0
