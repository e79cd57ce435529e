"""What the plan's unchanged base showed when its setup and gates ran there: the base check. Pure.

A story fails a gate only by making it worse than the base: the base check is what "worse"
is measured against. It travels in the plan state (signed with it), so every front door and
every machine that runs a story judges the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

BaseConclusion = Literal["success", "failure", "timed_out"]


class BaseGate(BaseModel):
    """One gate's result on the unchanged base."""

    name: str = Field(description="The gate's name (its check run's last part).")
    command: str = Field(description="The command that ran.")
    conclusion: BaseConclusion = Field(description="How it ended on the base.")
    exit_code: int | None = Field(default=None, description="Its exit status on the base.")
    headline: str = Field(default="", description="One line of the tool's own summary, e.g. `212 passed`.")
    failures: list[str] | None = Field(
        default=None,
        description="Digests of the failures it reported (test ids, errors by file, code and message); "
        "None when its output could not be read that way (then its counts or its whole output are compared).",
    )
    counts: dict[str, int] | None = Field(
        default=None,
        description="The failures its tools' own summaries counted, by tool and label "
        "(`pytest failed`: 2); None when it printed no summary we know.",
    )
    fingerprint: str | None = Field(
        default=None,
        description="Digest of its output without timings, paths and hashes: a story whose run "
        "exits the same way and prints the same is no worse.",
    )


class BaseCheck(BaseModel):
    """Setup and every gate of the plan, run once on the unchanged base before the first story."""

    key: str = Field(description="Digest of the base commit, the setup commands and the gate commands.")
    base_sha: str = Field(description="The commit checked.")
    base_label: str = Field(default="", description="How the comment names the base, e.g. `main`.")
    setup: BaseConclusion | None = Field(default=None, description="Setup's outcome (None: no setup).")
    setup_output: str = Field(default="", description="The tail of setup's output when it failed.")
    setup_exit_code: int | None = Field(
        default=None, description="Setup's exit status when it failed (127: a program was not found)."
    )
    gates: list[BaseGate] = Field(default_factory=list)
    checked_at: datetime | None = None

    def gate(self, name: str) -> BaseGate | None:
        """The base's result of gate `name`, if it ran there."""
        return next((g for g in self.gates if g.name == name), None)

    @property
    def setup_failed(self) -> bool:
        """Setup fails on the base itself: no story can be judged, none should run."""
        return self.setup not in (None, "success")


def describe(base: BaseGate) -> str:
    """`✓ (212 passed)`, `✗ (14 errors)`, `timed out`: one gate on the base, for people."""
    mark = {"success": "✓", "failure": "✗", "timed_out": "⏱ timed out"}[base.conclusion]
    detail = base.headline or (f"exit {base.exit_code}" if base.conclusion == "failure" else "")
    return f"{mark} ({detail})" if detail else mark


def summary_line(check: BaseCheck, *, labelled: bool = True) -> str:
    """The plan comment's line: `checked on main@abc1234: setup ✓, test ✓ (212 passed), …`.

    Without `labelled`, the line starts after the label (`setup ✓, …`), for a caller that
    shows the label itself (as code: `main@abc` is no mention).
    """
    parts = []
    if check.setup is not None:
        parts.append("setup " + ("✓" if check.setup == "success" else f"✗ ({check.setup.replace('_', ' ')})"))
    parts += [f"{g.name} {describe(g)}" for g in check.gates]
    line = ", ".join(parts) or "nothing to run"
    if labelled:
        line = f"checked on {check.base_label or check.base_sha[:7]}: {line}"
    failing = [g.name for g in check.gates if g.conclusion != "success"]
    if check.setup_failed:
        line += " — no story runs until setup passes on the base"
    elif failing:
        line += (
            f" — {', '.join(failing)} already fail{'s' if len(failing) == 1 else ''} there: "
            "stories are held only to failures the base does not have"
        )
    return line
