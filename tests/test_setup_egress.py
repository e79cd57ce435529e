"""Setup's network (issue 27, defect 4): its own namespace, out only through the bot's proxy to
the registries the operator allows; never the server's loopback services, the cloud's metadata
address or any host not on the list. No test here leaves the machine: the "registry" and "the
server's loopback service" are loopback servers of the test, and the allowlist names the registry.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bot.network.proxy import DEFAULT_SETUP_EGRESS, destination, parse_egress, public
from bot.network.route import proxy_env
from bot.plan.state_block import decode_state
from tests.harness import Harness
from tests.pkgindex import PackageIndex, downloads_of
from tests.support import bwrap_marker
from tests.test_setup_env import REPO_FILES, check_runs, egress, index, plan_and_run  # noqa: F401


@contextmanager
def loopback_service() -> Iterator[tuple[int, list[str]]]:
    """A service of "the server" on its loopback (think /metrics, an admin port): it must stay unseen."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"SERVER-SECRET")

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


def probe(name: str, url: str) -> str:
    """A setup line that fetches `url` through the proxy (as pip, uv and npm would) and says how it went."""
    code = f"import urllib.request as u; print({name!r}, u.urlopen({url!r}, timeout=10).read())"
    return f"python3 -c {json.dumps(code)} || echo {name}-REFUSED"


@bwrap_marker()
async def test_setup_installs_from_an_allowed_registry_and_reaches_nothing_else(
    tmp_path: Path,
    index: PackageIndex,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("UV_DEFAULT_INDEX", index.url)
    before = downloads_of(index, "tinydep")
    with loopback_service() as (port, seen):
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), 5)"
        direct = f"python3 -c {json.dumps(connect)} && echo DIRECT-REACHED || echo DIRECT-REFUSED"
        lines = [
            "uv venv -q .venv && uv pip install -q --python .venv/bin/python -r requirements.txt",
            ".venv/bin/python -c 'import tinydep; print(\"INSTALLED\", tinydep.greet())'",
            probe("LOOPBACK", f"http://127.0.0.1:{port}/metrics"),
            probe("LOCALHOST", f"http://localhost:{port}/metrics"),
            probe("METADATA", "http://169.254.169.254/latest/meta-data/"),
            probe("ELSEWHERE", "https://registry.example/simple/"),
            direct,
        ]
        extra = "setup:\n" + "".join(f"  - {json.dumps(line)}\n" for line in lines)
        extra += "gates:\n  detect: false\n  max_retries: 0\n"
        async with Harness(
            tmp_path,
            execute=True,
            PLAN_CASCADE_SETUP_ENV="UV_DEFAULT_INDEX",
            PLAN_CASCADE_SETUP_EGRESS=f"pypi.org,{egress(index)}",
        ) as h:
            await plan_and_run(h, tmp_path, REPO_FILES, extra=extra)
            state = decode_state(h.plan_comments(1)[0].body)
            assert state is not None and state.stories["STORY-001"].gates["setup"] == "success"
            text = check_runs(h)["plan-cascade / STORY-001 / setup"][0].output["text"]
    assert "INSTALLED hello" in text, text
    assert downloads_of(index, "tinydep") - before == 1, "installed through the proxy"
    for name in ("LOOPBACK", "LOCALHOST", "METADATA", "ELSEWHERE", "DIRECT"):
        assert f"{name}-REFUSED" in text, text
    assert "SERVER-SECRET" not in text and "DIRECT-REACHED" not in text
    assert seen == [], "the server's loopback service saw no request"
    refused = [r.getMessage() for r in caplog.records if r.name == "bot.network.proxy"]
    for target in (f"127.0.0.1:{port}", f"localhost:{port}", "169.254.169.254:80", "registry.example:443"):
        why = f"setup egress refused: {target} is not on the setup egress list (PLAN_CASCADE_SETUP_EGRESS)"
        assert why in refused, refused


# -- the proxy's rules (pure, a resolver of our own) -------------------------------------------
def resolver(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError("no such host")
        return table[host]

    return resolve


async def test_a_listed_name_must_resolve_to_public_addresses_only() -> None:
    allowed = parse_egress("pypi.org, *.pythonhosted.org, rebind.example, 10.0.0.5:3141")
    names = {
        "pypi.org": ["151.101.0.223"],
        "files.pythonhosted.org": ["2a04:4e42::223"],
        "rebind.example": ["151.101.0.223", "127.0.0.1"],
    }
    resolve = resolver(names)
    assert await destination("pypi.org", 443, allowed, resolve=resolve) == ("151.101.0.223", "")
    assert (await destination("files.pythonhosted.org", 443, allowed, resolve=resolve))[0] == "2a04:4e42::223"
    address, why = await destination("rebind.example", 443, allowed, resolve=resolve)
    assert address is None and "non-public address (127.0.0.1)" in why
    assert (await destination("pypi.org", 22, allowed, resolve=resolve))[0] is None, "443 and 80 only"
    assert (await destination("evil.org", 443, allowed, resolve=resolve))[0] is None
    # Addresses: only the exact address and port the operator named.
    assert await destination("10.0.0.5", 3141, allowed, resolve=resolve) == ("10.0.0.5", "")
    for host, port in [("10.0.0.5", 80), ("127.0.0.1", 443), ("169.254.169.254", 80), ("::1", 443)]:
        assert (await destination(host, port, allowed, resolve=resolve))[0] is None


def test_what_counts_as_public() -> None:
    for inward in ("127.0.0.1", "10.1.2.3", "192.168.1.1", "172.16.0.1", "169.254.169.254", "100.64.0.1"):
        assert not public(inward), inward
    for inward in ("::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "0.0.0.0", "224.0.0.1"):  # noqa: S104
        assert not public(inward), inward
    assert public("151.101.0.223") and public("2a04:4e42::223")


def test_the_setting_is_validated_and_defaults_to_the_public_registries(tmp_path: Path) -> None:
    from tests.support import make_settings

    assert "pypi.org" in DEFAULT_SETUP_EGRESS and "github.com" not in DEFAULT_SETUP_EGRESS
    assert make_settings(tmp_path).sandbox_policy().setup_egress is None
    settings = make_settings(tmp_path, PLAN_CASCADE_SETUP_EGRESS="pypi.org, 10.0.0.5:3141")
    assert settings.sandbox_policy().setup_egress == ("pypi.org", "10.0.0.5:3141")
    assert make_settings(tmp_path, PLAN_CASCADE_SETUP_EGRESS="none").sandbox_policy().setup_egress == ()
    with pytest.raises(ValueError, match="PLAN_CASCADE_SETUP_EGRESS"):
        make_settings(tmp_path, PLAN_CASCADE_SETUP_EGRESS="https://pypi.org/simple")


async def test_a_name_that_resolves_inward_is_reached_only_at_a_listed_address() -> None:
    """A registry mirror on the private network: its name is listed, and so is its address."""
    resolve = resolver({"pypi.org": ["203.0.113.80"], "mirror.corp": ["10.0.0.7"]})
    bare = parse_egress("pypi.org")
    assert (await destination("pypi.org", 443, bare, resolve=resolve))[0] is None
    listed = parse_egress("pypi.org, 203.0.113.80:443, mirror.corp")
    assert await destination("pypi.org", 443, listed, resolve=resolve) == ("203.0.113.80", "")
    assert (await destination("pypi.org", 80, listed, resolve=resolve))[0] is None, "that port only"
    assert (await destination("mirror.corp", 443, listed, resolve=resolve))[0] is None


def test_every_package_manager_is_pointed_at_the_proxy_and_corepacks_hosts_are_allowed() -> None:
    """yarn 2+ reads none of HTTP_PROXY/HTTPS_PROXY, only its own settings: without them every
    berry install in the sandbox found no way out. corepack downloads yarn 2+ from
    repo.yarnpkg.com, which the default list lacked."""
    env = proxy_env(3128)
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "npm_config_https_proxy",
        "CARGO_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
    ):
        assert env[name] == "http://127.0.0.1:3128", name
    assert env["YARN_HTTP_PROXY"] == "http://127.0.0.1:3128"
    assert {"registry.npmjs.org", "registry.yarnpkg.com", "repo.yarnpkg.com"} <= set(DEFAULT_SETUP_EGRESS)
