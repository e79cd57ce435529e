"""The built-in agent's tool arguments as pydantic models, and the `ToolSpec`s built from them.

The models validate what the model sends (a bad call becomes an ``error:`` observation that
names the argument) and their JSON schemas are the tools' input schemas, so the two never
drift apart.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.llm import ToolSpec


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadArgs(_Args):
    """Read a text file of the repository, with line numbers."""

    path: str = Field(description="File path relative to the repository root.")
    offset: int = Field(default=1, ge=1, description="First line to show (1-based).")
    limit: int = Field(default=400, ge=1, le=2000, description="How many lines to show at most.")


class WriteArgs(_Args):
    """Create a file, or overwrite it entirely, with the given content."""

    path: str = Field(description="File path relative to the repository root.")
    content: str = Field(description="The complete new content of the file.")


class EditArgs(_Args):
    """Replace an exact piece of text in a file."""

    path: str = Field(description="File path relative to the repository root.")
    old: str = Field(description="Exact text to replace, whitespace included; must match exactly once.")
    new: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence instead of exactly one.")


class GlobArgs(_Args):
    """List the repository's files whose path matches a glob."""

    pattern: str = Field(
        description="Glob relative to the root: '*' stays in one directory, '**' crosses directories, "
        "a pattern without '/' matches file names at any depth (e.g. 'src/**/*.py', '*.md')."
    )


class GrepArgs(_Args):
    """Search file contents with a Python regular expression."""

    pattern: str = Field(description="Python regular expression searched in each line.")
    path: str = Field(default=".", description="File or directory to search, relative to the root.")
    glob: str | None = Field(default=None, description="Only search files matching this glob, e.g. '*.py'.")


class BashArgs(_Args):
    """Run a shell command in the repository root."""

    command: str = Field(description="A bash command, e.g. 'pytest -q tests/test_x.py'.")


class FinishArgs(_Args):
    """Say that the story is done."""

    summary: str = Field(description="What you changed and how you verified it, in a few sentences.")


_DESCRIPTIONS: dict[str, tuple[type[_Args], str]] = {
    "read": (ReadArgs, "Read a text file with numbered lines (400 lines at a time; use offset for more)."),
    "write": (WriteArgs, "Create a file or replace its whole content. Parent directories are created."),
    "edit": (
        EditArgs,
        "Replace the exact text `old` by `new` in a file. `old` must occur exactly once (copy it "
        "from read, with its indentation) unless replace_all is true. Prefer this to write for changes.",
    ),
    "glob": (GlobArgs, "List repository files matching a glob pattern (.git is never listed)."),
    "grep": (GrepArgs, "Search files for a regular expression; prints `file:line: text` for each match."),
    "bash": (
        BashArgs,
        "Run a bash command in the repository root (fresh shell each time, no network, time-limited). "
        "Use it to run tests, linters and builds. Prints the exit code and the output.",
    ),
    "finish": (
        FinishArgs,
        "Call once the story is done and verified: ends the session. Do not commit; the harness does.",
    ),
}


def _schema(model: type[_Args]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


ARGUMENTS: dict[str, type[_Args]] = {name: model for name, (model, _) in _DESCRIPTIONS.items()}
"""Argument model of each tool, by tool name."""

TOOL_SPECS: list[ToolSpec] = [
    ToolSpec(name=name, description=text, input_schema=_schema(model))
    for name, (model, text) in _DESCRIPTIONS.items()
]
"""The tools offered to the model, in a stable order (they are part of the cached prefix)."""
