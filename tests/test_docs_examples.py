"""Every `.github/plan-cascade.yml` example in the docs passes both `plan-cascade config validate`
and the published JSON Schema, and the PRD example is a valid plan."""

from __future__ import annotations

import contextlib
import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from bot.cli import main
from bot.config.load import SCHEMA_PATH, SCHEMA_URL
from bot.plan import parse_prd
from tests.docs_support import ROOT, code, name, pages

CONFIG_HEADING = ".github/plan-cascade.yml"
EXAMPLE = ROOT / "templates" / "plan-cascade.example.yml"


@cache
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / SCHEMA_PATH).read_text(encoding="utf-8"))
    return loaded


def config_examples() -> list[tuple[str, str]]:
    """(where, text) of every YAML block under a heading naming `.github/plan-cascade.yml`, and the
    example file."""
    found = [(f"{name(EXAMPLE)}", EXAMPLE.read_text(encoding="utf-8"))]
    for page in pages():
        for block in code(page):
            if block.fenced and block.info in ("yaml", "yml") and CONFIG_HEADING in block.heading:
                found.append((f"{name(page)}:{block.line}", block.text))
    return found


def validate_cli(tmp_path: Path, text: str) -> tuple[int, str]:
    """What `plan-cascade config validate FILE` says of `text`: its exit code and output."""
    path = tmp_path / "plan-cascade.yml"
    path.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code_ = main(["--env-file", str(tmp_path / "none.env"), "config", "validate", str(path)])
    return code_, out.getvalue() + err.getvalue()


def schema_errors(text: str) -> list[str]:
    data = yaml.safe_load(text) or {}
    validator = jsonschema.Draft202012Validator(schema())
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator.iter_errors(data)
    ]


def test_there_are_examples_to_check() -> None:
    where = [w for w, _ in config_examples()]
    assert any(w.startswith("docs/mcp.md") for w in where) and any(
        w.startswith("docs/configuration.md") for w in where
    )


@pytest.mark.parametrize(("where", "text"), config_examples(), ids=[w for w, _ in config_examples()])
def test_every_config_example_passes_config_validate_and_the_schema(
    tmp_path: Path, where: str, text: str
) -> None:
    exit_code, said = validate_cli(tmp_path, text)
    assert exit_code == 0, f"{where}: `plan-cascade config validate` refuses this example:\n{said}"
    errors = schema_errors(text)
    assert not errors, (
        f"{where}: {SCHEMA_PATH} refuses this example (regenerate it: `python -m bot.cli.docs`): {errors}"
    )


@pytest.mark.parametrize(
    "text",
    [
        "execution:\n  max_paralel: 3\n",
        "gates:\n  max_retries: two\n",
        "publishing:\n  commits: sometimes\n",
        "nonsense: true\n",
        "agent:\n  mcp_servers:\n    tracker:\n      command: [python3, t.py]\n"
        "      tools: [x]\n      colour: red\n",
    ],
)
def test_config_validate_and_the_schema_refuse_the_same_mistakes(tmp_path: Path, text: str) -> None:
    exit_code, said = validate_cli(tmp_path, text)
    assert exit_code == 1 and "problem" in said
    assert schema_errors(text), f"the schema accepts what `config validate` refuses: {text!r}"


def test_the_example_file_names_the_published_schema() -> None:
    first = EXAMPLE.read_text(encoding="utf-8").splitlines()[0]
    assert first == f"# yaml-language-server: $schema={SCHEMA_URL}"
    assert schema()["$id"] == SCHEMA_URL and SCHEMA_URL.endswith(SCHEMA_PATH)


def test_the_prd_example_is_a_valid_plan() -> None:
    blocks = [b for b in code(ROOT / "docs" / "prd.md") if b.fenced and b.text.startswith("version: 1")]
    assert blocks, "docs/prd.md lost its PRD example"
    for block in blocks:
        prd = parse_prd(block.text)
        assert prd.stories, f"docs/prd.md:{block.line}"
