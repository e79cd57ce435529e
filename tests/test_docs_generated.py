"""The generated reference is what the code makes now: docs/settings.md's tables, docs/commands.md's
CLI reference and the published JSON Schema (`python -m bot.cli.docs` writes them)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from bot.cli import main as cli_main
from bot.cli.docs import (
    COMMANDS_PAGE,
    SCHEMA_FILE,
    SETTINGS_PAGE,
    cli_commands,
    expected_files,
    main,
    replace_region,
    setting_names,
    stale_files,
)
from bot.runtime.settings import Settings
from tests.docs_support import ROOT


def test_the_generated_files_are_up_to_date() -> None:
    stale = stale_files()
    assert not stale, (
        f"stale: {[str(p) for p in stale]}: run `python -m bot.cli.docs` and commit what it writes"
    )


def test_the_check_mode_names_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for relative in (SETTINGS_PAGE, COMMANDS_PAGE, SCHEMA_FILE, Path("action/action.yml")):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, tmp_path / relative)
    assert stale_files(tmp_path) == []
    page = tmp_path / SETTINGS_PAGE
    page.write_text(page.read_text().replace("| `PLAN_CASCADE_WORKERS` |", "| `PLAN_CASCADE_WORKERZ` |"))
    assert stale_files(tmp_path) == [SETTINGS_PAGE]
    assert main(["--check"], root=tmp_path) == 1
    assert "docs/settings.md is stale: run `python -m bot.cli.docs`" in capsys.readouterr().err
    assert main([], root=tmp_path) == 0 and stale_files(tmp_path) == []
    # the hand-written text around the regions is kept when it is regenerated
    page.write_text(page.read_text().replace("## Details", "## Details\n\nA note of ours."))
    assert "A note of ours." in expected_files(tmp_path)[SETTINGS_PAGE]


def test_a_page_without_its_markers_is_refused_with_the_lines_to_add() -> None:
    with pytest.raises(SystemExit, match="add the lines"):
        replace_region("no markers", "settings", "x", page=SETTINGS_PAGE)


def test_every_setting_and_alias_has_a_row() -> None:
    text = (ROOT / SETTINGS_PAGE).read_text(encoding="utf-8")
    for field in Settings.model_fields:
        for variable in setting_names(field):
            assert f"| `{variable}`" in text or f" / `{variable}`" in text, variable


def test_every_cli_command_has_a_section() -> None:
    text = (ROOT / COMMANDS_PAGE).read_text(encoding="utf-8")
    names = [name for name, _, _ in cli_commands()]
    assert {"serve", "doctor", "config validate", "config schema", "run", "demo"} <= set(names)
    for name in names:
        assert f"### `plan-cascade {name}`" in text


def test_the_published_schema_is_what_config_schema_prints() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["config", "schema"]) == 0
    assert json.loads(out.getvalue()) == json.loads((ROOT / SCHEMA_FILE).read_text(encoding="utf-8"))
