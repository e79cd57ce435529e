"""`agent.mcp_servers` in `.github/plan-cascade.yml`: what is refused, and where the maintainer reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.load import load_repo_config
from bot.errors import RepoConfigError
from tests.harness import REPO, Harness, labeled


def problems_of(text: str) -> list[str]:
    with pytest.raises(RepoConfigError) as caught:
        load_repo_config(text)
    return caught.value.problems


def servers_yaml(body: str) -> str:
    indented = "\n".join("      " + line for line in body.strip().splitlines())
    return f"agent:\n  mcp_servers:\n    tracker:\n{indented}\n"


def test_a_valid_block_loads() -> None:
    config = load_repo_config(
        servers_yaml(
            """
command: [python3, tools/tracker.py]
env: {TOKEN: "Bearer ${PLAN_CASCADE_MCP_TRACKER_TOKEN}", MODE: ci}
tools: [lookup, search.issues]
read_only: true
egress: [tracker.example.com]
"""
        )
    )
    server = config.agent.mcp_servers["tracker"]
    assert server.local and server.tools == ["lookup", "search.issues"] and server.read_only


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("command: [python3, s.py]", "agent.mcp_servers.tracker.tools: required key is missing"),
        ("command: [python3]\ntools: []", "agent.mcp_servers.tracker.tools: "),
        ("command: [python3]\nurl: https://h.example/mcp\ntools: [a]", "give either `command`"),
        ("tools: [a]", "give either `command`"),
        (
            'command: [python3]\nenv: {T: "${HOME}"}\ntools: [a]',
            "agent.mcp_servers.tracker.env.T: ${HOME} is not",
        ),
        (
            'url: https://h.example/mcp\nheaders: {Authorization: "${GITHUB_TOKEN}"}\ntools: [a]',
            "agent.mcp_servers.tracker.headers.Authorization: ${GITHUB_TOKEN} is not",
        ),
        (
            'command: [python3]\nenv: {T: "${PLAN_CASCADE_MCP_EGRESS}"}\ntools: [a]',
            "env.T: ${PLAN_CASCADE_MCP_EGRESS}",
        ),
        (
            "url: https://h.example/mcp\nenv: {A: b}\ntools: [a]",
            "agent.mcp_servers.tracker.env: only a local",
        ),
        (
            "command: [python3]\nheaders: {A: b}\ntools: [a]",
            "agent.mcp_servers.tracker.headers: only a remote",
        ),
        ("url: ftp://h.example/\ntools: [a]", "agent.mcp_servers.tracker.url: must be an http(s) URL"),
        (
            "command: [python3]\ntools: [a]\ntool: [b]",
            'agent.mcp_servers.tracker.tool: unknown key — did you mean "tools"?',
        ),
        ("command: [python3]\ntools: [a.b, a_b]", 'agent.mcp_servers.tracker.tools[1]: "a_b" is offered as'),
        ("command: [python3]\ntools: [a]\negress: [x.example:99999]", "tracker.egress[0]: port 99999"),
    ],
)
def test_each_problem_names_its_key(body: str, expected: str) -> None:
    problems = problems_of(servers_yaml(body))
    assert any(expected in p for p in problems), problems


def test_a_bad_server_name_is_named() -> None:
    (problem,) = problems_of("agent:\n  mcp_servers:\n    Tracker:\n      command: [x]\n      tools: [a]\n")
    assert problem.startswith("agent.mcp_servers.Tracker: a server name is")


async def test_an_invalid_block_is_reported_on_the_issue_naming_the_key(tmp_path: Path) -> None:
    async with Harness(tmp_path) as h:
        h.fake.add_issue(REPO, title="Use the tracker", body="Please.")
        h.fake.set_permission(REPO, "maint", "maintain")
        config = servers_yaml('command: [python3]\nenv: {T: "${HOME}"}\ntools: [a]')
        h.fake.set_file(REPO, ".github/plan-cascade.yml", config)
        await h.deliver("issues", labeled(number=1, sender="maint"))
        await h.drain()
        assert h.plan_comments(1) == []
        (reply,) = h.comments(1)
        plain = reply.replace("\\", "").replace("`", "")
        assert "agent.mcp_servers.tracker.env.T: ${HOME} is not one of the operator's" in plain
        assert "Nothing was run" in reply


async def test_what_the_operator_refuses_is_reported_on_the_issue(tmp_path: Path) -> None:
    config = servers_yaml('command: [python3]\nenv: {T: "${PLAN_CASCADE_MCP_UNSET}"}\ntools: ["*"]')
    load_repo_config(config)  # valid as a file: only this server's operator refuses it
    async with Harness(tmp_path) as h:
        h.fake.add_issue(REPO, title="Use the tracker", body="Please.")
        h.fake.set_permission(REPO, "maint", "maintain")
        h.fake.set_file(REPO, ".github/plan-cascade.yml", config)
        await h.deliver("issues", labeled(number=1, sender="maint"))
        await h.drain()
        assert h.plan_comments(1) == []
        (reply,) = h.comments(1)
        plain = reply.replace("\\", "").replace("`", "")
        assert "agent.mcp_servers.tracker.tools[0]" in plain and "PLAN_CASCADE_MCP_ALLOW_ALL_TOOLS" in plain
        assert "agent.mcp_servers.tracker.env.T: ${PLAN_CASCADE_MCP_UNSET} is not set" in plain
