"""Step outputs and workflow commands, as pure functions over text."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from bot.plan.state import PlanState


def output_block(values: Mapping[str, str], *, delimiter: Callable[[], str] | None = None) -> str:
    """`$GITHUB_OUTPUT` lines; every value uses the heredoc form, so newlines are safe."""
    make = delimiter or (lambda: f"ghadelimiter_{uuid.uuid4().hex}")
    lines = []
    for name, value in values.items():
        mark = make()
        while mark in value:
            mark = make()
        lines.append(f"{name}<<{mark}\n{value}\n{mark}\n")
    return "".join(lines)


def write_outputs(path: Path | None, values: Mapping[str, str]) -> None:
    """Append the outputs to `$GITHUB_OUTPUT` (nothing when run outside Actions)."""
    if path is None or not values:
        return
    with path.open("a", encoding="utf-8") as handle:
        handle.write(output_block(values))


def escape_data(text: str) -> str:
    """Escape a workflow command's message (`%`, CR and LF)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def error_command(message: str) -> str:
    """`::error::<message>`: shown as an annotation on the run."""
    return f"::error::{escape_data(message)}"


def plan_outputs(plans: Mapping[int, PlanState]) -> dict[str, str]:
    """`plan_state` (the status; `issue=status,…` when several plans were touched) and
    `pull_requests` (comma-separated batch PR URLs)."""
    if not plans:
        return {"plan_state": "", "pull_requests": ""}
    if len(plans) == 1:
        state = next(iter(plans.values()))
        status = state.status.value
    else:
        status = ",".join(f"{issue}={s.status.value}" for issue, s in sorted(plans.items()))
    urls = [b.pr_url for _, s in sorted(plans.items()) for b in s.batches if b.pr_url]
    return {"plan_state": status, "pull_requests": ",".join(urls)}
