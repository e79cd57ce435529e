"""Shared fixtures. Every test runs with the network blocked except loopback."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


class NetworkBlocked(RuntimeError):
    """A test tried to reach a host other than this machine."""


def _is_local(host: object) -> bool:
    if not isinstance(host, str):
        return False
    if host in {"localhost", "testserver", ""}:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _check(sock: socket.socket, address: object) -> None:
    if sock.family == socket.AF_UNIX:
        return
    host = address[0] if isinstance(address, tuple) else address
    if not _is_local(host):
        raise NetworkBlocked(f"test tried to reach {address!r}: tests may only use loopback")


def _guarded_connect(self: socket.socket, address: object) -> None:
    _check(self, address)
    return _real_connect(self, address)  # type: ignore[arg-type]


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)  # type: ignore[arg-type]


def _guarded_getaddrinfo(host: object, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
    if host is not None and not _is_local(host if isinstance(host, str) else str(host)):
        raise NetworkBlocked(f"test tried to resolve {host!r}: tests may only use loopback")
    return _real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(autouse=True, scope="session")
def _block_network() -> Iterator[None]:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _guarded_getaddrinfo  # type: ignore[assignment]
    try:
        yield
    finally:
        socket.socket.connect = _real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = _real_connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = _real_getaddrinfo


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's real keys or settings."""
    import os

    for name in list(os.environ):
        if name.startswith("PLAN_CASCADE_") or name in {
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "GITHUB_API_URL",
        }:
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    """The session's PostgreSQL (`tests.pgserver`): the local server, else a throwaway one; skipped
    with the install command where PostgreSQL is not installed (a failure with REQUIRE_POSTGRES=1)."""
    from tests import pgserver

    return pgserver.session_url(pgserver.admin_url())


@pytest.fixture(autouse=True)
def _postgres(request: pytest.FixtureRequest) -> None:
    """Tests marked `postgres` get the session's server before they start (or skip without one)."""
    if request.node.get_closest_marker("postgres") is not None:
        request.getfixturevalue("postgres_admin_url")
