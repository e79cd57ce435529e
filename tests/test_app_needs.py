"""What the App needs is written once (`bot.runtime.app_manifest`): the docs' tables, the manifest,
the routes' events and the self-test all agree with it; the self-test's lines say what to do."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from bot.app.wiring import default_router
from bot.github.models import AppInstallation, HookDelivery
from bot.runtime.app_manifest import EVENTS, PERMISSIONS, events, manifest, missing_permissions, permissions
from bot.runtime.selftest import deliveries_line, grant_lines, toolchain_lines

DOC = Path(__file__).resolve().parents[1] / "docs" / "github-app.md"
ALWAYS_SENT = {"installation", "installation_repositories", "ping"}


def table_after(heading: str) -> list[list[str]]:
    text = DOC.read_text().split(heading, 1)[1]
    rows = []
    for line in text.splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if not set(cells[0]) <= {"-"} and cells[0] not in ("permission", "event"):
            rows.append(cells)
    return rows


def test_the_documented_tables_are_the_code() -> None:
    assert [(r[0], r[1]) for r in table_after("### Repository permissions")] == [
        (n.title, n.access) for n in PERMISSIONS
    ]
    assert [r[0] for r in table_after("### Events")] == [n.title for n in EVENTS]


def test_the_manifest_asks_for_exactly_that() -> None:
    body = manifest(public_url="https://bot.example.com/", name="Cascade")
    assert body["default_permissions"] == permissions() == {n.key: n.access for n in PERMISSIONS}
    assert body["default_events"] == events()
    assert body["hook_attributes"] == {"url": "https://bot.example.com/webhook", "active": True}
    assert body["redirect_url"] == "https://bot.example.com/setup/callback"
    assert body["public"] is False


def test_every_event_the_bot_handles_is_subscribed() -> None:
    handled = {event for event, _ in default_router().routes()}
    assert handled - ALWAYS_SENT <= set(events()), handled - ALWAYS_SENT - set(events())


def test_missing_grants_are_named_with_the_fix() -> None:
    assert missing_permissions({**permissions(), "checks": "read", "statuses": "write"}) == ["Checks (write)"]
    inst = AppInstallation(
        id=5,
        account="acme",
        permissions={k: v for k, v in permissions().items() if k != "actions"},
        events=events()[1:],
    )
    (line,) = grant_lines([inst], settings_url="https://github.com/settings/apps/x/permissions")
    assert line.verdict == "fail"
    assert line.detail == "missing permissions: Actions (write); missing events: Issues"
    assert "https://github.com/settings/apps/x/permissions" in line.fix
    assert grant_lines([], settings_url="u")[0].verdict == "fail"


def delivery(code: int, status: str, minute: int) -> HookDelivery:
    at = datetime(2026, 1, 1, 12, minute, tzinfo=UTC)
    return HookDelivery(
        id=minute, guid=str(minute), delivered_at=at, status=status, status_code=code, event="issues"
    )


def test_deliveries_say_whether_github_reaches_the_server() -> None:
    unreached = deliveries_line([delivery(0, "failed to connect to host", 5)])
    assert unreached.verdict == "fail" and "GitHub cannot reach this server" in unreached.detail
    assert "PLAN_CASCADE_PUBLIC_URL" in unreached.fix
    secret = deliveries_line([delivery(401, "Invalid HTTP Response: 401", 5)])
    assert secret.verdict == "fail" and "webhook secret" in secret.fix
    fine = deliveries_line([delivery(202, "OK", 6), delivery(503, "Invalid HTTP Response: 503", 1)])
    assert fine.verdict == "ok" and "1 older ones failed" in fine.detail
    assert deliveries_line([]).verdict == "warn"


def test_toolchains_with_their_versions(tmp_path: Path) -> None:
    go = tmp_path / "go"
    go.write_text("#!/bin/sh\necho go version go1.23.4 linux/amd64\n")
    go.chmod(0o755)
    lines = {line.name: line for line in toolchain_lines(str(tmp_path))}
    assert lines["go"].verdict == "ok" and lines["go"].detail.startswith("go version go1.23.4")
    assert lines["cargo"].verdict == "warn" and "PLAN_CASCADE_TOOL_PATH" in lines["cargo"].fix
    assert re.search(r"Rust projects cannot be set up", lines["cargo"].detail)
