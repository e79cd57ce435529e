"""What a finished gate reports: check-run name, conclusion and output, and retry feedback.

Everything here is pure: it turns a :class:`GateResult` into the dicts the GitHub
layer sends and the text the agent's next attempt reads, within GitHub's limits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from bot.gates.annotations import Annotation, strip_ansi
from bot.plan.blocked import BlockedRequest, blocked_total

SUMMARY_LIMIT = 65535
TEXT_LIMIT = 65535
ANNOTATIONS_PER_REQUEST = 50
SUMMARY_TAIL_CHARS = 4000
"""How much of the output the summary shows; `text` holds up to TEXT_LIMIT of it."""
MAX_ANNOTATIONS = 500
"""Annotations sent per check run at most (10 requests), to spare the secondary rate limit."""
CHECK_RUN_PREFIX = "plan-cascade"

Conclusion = Literal["success", "failure", "timed_out", "neutral"]
Verdict = Literal["success", "failure", "neutral"]

_LINE_SEEK = 200
_FALLBACK_CHARS = str.maketrans({"`": "ˋ", "~": "˜"})


class GateResult(BaseModel):
    """The outcome of running one gate's command once."""

    name: str = Field(description="Gate name, e.g. test or a custom gate's name.")
    command: str = Field(description="The shell command that ran.")
    exit_code: int | None = Field(description="Exit status; None when the process was killed or never ran.")
    timed_out: bool = Field(default=False, description="Whether the command was stopped at its time limit.")
    output: str = Field(default="", description="Combined stdout and stderr, as captured.")
    duration_s: float = Field(ge=0, description="Wall-clock duration in seconds.")
    attempt: int = Field(
        default=1, ge=1, description="Which attempt of the story this run belongs to, from 1."
    )
    judged: Verdict | None = Field(
        default=None, description="The verdict against the plan's base (None: judged on its exit alone)."
    )
    judgement: str | None = Field(default=None, description="Why, in one line, when judged against the base.")
    blocked: list[BlockedRequest] = Field(
        default_factory=list,
        description="Network requests the egress proxy refused: setup's own; on a story's gate, its "
        "agent's and setup's so far (shown on the check run).",
    )

    @property
    def exited_ok(self) -> bool:
        """True when the command exited 0 within its time limit."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def passed(self) -> bool:
        """True when the gate does not hold the change back: it exited 0, or it is no worse than the base."""
        return self.exited_ok if self.judged is None else self.judged != "failure"


def conclusion(result: GateResult) -> Conclusion:
    """The check run's conclusion for `result`."""
    if result.judged is not None:
        return result.judged
    if result.timed_out:
        return "timed_out"
    return "success" if result.passed else "failure"


def check_run_name(scope: str, gate: str) -> str:
    """`plan-cascade / <scope> / <gate>`, the scope being a story id or a batch label."""
    return f"{CHECK_RUN_PREFIX} / {scope} / {gate}"


def _exit_status(result: GateResult) -> str:
    return f"exit {result.exit_code}" if result.exit_code is not None else "no exit code"


def check_title(result: GateResult) -> str:
    """One line: `test passed in 3.2 s`, `test failed (exit 2) on attempt 2`, `test timed out after 900 s`."""
    if result.judged == "neutral":
        title = f"{result.name}: no worse than the base"
    elif result.timed_out:
        title = f"{result.name} timed out after {result.duration_s:.0f} s"
    elif result.passed:
        title = f"{result.name} passed in {result.duration_s:.1f} s"
    else:
        title = f"{result.name} failed ({_exit_status(result)})"
    if result.attempt > 1 and not result.passed:
        title += f" on attempt {result.attempt}"
    return title if len(title) <= 255 else title[:254] + "…"


def _longest_run(text: str, char: str) -> int:
    return max((len(run) for run in re.findall(f"{re.escape(char)}+", text)), default=0)


def _tail(text: str, room: int) -> str:
    """The last `room` characters, starting at a line boundary when one is near."""
    if len(text) <= room:
        return text
    tail = text[-room:] if room > 0 else ""
    newline = tail.find("\n", 0, _LINE_SEEK)
    return tail[newline + 1 :] if newline != -1 else tail


def fenced_tail(output: str, *, budget: int) -> str:
    """The end of `output` in a Markdown code block of at most `budget` characters.

    The fence is longer than any run of its character in the block, so the output
    cannot close it; a note says when the output was trimmed.
    """
    text = strip_ansi(output).rstrip()
    if not text:
        return "(no output)" if budget >= len("(no output)") else ""
    note_room = len(f"(output trimmed to the last {len(text)} characters)\n")
    for char in "`~":
        fence_len = 3
        for _ in range(3):
            room = budget - 2 * fence_len - 2
            if len(text) > room:
                room -= note_room
            if room <= 0:
                break
            tail = _tail(text, room)
            need = max(3, _longest_run(tail, char) + 1)
            if need <= fence_len:
                fence = char * fence_len
                note = f"(output trimmed to the last {len(tail)} characters)\n" if tail != text else ""
                return f"{note}{fence}\n{tail}\n{fence}"
            fence_len = need
    # Only output with huge runs of both backticks and tildes gets here.
    translated = text.translate(_FALLBACK_CHARS)
    return fenced_tail(translated, budget=budget) if translated != text else ""


def _inline_code(text: str) -> str:
    """`text` as Markdown inline code, whatever backticks it holds."""
    text = " ".join(text.split())
    ticks = "`" * (_longest_run(text, "`") + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _annotations_note(count: int) -> str:
    return f" (the first {MAX_ANNOTATIONS} are shown)" if count > MAX_ANNOTATIONS else ""


def check_output(
    result: GateResult, *, story_title: str | None = None, annotations: Sequence[Annotation] = ()
) -> dict[str, str]:
    """The check run's `output` (title, summary, text) without annotations, within GitHub's limits."""
    lines = []
    if story_title:
        lines += [f"**Story:** {' '.join(story_title.split())[:300]}", ""]
    exit_code = "none" if result.exit_code is None else str(result.exit_code)
    if result.timed_out:
        exit_code += " (timed out)"
    lines += [
        f"- **Command:** {_inline_code(result.command[:2000])}",
        f"- **Exit code:** {exit_code}",
        f"- **Duration:** {result.duration_s:.1f} s",
        f"- **Attempt:** {result.attempt}",
        f"- **Annotations:** {len(annotations)}" + _annotations_note(len(annotations)),
        *([f"- **Against the base:** {result.judgement}"] if result.judgement else []),
        "",
        *([blocked_section(result.blocked)] if result.blocked else []),
        "### Output",
        "",
    ]
    header = "\n".join(lines) + "\n"
    budget = min(SUMMARY_TAIL_CHARS, SUMMARY_LIMIT - len(header))
    summary = header + fenced_tail(result.output, budget=budget)
    text_header = "### Full output\n\n"
    text = text_header + fenced_tail(result.output, budget=TEXT_LIMIT - len(text_header))
    return {"title": check_title(result), "summary": summary, "text": text}


def blocked_section(blocked: Sequence[BlockedRequest]) -> str:
    """The note on a check run of what the egress proxy refused, with what would allow each."""
    lines = [
        f"### Network: {blocked_total(blocked)} request(s) blocked",
        "",
        "The egress proxy refused these; the story went on without them.",
        "",
        "| Whose | Destination | Times | Allowed by |",
        "|---|---|---|---|",
    ]
    for entry in blocked:
        lines.append(f"| {entry.by} | {_inline_code(entry.target)} | {entry.count} | {entry.allow} |")
    return "\n".join(lines) + "\n"


def annotation_batches(
    annotations: Sequence[Annotation], *, limit: int = MAX_ANNOTATIONS
) -> list[list[dict[str, Any]]]:
    """The first `limit` annotations as GitHub dicts in chunks of ANNOTATIONS_PER_REQUEST.

    The first chunk goes with the update that completes the check run, the others in
    follow-up updates.
    """
    dicts = [annotation.as_github() for annotation in annotations[:limit]]
    return [dicts[i : i + ANNOTATIONS_PER_REQUEST] for i in range(0, len(dicts), ANNOTATIONS_PER_REQUEST)]


def _gate_heading(result: GateResult) -> str:
    if result.timed_out:
        status = f"timed out after {result.duration_s:.0f} s"
    else:
        status = (
            "failed ("
            + (f"exit {result.exit_code}" if result.exit_code is not None else "no exit code")
            + ")"
        )
    judged = f"Against the base: {result.judgement}\n" if result.judgement else ""
    return f"### Gate {_inline_code(result.name)} {status}\nCommand: {_inline_code(result.command)}\n{judged}"


def failure_feedback(results: Sequence[GateResult], *, limit_chars: int = 12000) -> str:
    """Text for the agent's next prompt: each failed gate, its command and its output's tail.

    Output room is shared fairly: short outputs are shown whole and leave the rest to
    the long ones. Returns an empty string when every gate passed.
    """
    failed = [result for result in results if not result.passed]
    if not failed:
        return ""
    intro = f"{len(failed)} quality gate(s) failed. Fix the causes below; do not weaken the checks.\n\n"
    headings = [_gate_heading(result) for result in failed]
    room = limit_chars - len(intro) - sum(len(h) + 2 for h in headings)
    needs = [len(fenced_tail(result.output, budget=limit_chars)) for result in failed]
    shares = [0] * len(failed)
    for position, index in enumerate(sorted(range(len(failed)), key=lambda i: needs[i])):
        shares[index] = max(0, min(needs[index], room // (len(failed) - position)))
        room -= shares[index]
    parts = [
        heading + fenced_tail(result.output, budget=share)
        for heading, result, share in zip(headings, failed, shares, strict=True)
    ]
    return (intro + "\n\n".join(parts))[:limit_chars]


def gate_external_id(issue: int, scope: str, gate: str, attempt: int) -> str:
    """What a gate's check run carries to find its way back: `<issue>:<scope>:<gate>:<attempt>`."""
    return f"{issue}:{scope}:{gate}:{attempt}"
