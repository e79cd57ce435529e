"""Every command the docs show exists: `plan-cascade …` on the command line (its `--help` runs,
its options are real) and `/plan-cascade …` in comments (the command parser knows it)."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from bot.cli import build_parser
from bot.runtime.commands import COMMANDS, parse_command
from tests.docs_support import ROOT, code, inline_text, name, pages, tokens

_CLI = re.compile(
    r"(?:^|[\s;&|(`])(?:[\w.~-]+/)*plan-cascade((?:[ \t]+(?:\"[^\"]*\"|'[^']*'|[^\s|;&#)`\"']+))*)"
)
_COMMENT = re.compile(r"(?<![\w/.-])/plan-cascade[ \t]+([a-z][a-z-]*)")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def cli_problem(words: list[str]) -> str | None:
    """Why `plan-cascade <words>` is not a command the parser has (None: it is)."""
    parser, path = build_parser(), []
    words = [w for w in words if w not in ("…", "...")]
    if words[:1] == ["--env-file"]:
        words = words[2:]
    while words and _subcommands(parser):
        word = words[0]
        if word not in _subcommands(parser):
            if word.startswith("-") or not re.fullmatch(r"[a-z][a-z-]*", word):
                break  # an option or an argument: `plan-cascade --help`, …
            choices = ", ".join(_subcommands(parser))
            return f"`plan-cascade {' '.join([*path, word])}`: no such command (there are: {choices})"
        parser, path, words = _subcommands(parser)[word], [*path, word], words[1:]
    if _subcommands(parser) and not path:
        return None  # `plan-cascade` alone, or with its own options
    for word in words:
        option = word.split("=", 1)[0].strip("[]")
        if option.startswith("--") and option not in _options(parser):
            return f"`plan-cascade {' '.join(path)}` has no option `{option}`"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*path, "--help"])
    if exit_.value.code != 0:
        return f"`plan-cascade {' '.join(path)} --help` exited {exit_.value.code}"
    return None


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """A shell block's lines with each trailing `\\` continuation joined, and where each starts."""
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for offset, line in enumerate(text.splitlines()):
        if pending is not None:
            start, before = pending
            line, offset = before + " " + line.lstrip(), start
        if line.endswith("\\"):
            pending = (offset, line[:-1].rstrip())
            continue
        pending = None
        lines.append((offset, line))
    if pending is not None:
        lines.append(pending)
    return lines


def _shown_cli_commands(page: Path) -> list[tuple[int, list[str]]]:
    found = []
    for block in code(page):
        if block.info == "mermaid":
            continue
        for offset, line in _logical_lines(block.text):
            if not block.fenced and block.text.strip().startswith("plan-cascade /"):
                continue  # a check run's name: `plan-cascade / STORY-001 / test`
            for match in _CLI.finditer(line):
                words = shlex.split(match.group(1))
                if words and not words[0].startswith("/"):
                    found.append((block.line + offset, words))
    return found


@pytest.mark.parametrize("page", pages(), ids=name)
def test_every_cli_command_shown_exists(page: Path) -> None:
    problems = []
    for line, words in _shown_cli_commands(page):
        problem = cli_problem(words)
        if problem:
            problems.append(
                f"{name(page)}:{line}: {problem}: fix the docs, or add the command to bot/cli "
                "(then run `python -m bot.cli.docs`)"
            )
    assert not problems, "\n".join(problems)


def test_the_cli_check_refuses_what_does_not_exist() -> None:
    assert cli_problem(["config", "validate", "x.yml"]) is None
    assert cli_problem(["run", "--prd", "prd.yaml", "--yes"]) is None
    assert "no such command" in (cli_problem(["deploy"]) or "")
    assert "no such command" in (cli_problem(["config", "lint"]) or "")
    assert "no option `--force`" in (cli_problem(["run", "--force"]) or "")


@pytest.mark.parametrize("page", pages(), ids=name)
def test_every_comment_command_shown_is_one_the_parser_knows(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    unknown = sorted({m.group(1) for m in _COMMENT.finditer(text)} - set(COMMANDS))
    assert not unknown, (
        f"{name(page)} shows `/plan-cascade {unknown[0]}`, which bot/runtime/commands.py does not parse: "
        "fix the docs, or add the command to COMMANDS there"
    )


def _comment_command_rows() -> dict[str, str]:
    """docs/commands.md's table of comment commands: command word → its first cell."""
    stream, rows, in_table = tokens(ROOT / "docs" / "commands.md"), {}, False
    for i, token in enumerate(stream):
        if token.type == "heading_open":
            in_table = inline_text(stream[i + 1]) == "Comment commands"
        if in_table and token.type == "td_open" and stream[i - 1].type == "tr_open":
            cell = inline_text(stream[i + 1])
            match = re.match(r"/plan-cascade (\w+)", cell)
            if match:
                rows[match.group(1)] = cell
    return rows


def test_the_comment_command_table_is_the_parsers() -> None:
    rows = _comment_command_rows()
    missing = sorted(set(COMMANDS) - set(rows))
    extra = sorted(set(rows) - set(COMMANDS))
    assert not missing, f"docs/commands.md's Comment commands table has no row for {missing}: add one each"
    assert not extra, f"docs/commands.md's table lists {extra}, which bot/runtime/commands.py does not parse"


def test_every_complete_comment_example_parses_as_valid() -> None:
    problems = []
    for page in pages():
        for block in code(page):
            text = block.text.strip()
            if block.fenced or not text.startswith("/plan-cascade ") or re.search(r"[<\[…]|\.\.\.", text):
                continue
            command = parse_command(text)
            if command is None or not command.valid:
                reason = command.problem if command else "not a command"
                problems.append(f"{name(page)}:{block.line}: `{text}`: {reason}")
    assert not problems, "\n".join(problems)
