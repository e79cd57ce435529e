"""Remote MCP servers: reached from the bot's process, only at the operator's hosts, with the
headers the config names. The server is the SDK's own, on loopback in this process."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

from bot.config.load import load_repo_config
from bot.config.mcp import McpServer
from bot.config.mcp_policy import McpPolicy
from bot.mcp.http import checked_client
from bot.mcp.tools import open_mcp
from bot.network.rules import parse_egress

VARIABLES = {"PLAN_CASCADE_MCP_DOCS_TOKEN": "docs-s3cret-value"}


@contextlib.asynccontextmanager
async def docs_server(seen: list[dict[str, str]]) -> AsyncIterator[int]:
    """A streamable HTTP MCP server on 127.0.0.1 with `search_docs` and `drop_tables`; its port."""
    server = MCPServer("docs")

    @server.tool()
    def search_docs(query: str) -> str:
        return f"the docs say {query} is in chapter 3"

    @server.tool()
    def drop_tables() -> str:
        return "dropped"

    app = server.streamable_http_app(json_response=True)

    async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    web = uvicorn.Server(uvicorn.Config(recording, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(web.serve())
    while not web.started:
        await asyncio.sleep(0.02)
    try:
        yield web.servers[0].sockets[0].getsockname()[1]
    finally:
        web.should_exit = True
        await task


def remote(url: str) -> dict[str, McpServer]:
    """`agent.mcp_servers` with one remote server, `docs`, as a repository would write it."""
    headers = {"Authorization": "Bearer ${PLAN_CASCADE_MCP_DOCS_TOKEN}"}
    entry = {"url": url, "headers": headers, "tools": ["search_docs"]}
    return load_repo_config(json.dumps({"agent": {"mcp_servers": {"docs": entry}}})).agent.mcp_servers


async def test_an_allowed_remote_server_gets_its_headers_and_offers_its_allowed_tools() -> None:
    seen: list[dict[str, str]] = []
    async with docs_server(seen) as port:
        policy = McpPolicy(egress=(f"127.0.0.1:{port}",), variables=VARIABLES)
        async with open_mcp(
            remote(f"http://127.0.0.1:{port}/mcp"),
            policy=policy,
            place=None,
            call_seconds=10,
            output_limit=5000,
        ) as tools:
            assert [s.name for s in tools.specs] == ["docs__search_docs"] and tools.notes == []
            answer = await tools.call("docs__search_docs", {"query": "retries"})
    assert "the docs say retries is in chapter 3" in answer and "UNTRUSTED DATA" in answer
    assert seen and all(h.get("authorization") == "Bearer docs-s3cret-value" for h in seen)


@pytest.mark.parametrize("listed", ["127.0.0.1:1", "docs.example.com", ""])
async def test_a_remote_server_off_the_operators_list_is_never_reached(listed: str) -> None:
    seen: list[dict[str, str]] = []
    async with docs_server(seen) as port:
        policy = McpPolicy(egress=(listed,) if listed else (), variables=VARIABLES)
        async with open_mcp(
            remote(f"http://127.0.0.1:{port}/mcp"),
            policy=policy,
            place=None,
            call_seconds=10,
            output_limit=5000,
        ) as tools:
            assert tools.specs == []
            (note,) = tools.notes
    assert "is not on the MCP egress list (PLAN_CASCADE_MCP_EGRESS)" in note
    assert seen == []


async def test_a_remote_name_that_resolves_inward_is_refused_without_connecting() -> None:
    async def inward(host: str, port: int) -> list[str]:
        return ["169.254.169.254"]

    client, backend = checked_client(parse_egress(["docs.example.com"]), headers={}, resolve=inward)
    async with client:
        with pytest.raises(httpx2.ConnectError, match="non-public"):
            await client.get("https://docs.example.com/mcp")
    assert backend.refused and "169.254.169.254" in backend.refused[0]


async def test_plain_http_to_a_name_is_refused() -> None:
    policy = McpPolicy(egress=("docs.example.com",), variables=VARIABLES)
    async with open_mcp(
        remote("http://docs.example.com/mcp"), policy=policy, place=None, call_seconds=10, output_limit=5000
    ) as tools:
        (note,) = tools.notes
    assert "plain http" in note
