"""Every `PLAN_CASCADE_*` name the docs mention is one Plan Cascade reads, and every one it reads
is documented in docs/settings.md."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from bot.cli.docs import action_variables, all_setting_names
from bot.config.mcp import SETTINGS as MCP_SETTINGS
from bot.config.mcp import VARIABLE_PREFIX
from tests.docs_support import ROOT, name, pages

_NAME = re.compile(r"PLAN_CASCADE_[A-Z0-9_]*(?:<[A-Z]+>)?")
WORKFLOWS = ROOT / "templates" / "workflows"
SETTINGS_PAGE = ROOT / "docs" / "settings.md"


def workflow_names() -> set[str]:
    """The repository variables and secrets the workflow templates read (`vars.X`, `secrets.X`)."""
    found: set[str] = set()
    for path in WORKFLOWS.glob("*.yml"):
        found |= set(
            re.findall(r"(?:vars|secrets)\.(PLAN_CASCADE_[A-Z0-9_]+)", path.read_text(encoding="utf-8"))
        )
    return found


@cache
def real_names() -> frozenset[str]:
    """Every `PLAN_CASCADE_*` variable Plan Cascade reads by name."""
    every = all_setting_names() | set(action_variables()) | workflow_names()
    return frozenset(n for n in every if n.startswith("PLAN_CASCADE_"))


def is_real(variable: str) -> bool:
    """A name Plan Cascade reads, or one of the MCP servers' `PLAN_CASCADE_MCP_<NAME>` values; a
    name ending in `_` is a prefix (`PLAN_CASCADE_*`, `PLAN_CASCADE_MCP_`), real when one starts so."""
    if variable in real_names():
        return True
    if variable.endswith("_"):
        return any(real.startswith(variable) for real in [*real_names(), VARIABLE_PREFIX])
    return variable.startswith(VARIABLE_PREFIX) and variable not in MCP_SETTINGS


def _documents() -> list[Path]:
    return [*pages(), ROOT / ".env.example"]


@pytest.mark.parametrize("page", _documents(), ids=name)
def test_every_name_the_docs_mention_is_a_real_setting(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    unknown = sorted({m for m in _NAME.findall(text) if not is_real(m)})
    assert not unknown, (
        f"{name(page)} mentions {unknown}, which Plan Cascade does not read: fix the name, or add a field "
        "to bot/runtime/settings.Settings (with a one-line docstring) and run `python -m bot.cli.docs`"
    )


def test_every_real_setting_is_documented() -> None:
    text = SETTINGS_PAGE.read_text(encoding="utf-8")
    every = all_setting_names() | set(action_variables()) | workflow_names()
    missing = sorted(n for n in every if f"`{n}`" not in text)
    assert not missing, (
        f"docs/settings.md does not mention {missing}: run `python -m bot.cli.docs` (settings and the "
        "Action's variables are generated); a workflow template's variable goes in its hand-written "
        "'The Action's variables' section"
    )


def test_the_check_knows_the_patterns() -> None:
    assert is_real("PLAN_CASCADE_MCP_JIRA_TOKEN")
    assert is_real("PLAN_CASCADE_MCP_<NAME>")
    assert is_real("PLAN_CASCADE_SETUP_EGRESS") and is_real("PLAN_CASCADE_GITHUB_TOKEN")
    assert not is_real("PLAN_CASCADE_SETUP_EGRES")
    assert is_real("PLAN_CASCADE_") and is_real("PLAN_CASCADE_MCP_") and not is_real("PLAN_CASCADE_NOPE_")
    assert _NAME.findall("set `PLAN_CASCADE_MCP_<NAME>` or PLAN_CASCADE_WORKERS.") == [
        "PLAN_CASCADE_MCP_<NAME>",
        "PLAN_CASCADE_WORKERS",
    ]
