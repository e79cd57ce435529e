"""Where a GitHub lives, said from its own URLs (`bot.github.urls`), and who the bot's commits
are by (`bot.config.identity`): pure functions."""

from __future__ import annotations

import pytest

from bot.config.identity import LEGACY_EMAIL, commit_identity
from bot.config.repo import AgentConfig
from bot.github.urls import (
    api_url_problem,
    app_page,
    co_author,
    graphql_url,
    is_enterprise_server,
    noreply_email,
    web_url,
)


@pytest.mark.parametrize(
    ("api", "graphql", "web", "enterprise"),
    [
        ("https://api.github.com", "https://api.github.com/graphql", "https://github.com", False),
        (
            "https://ghe.example.com/api/v3/",
            "https://ghe.example.com/api/graphql",
            "https://ghe.example.com",
            True,
        ),
        ("http://127.0.0.1:8080/api/v3", "http://127.0.0.1:8080/api/graphql", "http://127.0.0.1:8080", True),
    ],
)
def test_rest_graphql_and_web_roots(api: str, graphql: str, web: str, enterprise: bool) -> None:
    assert (graphql_url(api), web_url(api), is_enterprise_server(api)) == (graphql, web, enterprise)
    assert api_url_problem(api) is None


def test_an_api_url_of_the_wrong_shape_is_named() -> None:
    assert "https://ghe.example.com/api/v3" in (api_url_problem("https://ghe.example.com") or "")
    assert "https://api.github.com" in (api_url_problem("https://github.com") or "")
    assert "not an http(s) URL" in (api_url_problem("ghe.example.com") or "")


def test_noreply_addresses_and_pages_use_the_servers_host() -> None:
    assert noreply_email(41898282, "github-actions[bot]", "https://github.com") == (
        "41898282+github-actions[bot]@users.noreply.github.com"
    )
    assert noreply_email(7, "plan-cascade[bot]", "https://ghe.example.com") == (
        "7+plan-cascade[bot]@users.noreply.ghe.example.com"
    )
    assert app_page("https://ghe.example.com/", "plan-cascade") == "https://ghe.example.com/apps/plan-cascade"
    assert (
        co_author("maint\n<x>", "1+maint@users.noreply.github.com")
        == "maint x <1+maint@users.noreply.github.com>"
    )


def test_commits_are_the_apps_bot_unless_the_config_names_an_author() -> None:
    app = "7+plan-cascade[bot]@users.noreply.github.com"
    found = commit_identity(
        AgentConfig(), app_name="plan-cascade[bot]", app_email=app, co_authors=("m <a@b>",)
    )
    assert (found.name, found.email, found.co_authors) == ("plan-cascade[bot]", app, ("m <a@b>",))
    chosen = commit_identity(AgentConfig(author_name="Bot", author_email="bot@corp.example"), app_email=app)
    assert (chosen.name, chosen.email) == ("Bot", "bot@corp.example")
    assert commit_identity(AgentConfig()).email == LEGACY_EMAIL  # nothing learned (local mode)
