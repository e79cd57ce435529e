"""Signed webhook deliveries as GitHub sends them, for tests, benchmarks and demos."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from githubkit.webhooks import sign

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "webhooks"


def load_fixture(name: str) -> dict[str, Any]:
    """A payload from tests/fixtures/webhooks, e.g. `issues.labeled.1`."""
    return json.loads((FIXTURES / f"{name}.json").read_text())


def fixture_names() -> list[str]:
    """Every fixture name (without `.json`)."""
    return sorted(p.stem for p in FIXTURES.glob("*.json"))


def event_of(fixture: str) -> str:
    """The X-GitHub-Event of a fixture: the first part of its name."""
    return fixture.split(".", 1)[0]


def signed_headers(body: bytes, *, secret: str, event: str, delivery_id: str | None = None) -> dict[str, str]:
    """The headers of a delivery of `body` signed with `secret`."""
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(secret, body, "sha256"),
        "X-GitHub-Hook-ID": "1",
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/test",
    }


def encode(payload: dict[str, Any]) -> bytes:
    """The body bytes of a payload (GitHub sends compact JSON)."""
    return json.dumps(payload, separators=(",", ":")).encode()
