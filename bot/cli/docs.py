"""The generated reference: `docs/settings.md`'s tables, `docs/commands.md`'s CLI reference and
`templates/plan-cascade.schema.json`, all made from the code.

`python -m bot.cli.docs` writes them; `python -m bot.cli.docs --check` exits 1 naming each
stale file (tests/test_docs_generated.py runs the check). In a Markdown page only the parts
between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->` are written: the text
around them is kept as people wrote it.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import AliasChoices

from bot.cli import build_parser
from bot.config.load import SCHEMA_PATH, repo_config_json_schema
from bot.runtime import settings as settings_module
from bot.runtime.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_PAGE = Path("docs/settings.md")
COMMANDS_PAGE = Path("docs/commands.md")
SCHEMA_FILE = Path(SCHEMA_PATH)
ACTION_FILE = Path("action/action.yml")
REGENERATE = "python -m bot.cli.docs"


# -- settings -------------------------------------------------------------------------------
def field_docstrings() -> dict[str, str]:
    """Each Settings field's attribute docstring, on one line."""
    tree = ast.parse(inspect.getsource(settings_module))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == Settings.__name__)
    docs: dict[str, str] = {}
    for node, after in zip(cls.body, cls.body[1:], strict=False):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            if isinstance(after.value.value, str):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def setting_names(name: str) -> list[str]:
    """The environment variable names of field `name` (its aliases, first the main one)."""
    alias = Settings.model_fields[name].validation_alias
    if isinstance(alias, str):
        return [alias]
    if isinstance(alias, AliasChoices):
        return [a for a in alias.choices if isinstance(a, str)]
    return [name.upper()]


def all_setting_names() -> set[str]:
    """Every variable the settings model reads."""
    return {alias for name in Settings.model_fields for alias in setting_names(name)}


def action_variables(root: Path = ROOT) -> dict[str, str]:
    """The variables the Action's run step sets: name → the input it comes from."""
    action = yaml.safe_load((root / ACTION_FILE).read_text(encoding="utf-8"))
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "run")
    found = {}
    for variable, value in step["env"].items():
        match = re.search(r"inputs\.(\w+)", str(value))
        if match:
            found[variable] = match.group(1)
    return found


def _default(name: str) -> str:
    field = Settings.model_fields[name]
    value = field.get_default(call_default_factory=True)
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def settings_table(details: set[str]) -> str:
    """The table of every setting; a variable with a `### `NAME`` section links to it."""
    docs = field_docstrings()
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name in Settings.model_fields:
        names = setting_names(name)
        if name not in docs:
            raise SystemExit(
                f"bot/runtime/settings.py: the field `{name}` has no docstring: add a one-line "
                '"""…""" under it (it becomes its row in docs/settings.md)'
            )
        meaning = docs[name]
        more = [n for n in names if n in details]
        if more:
            meaning += f" [More](#{anchor(more[0])})"
        variables = " / ".join(f"`{n}`" for n in names)
        rows.append(f"| {variables} | {_default(name)} | {_cell(meaning)} |")
    return "\n".join(rows)


def action_table(root: Path = ROOT) -> str:
    """The Action's variables: what `plan-cascade action` reads, from the Action's inputs."""
    action = yaml.safe_load((root / ACTION_FILE).read_text(encoding="utf-8"))
    rows = ["| variable | Action input | meaning |", "|---|---|---|"]
    for variable, name in action_variables(root).items():
        description = " ".join(str(action["inputs"][name].get("description", "")).split())
        rows.append(f"| `{variable}` | `{name}` | {_cell(description)} |")
    return "\n".join(rows)


# -- the command line -----------------------------------------------------------------------
def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def cli_commands() -> list[tuple[str, str, argparse.ArgumentParser]]:
    """Every `plan-cascade …` command with its help line, sub-commands included, in order."""
    found = []
    for name, help_text, sub in _subparsers(build_parser()):
        nested = list(_subparsers(sub))
        if nested:
            found += [(f"{name} {child}", h, p) for child, h, p in nested]
        else:
            found.append((name, help_text, sub))
    return found


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        optional = action.nargs in ("?", "*")
        return f"`{action.metavar or action.dest}`" + (" (optional)" if optional else "")
    value = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
    return ", ".join(f"`{option}{value}`" for option in action.option_strings)


def cli_reference() -> str:
    """One section per command: what it does and each argument."""
    parts = [
        "Every command also takes `--env-file PATH` (before the command: settings are read from "
        "this file too; default `.env`) and `--help`."
    ]
    for name, help_text, parser in cli_commands():
        parts.append(f"### `plan-cascade {name}`\n\n{help_text[:1].upper()}{help_text[1:]}.")
        rows = []
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            meaning = action.help or ""
            if action.default not in (None, False, argparse.SUPPRESS) and "default" not in meaning:
                meaning = f"{meaning} (default {action.default})".strip()
            rows.append(f"| {_argument(action)} | {_cell(meaning)} |")
        if rows:
            parts.append("\n".join(["| argument | meaning |", "|---|---|", *rows]))
    return "\n\n".join(parts)


# -- writing ----------------------------------------------------------------------------------
def replace_region(text: str, name: str, body: str, *, page: Path) -> str:
    """`text` with the region `name` holding `body`."""
    start, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
    if start not in text or end not in text:
        raise SystemExit(f"{page}: add the lines `{start}` and `{end}` where the {name} go")
    before, rest = text.split(start, 1)
    _, after = rest.split(end, 1)
    return f"{before}{start}\n{body}\n{end}{after}"


def detail_sections(text: str) -> set[str]:
    """The variables that have a hand-written `### `NAME`` section."""
    return set(re.findall(r"^### `([A-Z][A-Z0-9_<>]+)`", text, flags=re.MULTILINE))


def expected_files(root: Path = ROOT) -> dict[Path, str]:
    """Each generated file's expected text."""
    settings_text = (root / SETTINGS_PAGE).read_text(encoding="utf-8")
    settings_text = replace_region(
        settings_text, "settings", settings_table(detail_sections(settings_text)), page=SETTINGS_PAGE
    )
    settings_text = replace_region(settings_text, "action", action_table(root), page=SETTINGS_PAGE)
    commands_text = (root / COMMANDS_PAGE).read_text(encoding="utf-8")
    commands_text = replace_region(commands_text, "cli", cli_reference(), page=COMMANDS_PAGE)
    return {
        SETTINGS_PAGE: settings_text,
        COMMANDS_PAGE: commands_text,
        SCHEMA_FILE: schema_text(),
    }


def schema_text() -> str:
    """The published JSON Schema of `.github/plan-cascade.yml`, as `plan-cascade config schema` prints it."""
    schema: dict[str, Any] = repo_config_json_schema()
    return json.dumps(schema, indent=2) + "\n"


def stale_files(root: Path = ROOT) -> list[Path]:
    """The generated files whose text is not what the code makes now."""
    stale = []
    for path, text in expected_files(root).items():
        current = (root / path).read_text(encoding="utf-8") if (root / path).is_file() else None
        if current != text:
            stale.append(path)
    return stale


def main(argv: Sequence[str] | None = None, *, root: Path = ROOT) -> int:
    """Write the generated files, or with `--check` name the stale ones and exit 1."""
    parser = argparse.ArgumentParser(
        prog=REGENERATE, description="Write the reference generated from the code."
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(root)
        for path in stale:
            print(f"{path} is stale: run `{REGENERATE}` and commit it", file=sys.stderr)
        return 1 if stale else 0
    for path, text in expected_files(root).items():
        (root / path).write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
