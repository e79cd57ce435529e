"""The agents' egress list and proxy (issue 39, item 1), without a sandbox: the test is the agent.

The operator's list (`PLAN_CASCADE_AGENT_EGRESS`, by default the model APIs the server has keys
for and the public registries) may be narrowed by a repository (`agent.egress`), never widened;
the agent's proxy passes a model call's body over plain http and nothing after it; what it
refuses is counted per destination, bounded and shaped, for the story's report. Names here are
resolved by the test's own table; the "model API" is a loopback server. Nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.network.proxy import EgressProxy
from bot.network.proxy_log import MALFORMED, BlockedLog
from bot.network.rules import DEFAULT_SETUP_EGRESS, Allowlist, decide, parse_egress
from bot.plan.blocked import MAX_BLOCKED, BlockedRequest, blocked_requests, merge_blocked
from tests.support import make_settings
from tests.test_setup_egress import resolver
from tests.test_setup_egress_limits import Upstream, client, until, upstream  # noqa: F401

NAMES = {"api.model.test": ["127.0.0.1"], "registry.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}


def agent_rules(port: int, *, narrowed: str | None) -> Allowlist:
    operator = f"api.model.test:{port}, registry.test:{port}, 127.0.0.1:{port}"
    return Allowlist(
        parse_egress(operator),
        narrowed=None if narrowed is None else parse_egress(narrowed),
        who="agent",
        setting="PLAN_CASCADE_AGENT_EGRESS",
    )


async def status_of(path: Path, head: str) -> bytes:
    reader, writer = await client(path, head)
    line = await asyncio.wait_for(reader.readline(), 20)
    writer.close()
    return line


async def test_a_repository_narrows_the_operators_list_and_never_widens_it(
    upstream: Upstream,  # noqa: F811
    tmp_path: Path,
) -> None:
    port = upstream.port
    rules = agent_rules(port, narrowed=f"api.model.test:{port}, other.test:{port}")
    counted: list[int] = []
    proxy = EgressProxy(
        tmp_path / "proxy.sock", rules, resolve=resolver(NAMES), on_blocked=lambda: counted.append(1)
    )
    async with proxy:
        sock = tmp_path / "proxy.sock"
        assert (await status_of(sock, f"CONNECT api.model.test:{port} HTTP/1.1\r\n\r\n")).startswith(
            b"HTTP/1.1 200"
        )
        for host in ("registry.test", "other.test", "127.0.0.1", "other.test"):
            line = await status_of(sock, f"CONNECT {host}:{port} HTTP/1.1\r\n\r\n")
            assert line.startswith(b"HTTP/1.1 403"), (host, line)
        refused = {(r.host, r.reason): r.count for r in proxy.blocked.entries()}
    # Narrowed away by the repository: on the operator's list, not on `agent.egress`.
    assert refused[("registry.test", "narrowed")] == 1 and refused[("127.0.0.1", "narrowed")] == 1
    # Listed by the repository alone: still refused, and the operator's setting is what allows it.
    assert refused[("other.test", "unlisted")] == 2
    assert len(counted) == 4 == proxy.blocked.total
    [entry] = [b for b in blocked_requests(proxy.blocked.entries(), by="agent") if b.host == "other.test"]
    assert "PLAN_CASCADE_AGENT_EGRESS" in entry.allow
    [narrow] = [b for b in blocked_requests(proxy.blocked.entries(), by="agent") if b.host == "registry.test"]
    assert "agent.egress" in narrow.allow


async def test_an_inward_name_needs_the_operators_address_whatever_the_repository_lists() -> None:
    resolve = resolver({"mirror.corp": ["10.0.0.7"], "api.model.test": ["203.0.113.9"]})
    bare = Allowlist(
        parse_egress("mirror.corp, api.model.test"), narrowed=parse_egress("mirror.corp, 10.0.0.7")
    )
    address, reason, _ = await decide("mirror.corp", 443, bare, resolve=resolve)
    assert (address, reason) == (None, "inward")
    listed = Allowlist(parse_egress("mirror.corp, 10.0.0.7:443"), narrowed=parse_egress("mirror.corp"))
    assert (await decide("mirror.corp", 443, listed, resolve=resolve))[:2] == ("10.0.0.7", None)
    assert (await decide("10.0.0.7", 443, listed, resolve=resolve))[1] == "narrowed"
    assert (await decide("api.model.test", 443, listed, resolve=resolve))[1] == "unlisted"
    gone = Allowlist(parse_egress("nowhere.test"))
    assert (await decide("nowhere.test", 443, gone, resolve=resolve))[1] == "unresolved"
    assert (await decide("api.model.test", 443, Allowlist(parse_egress("api.model.test"), narrowed=())))[
        1
    ] == "narrowed", "`agent.egress: []` allows nothing"


async def test_an_agents_model_call_over_plain_http_carries_its_body_and_nothing_after_it(
    upstream: Upstream,  # noqa: F811
    tmp_path: Path,
) -> None:
    port, sock = upstream.port, tmp_path / "proxy.sock"
    async with EgressProxy(sock, agent_rules(port, narrowed=None), bodies=True):
        body = b'{"model": "m", "messages": []}'
        smuggled = f"GET http://127.0.0.1:{port}/second HTTP/1.1\r\nHost: evil.test\r\n\r\n"
        head = (
            f"POST http://127.0.0.1:{port}/v1/messages HTTP/1.1\r\nHost: evil.test\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        reader, writer = await client(sock, head)
        writer.write(body + smuggled.encode())
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 20)
        writer.close()
        assert answer.endswith(b"ok")
        await until(lambda: len(upstream.heads) >= 2, "the body arrived")
        chunked = f"POST http://127.0.0.1:{port}/v1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        assert (await status_of(sock, chunked)).startswith(b"HTTP/1.1 400")
        twice = f"POST http://127.0.0.1:{port}/v1 HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
        assert (await status_of(sock, twice)).startswith(b"HTTP/1.1 400")
    first = upstream.heads[0].decode()
    assert first.startswith("POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:")
    assert f"Content-Length: {len(body)}" in first and "evil.test" not in first
    assert b"".join(upstream.heads[1:]) == body, "the body, and not the request sent after it"


async def test_setups_proxy_still_sends_no_body(upstream: Upstream, tmp_path: Path) -> None:  # noqa: F811
    sock = tmp_path / "proxy.sock"
    async with EgressProxy(sock, parse_egress(f"127.0.0.1:{upstream.port}")):
        post = f"POST http://127.0.0.1:{upstream.port}/x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
        assert (await status_of(sock, post)).startswith(b"HTTP/1.1 400")
    assert upstream.heads == []


# -- what is recorded, and how much ------------------------------------------------------------
def test_the_log_shapes_hosts_and_stays_bounded() -> None:
    log = BlockedLog(limit=3)
    for host in ("a.test", "b.test", "a.test", "evil|`host`<img>", "c.test", "d.test", "e.test"):
        log.record(host, 443, "unlisted")
    entries = {(r.host, r.port): r.count for r in log.entries()}
    assert entries == {("a.test", 443): 2, ("b.test", 443): 1, (MALFORMED, 443): 1, ("*", 0): 3}
    assert log.total == 7


def test_a_storys_list_adds_up_and_keeps_the_most_frequent() -> None:
    def entry(host: str, count: int, by: str = "agent") -> BlockedRequest:
        return BlockedRequest(host=host, port=443, count=count, by=by, reason="unlisted")  # type: ignore[arg-type]

    merged = merge_blocked([entry("a.test", 2)], [entry("a.test", 3), entry("b.test", 1, "setup")])
    assert [(b.host, b.count, b.by) for b in merged] == [("a.test", 5, "agent"), ("b.test", 1, "setup")]
    many = [entry(f"h{i}.test", i + 1) for i in range(MAX_BLOCKED + 5)]
    capped = merge_blocked([], many)
    assert len(capped) == MAX_BLOCKED + 1 and capped[0].host == f"h{MAX_BLOCKED + 4}.test"
    assert (
        capped[-1].host == "*" and capped[-1].count == sum(range(1, 6)) and capped[-1].target == "other hosts"
    )
    assert merge_blocked(capped, [entry("zz.test", 1)])[-1].count == sum(range(1, 6)) + 1


# -- the operator's setting --------------------------------------------------------------------
def test_the_default_list_is_the_configured_model_apis_and_the_registries(tmp_path: Path) -> None:
    def egress(environ: dict[str, str] | None = None, **settings: str) -> tuple[str, ...]:
        return make_settings(tmp_path, **settings).sandbox_policy(environ=environ or {}).agent_egress

    assert egress() == ("api.anthropic.com", *DEFAULT_SETUP_EGRESS)
    handed = egress({"OPENAI_API_KEY": "k", "ANTHROPIC_BASE_URL": "https://gw.corp:8443/anthropic"},
                    PLAN_CASCADE_AGENT_ENV="OPENAI_API_KEY, ANTHROPIC_BASE_URL")  # fmt: skip
    assert handed[:3] == ("api.anthropic.com", "api.openai.com", "gw.corp:8443")
    ollama = egress(PLAN_CASCADE_LLM_PROVIDER="ollama")
    assert ollama[:3] == ("localhost:11434", "127.0.0.1:11434", "[::1]:11434"), "that port of loopback alone"
    served = egress(
        PLAN_CASCADE_LLM_PROVIDER="openai-compatible", PLAN_CASCADE_LLM_BASE_URL="http://10.0.0.5:8000/v1"
    )
    assert served[0] == "10.0.0.5:8000" and "api.openai.com" not in served
    assert "github.com" not in egress() and "pypi.org" in egress()
    assert egress(PLAN_CASCADE_AGENT_EGRESS="api.anthropic.com, pypi.org:443") == (
        "api.anthropic.com",
        "pypi.org:443",
    )
    assert egress(PLAN_CASCADE_AGENT_EGRESS="none") == ()
    with pytest.raises(ValueError, match="PLAN_CASCADE_AGENT_EGRESS"):
        make_settings(tmp_path, PLAN_CASCADE_AGENT_EGRESS="https://api.anthropic.com/v1")
