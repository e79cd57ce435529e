"""The server's TLS trust settings reach setup and gates, and the sandbox shows the files they name."""

from __future__ import annotations

from pathlib import Path

from bot.workspace.certs import CA_VARIABLES, ca_env, ca_mounts
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
    assert sandbox.ca_env == {"NODE_EXTRA_CA_CERTS": "/etc/corp.pem", "CURL_CA_BUNDLE": "/c.pem"}
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
    assert ca_mounts(env, hidden=[data]) == [corp / "bundle.pem", bundle, corp / "certs"]
