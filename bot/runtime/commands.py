"""Parsing `/plan-cascade <command>` comments (and `@<app-slug> <command>` mentions). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

COMMANDS = (
    "plan", "approve", "revise", "cancel", "status", "retry", "skip", "fix", "rebase", "ask", "help",
)  # fmt: skip
PREFIX = "/plan-cascade"
_STORY = re.compile(r"^[A-Z][A-Z0-9]*-\d{3}$")
_REVISION = re.compile(r"^[0-9a-f]{7,64}$")


@dataclass(frozen=True)
class Command:
    """One parsed command. `text` is everything after the command word (may span lines)."""

    name: str
    text: str = ""
    batch: int | None = None
    stories: list[str] = field(default_factory=list)
    problem: str | None = None
    revision: str | None = None
    """`approve <hash-prefix>`: the revision the approver means (refused when it is not current)."""

    @property
    def valid(self) -> bool:
        """False for unknown commands and malformed arguments."""
        return self.problem is None and self.name in COMMANDS


def _strip_quotes(body: str) -> list[str]:
    """Lines of the comment that are not quoted replies (`> …`)."""
    return [line for line in body.splitlines() if not line.lstrip().startswith(">")]


def parse_command(body: str | None, *, app_slug: str | None = None) -> Command | None:
    """The command in a comment, or None when the comment is not addressed to the bot.

    The comment must start (after blank lines) with `/plan-cascade` or `@<app-slug>`.
    """
    lines = _strip_quotes(body or "")
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return None
    first = lines[0].strip()
    prefixes = [PREFIX]
    if app_slug:
        prefixes += [f"@{app_slug}", f"@{app_slug}[bot]"]
    used = next(
        (p for p in prefixes if first.lower() == p.lower() or first.lower().startswith(p.lower() + " ")), None
    )
    if used is None:
        return None
    rest = (first[len(used) :].strip() + "\n" + "\n".join(lines[1:])).strip()
    if not rest:
        return Command(name="help")
    word, _, text = rest.partition(" ") if " " in rest.split("\n", 1)[0] else rest.partition("\n")
    name = word.strip().lower()
    text = text.strip()
    if name not in COMMANDS:
        return Command(name="unknown", text=word.strip(), problem=f"unknown command `{word.strip()}`")
    if name == "approve":
        return _parse_approve(text)
    if name in ("retry", "skip"):
        ids = text.split()
        bad = [i for i in ids if not _STORY.match(i)]
        if (not ids and name == "skip") or bad:
            return Command(
                name=name,
                text=text,
                problem=f"`{name}` needs story ids, e.g. `/plan-cascade {name} STORY-002`",
            )
        return Command(name=name, text=text, stories=ids)
    if name == "ask" and not text:
        return Command(
            name=name, problem="`ask` needs a question, e.g. `/plan-cascade ask where are prices computed?`"
        )
    if name in ("revise", "fix") and not text:
        return Command(
            name=name, problem=f"`{name}` needs feedback, e.g. `/plan-cascade {name} split STORY-002`"
        )
    return Command(name=name, text=text)


def _parse_approve(text: str) -> Command:
    words = text.split()
    revision = None
    if words and _REVISION.match(words[0].lower().strip("`")):
        revision, words = words[0].lower().strip("`"), words[1:]
    if not words:
        return Command(name="approve", text=text, revision=revision)
    if words[0].lower() == "batch":
        if len(words) == 2 and words[1].isdigit() and int(words[1]) >= 1:
            return Command(name="approve", text=text, batch=int(words[1]), revision=revision)
        return Command(name="approve", text=text, problem="use `/plan-cascade approve batch N` with a number")
    upper = [w.upper().rstrip(",") for w in words]
    if all(_STORY.match(w) for w in upper):
        return Command(name="approve", text=text, stories=upper, revision=revision)
    return Command(
        name="approve",
        text=text,
        problem="`approve` takes nothing, a revision hash, `batch N`, or story ids such as `STORY-001`",
    )
