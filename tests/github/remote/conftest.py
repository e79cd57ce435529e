"""A strict fake GitHub whose repository is a real git remote: refusals that depend on commits
(check runs on unknown commits, pull requests without commits, forks) can be tested."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bot.testing.fake_github import FakeGitHub
from tests.execution_support import make_remote

REPO = "octo/widgets"


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return make_remote(tmp_path, {"README.md": "# widgets\n"})


@pytest.fixture
def fake(remote: Path) -> FakeGitHub:
    fake = FakeGitHub()
    fake.add_repo(REPO, clone_url=f"file://{remote}")
    return fake


@pytest.fixture
async def client(fake: FakeGitHub):
    async with httpx.AsyncClient(transport=fake.transport(), base_url=fake.api_url) as http:
        yield http
