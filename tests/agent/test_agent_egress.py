"""External agents go out only through the bot's egress proxy (issue 39, item 1).

An external CLI agent holds a model key and reads hostile text (a README, a fixture, an issue):
a prompt injection could make it send the key or the code anywhere. Here a test script stands in
for Claude Code or Codex, in the real sandbox (bubblewrap): it reaches its "model API" (a
loopback server the operator's list names by its exact address and port) through the proxy,
over plain http with a body and through a `CONNECT` tunnel as https would, and nothing else:
not another host, not the server's loopback, not a private address, not directly. What the proxy
refused comes back per destination, with how often. Nothing here leaves the machine: the script
asks for outside hosts only once it goes out through the proxy, which refuses them by the list
before any lookup.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bot.agent import CommandAgent, load_transcript
from bot.network import netns
from bot.plan.blocked import BlockedRequest
from bot.sandbox.confinement import Sandbox
from tests.agent.agent_builders import MakeTask
from tests.support import bwrap_marker


class ModelServer:
    """A loopback stand-in for a model's API (or, unlisted, for the server's own service): it
    answers every request and records what it got."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bytes]] = []
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                seen.append((self.command, self.path, body))
                reply = json.dumps({"echo": body.decode(), "path": self.path}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def servers() -> Iterator[tuple[ModelServer, ModelServer]]:
    """(the model API the operator allows, the server's own loopback service)."""
    model, service = ModelServer(), ModelServer()
    try:
        yield model, service
    finally:
        model.close()
        service.close()


AGENT = """\
import json, os, socket, sys, urllib.request as u

def say(name, call):
    try:
        print(name, call())
    except Exception as exc:
        print(name + "-REFUSED", type(exc).__name__, exc)

MODEL, SERVICE = {model}, {service}
say("DIRECT", lambda: socket.create_connection(("127.0.0.1", SERVICE), 5) and "connected")
say("LOOPBACK", lambda: u.urlopen(f"http://127.0.0.1:{{SERVICE}}/metrics", timeout=10).read())
if not os.environ.get("HTTPS_PROXY"):
    sys.exit(print("NO-PROXY"))  # the host's network: ask for nothing outside

def model_call():
    request = u.Request(f"http://127.0.0.1:{{MODEL}}/v1/messages", data=b'{{"prompt": "plain"}}')
    return json.load(u.urlopen(request, timeout=10))["echo"]

def tunnel():  # what an https client does: CONNECT, then its bytes through the tunnel
    proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)
    s = socket.create_connection((proxy[0].split("//")[1], int(proxy[1])), 10)
    s.sendall(f"CONNECT 127.0.0.1:{{MODEL}} HTTP/1.1\\r\\n\\r\\n".encode())
    head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    body = b'{{"prompt": "tunnel"}}'
    s.sendall(b"POST /v1/messages HTTP/1.1\\r\\nHost: api\\r\\nConnection: close\\r\\n"
              + b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return json.loads(data.split(b"\\r\\n\\r\\n", 1)[1])["echo"]

say("MODEL", model_call)
say("TUNNEL", tunnel)
say("PRIVATE", lambda: u.urlopen("http://10.0.0.1/", timeout=10).read())
say("METADATA", lambda: u.urlopen("http://169.254.169.254/latest/meta-data/", timeout=10).read())
for _ in range(2):
    say("ELSEWHERE", lambda: u.urlopen("https://elsewhere.example/", timeout=10).read())
"""


def agent_script(tmp_path: Path, *, model: int, service: int) -> Path:
    code = tmp_path / "agent.py"
    code.write_text(AGENT.format(model=model, service=service))
    path = tmp_path / "agent.sh"
    path.write_text(f"#!/bin/sh\nexec python3 {code}\n")
    path.chmod(0o755)
    return path


@pytest.fixture(params=["listening in the sandbox", "through a forwarder"])
def way_in(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the agent reaches the proxy: its socket made in the sandbox's own network namespace
    (a root server), or a forwarder in the sandbox relaying to its Unix socket (any other)."""
    if request.param == "through a forwarder":
        monkeypatch.setattr(netns, "available", lambda: False)
    elif not netns.available():
        pytest.skip("this server may not enter its sandboxes' network namespaces")
    return str(request.param)


@bwrap_marker()
async def test_an_external_agent_reaches_its_model_through_the_proxy_and_nothing_else(
    make_task: MakeTask, tmp_path: Path, way_in: str
) -> None:
    with servers() as (model, service):
        script = agent_script(tmp_path, model=model.port, service=service.port)
        sandbox = Sandbox(agent_egress=(f"127.0.0.1:{model.port}",))
        result = await CommandAgent("cli", str(script), binary=None).run(make_task(sandbox=sandbox))
    out = result.summary
    assert result.status == "finished", result.reason
    assert 'MODEL {"prompt": "plain"}' in out, out
    assert 'TUNNEL {"prompt": "tunnel"}' in out, out
    for name in ("DIRECT", "LOOPBACK", "PRIVATE", "METADATA", "ELSEWHERE"):
        assert f"{name}-REFUSED" in out, out
    assert "connected" not in out and "NO-PROXY" not in out
    assert [(m, p) for m, p, _ in model.seen] == [("POST", "/v1/messages")] * 2, "both calls arrived"
    assert service.seen == [], "the server's loopback service saw nothing"
    got = {(b.host, b.port): b for b in result.blocked}
    assert got[("elsewhere.example", 443)] == BlockedRequest(
        host="elsewhere.example", port=443, count=2, by="agent", reason="unlisted"
    )
    assert got[("127.0.0.1", service.port)].count == 1
    assert got[("10.0.0.1", 80)].count == 1 and got[("169.254.169.254", 80)].count == 1
    records = load_transcript(tmp_path / "transcripts" / "STORY-001.jsonl")
    [noted] = [r for r in records if r["type"] == "blocked"]
    assert {(b["host"], b["count"]) for b in noted["requests"]} >= {("elsewhere.example", 2)}


@bwrap_marker()
async def test_without_agent_network_there_is_no_proxy_and_no_way_out(
    make_task: MakeTask, tmp_path: Path
) -> None:
    with servers() as (model, service):
        script = agent_script(tmp_path, model=model.port, service=service.port)
        sandbox = Sandbox(agent_network=False, agent_egress=(f"127.0.0.1:{model.port}",))
        result = await CommandAgent("cli", str(script), binary=None).run(make_task(sandbox=sandbox))
    assert "DIRECT-REFUSED" in result.summary and "LOOPBACK-REFUSED" in result.summary
    assert "NO-PROXY" in result.summary, "no proxy variables: nothing to go out through"
    assert model.seen == [] and service.seen == [] and result.blocked == []


@bwrap_marker()
async def test_as_root_nothing_of_ours_runs_in_the_agents_sandbox(
    make_task: MakeTask, tmp_path: Path
) -> None:
    """The proxy listens in the sandbox's network namespace itself: the agent's command is the
    only thing the sandbox runs (no forwarder, no shell line in front of it)."""
    if not netns.available():
        pytest.skip("this server may not enter its sandboxes' network namespaces")
    script = tmp_path / "agent.sh"
    script.write_text(
        "#!/bin/sh\nfor p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done\n"
        'echo "PROXY $HTTPS_PROXY"\n'
    )
    script.chmod(0o755)
    sandbox = Sandbox(agent_egress=("api.example.com",))
    result = await CommandAgent("cli", str(script), binary=None).run(make_task(sandbox=sandbox))
    assert result.status == "finished", result.reason
    assert "PROXY http://127.0.0.1:3128" in result.summary
    assert "perl" not in result.summary and "python3" not in result.summary, result.summary


@bwrap_marker()
async def test_the_forwarder_starts_whatever_python_variables_the_agent_is_given(
    make_task: MakeTask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forwarder runs before the agent's command, with the agent's environment: a `PYTHONPATH`
    there (setup's, the operator's) whose modules shadow the standard library's, or a site whose
    start-up code fails, must not keep it from starting (it starts isolated, `-I -S`), and the
    agent still reaches its model through it (a server that is not root)."""
    monkeypatch.setattr(netns, "available", lambda: False)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    for name in ("socket", "threading", "sitecustomize", "usercustomize"):
        (shadow / f"{name}.py").write_text("raise SystemExit('a shadowing module ran')\n")
    with servers() as (model, service):
        code = tmp_path / "agent.py"
        code.write_text(AGENT.format(model=model.port, service=service.port))
        script = tmp_path / "agent.sh"
        script.write_text(f"#!/bin/sh\nexec python3 -I {code}\n")  # the agent itself ignores the shadow
        script.chmod(0o755)
        sandbox = Sandbox(
            agent_egress=(f"127.0.0.1:{model.port}",),
            agent_env={"PYTHONPATH": str(shadow), "PYTHONSTARTUP": str(shadow / "socket.py")},
        )
        task = make_task(sandbox=sandbox, shared=[shadow])
        result = await CommandAgent("cli", str(script), binary=None).run(task)
    assert result.status == "finished", result.reason
    assert 'MODEL {"prompt": "plain"}' in result.summary, result.summary
    assert 'TUNNEL {"prompt": "tunnel"}' in result.summary, result.summary
