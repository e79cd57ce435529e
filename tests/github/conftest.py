"""Fixtures for the GitHub edge: a strict in-process fake GitHub and a port wired to it."""

from __future__ import annotations

import pytest

from bot.github import GitHubKitPort, token_port
from bot.testing.fake_github import FakeGitHub

REPO = "octo/widgets"


@pytest.fixture
def fake() -> FakeGitHub:
    fake = FakeGitHub(strict=True)
    fake.add_repo(REPO, default_branch="trunk", clone_url="https://git.example/octo/widgets.git")
    return fake


@pytest.fixture
def port(fake: FakeGitHub) -> GitHubKitPort:
    return token_port("ghp_test", base_url=fake.api_url, transport=fake.transport(), auto_retry=False)
