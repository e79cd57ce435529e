"""What bench/real_projects.py reads off a run and prints: each check run, why a project is not green,
the table and the report."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

GREEN = ("success", "neutral")


# -- one project's outcome ---------------------------------------------------------------
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
    base: dict[str, str] = field(default_factory=dict)
    """The base check: setup's and each gate's conclusion on the unchanged base."""
    base_line: str = ""
    """The plan comment's line for it (`setup ✓, test ✓ (212 passed in 1.0s), …`)."""
    base_setup_output: str = ""
    """The tail of setup's output when it failed on the base (the plan stops there)."""
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
        "on the base",
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
                " ".join(f"{k}={v}" for k, v in o.base.items())
                or " ".join(f"{c.scope}:{c.name}={c.verdict}" for c in others)
                or "-",
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
        if o.base_line:
            lines.append(f"   base: {o.base_line}")
        if o.error:
            lines.append(f"   error: {o.error}")
        if o.base_setup_output:
            tail = o.base_setup_output[-1200:].replace("\n", "\n           ")
            lines.append(f"   base setup output (tail): {tail}")
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
