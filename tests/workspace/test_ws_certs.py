"""The server's TLS trust settings reach setup and gates, and the sandbox shows the files they name."""

from __future__ import annotations

from pathlib import Path

from bot.sandbox.certs import CA_VARIABLES, ca_env, env_mounts
from bot.sandbox.toolchains import rustup_env
from tests.support import make_settings


def test_the_trust_settings_are_taken_from_the_servers_environment(tmp_path: Path) -> None:
    environ = {
        "NODE_EXTRA_CA_CERTS": "/etc/corp.pem",
        "SSL_CERT_FILE": " ",
        "PIP_INDEX_URL": "x",
        "HOME": "/r",
    }
    assert ca_env(environ) == {"NODE_EXTRA_CA_CERTS": "/etc/corp.pem"}  # blank ones and others left out
    sandbox = make_settings(tmp_path).sandbox_policy(environ={**environ, "CURL_CA_BUNDLE": "/c.pem"})
    assert sandbox.server_env == {"NODE_EXTRA_CA_CERTS": "/etc/corp.pem", "CURL_CA_BUNDLE": "/c.pem"}
    assert sandbox.setup_env == {}  # without PLAN_CASCADE_SETUP_ENV
    assert {"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE"} <= set(CA_VARIABLES)


def test_the_files_they_name_are_mounted_unless_the_system_shows_them_or_the_sandbox_hides_them(
    tmp_path: Path,
) -> None:
    corp = tmp_path / "corp"
    (corp / "certs").mkdir(parents=True)
    bundle = corp / "real.pem"
    bundle.write_text("pem")
    (corp / "bundle.pem").symlink_to(bundle)
    data = tmp_path / "data"
    (data / "keys").mkdir(parents=True)
    (data / "keys" / "ca.pem").write_text("pem")
    env = {
        "NODE_EXTRA_CA_CERTS": str(corp / "bundle.pem"),  # a link: it and what it leads to
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",  # /etc is in the sandbox already
        "SSL_CERT_DIR": f"{corp / 'certs'}:/etc/ssl/certs",
        "REQUESTS_CA_BUNDLE": str(data / "keys" / "ca.pem"),  # in the data dir: never shown
        "PIP_CERT": str(tmp_path),  # a parent of the data dir: never mounted
        "CURL_CA_BUNDLE": "relative.pem",
        "GIT_SSL_CAINFO": str(corp / "missing.pem"),
    }
    assert env_mounts(env, hidden=[data]) == [corp / "bundle.pem", bundle, corp / "certs"]


def test_rustups_home_is_handed_on_when_the_tool_paths_cargo_is_its_proxy(tmp_path: Path) -> None:
    """`~/.cargo/bin/cargo` is a link to `rustup`, which finds its toolchains in `~/.rustup` of the
    user who installed it: the sandbox's HOME has none."""
    tools, home = tmp_path / "cargo-bin", tmp_path / "home"
    tools.mkdir()
    (home / ".rustup" / "toolchains").mkdir(parents=True)
    (tools / "rustup").write_text("#!/bin/sh\n")
    (tools / "rustup").chmod(0o755)
    (tools / "cargo").symlink_to("rustup")
    assert rustup_env(str(tools), {"HOME": str(home)}) == {"RUSTUP_HOME": str(home / ".rustup")}
    assert rustup_env(str(tools), {"HOME": str(home), "RUSTUP_HOME": str(tmp_path)}) == {
        "RUSTUP_HOME": str(tmp_path)
    }
    assert rustup_env(str(tools), {"HOME": str(tmp_path / "nobody")}) == {}  # no such home
    plain = tmp_path / "debian-bin"
    plain.mkdir()
    (plain / "cargo").write_text("#!/bin/sh\n")  # Debian's cargo needs nothing of the kind
    (plain / "cargo").chmod(0o755)
    assert rustup_env(str(plain), {"HOME": str(home)}) == {}
    sandbox = make_settings(tmp_path, PLAN_CASCADE_TOOL_PATH=str(tools)).sandbox_policy(
        environ={"HOME": str(home)}
    )
    assert sandbox.server_env == {"RUSTUP_HOME": str(home / ".rustup")}
    assert env_mounts(sandbox.server_env, hidden=sandbox.hidden) == [home / ".rustup"]
