"""Where setup and agents may connect: the operator's allowlist, and which addresses count as public.

Pure rules (the system resolver aside) used by the egress proxy (`bot.network.proxy`): a host
on the operator's list (`PLAN_CASCADE_SETUP_EGRESS` for setup, `PLAN_CASCADE_AGENT_EGRESS` for
agents), and on the repository's narrower one when it has one (`agent.egress`), is reached only at
public addresses it resolves to, or at an address the operator named with its port. "Public"
leaves out loopback, link-local (the cloud's metadata address), private, shared, multicast and
reserved addresses, and every IPv6 form that carries one of those IPv4 addresses (mapped,
IPv4-compatible, translated, NAT64, 6to4).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

DEFAULT_SETUP_EGRESS = (
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "repo.yarnpkg.com",  # corepack downloads yarn 2+ from there
    "proxy.golang.org",
    "sum.golang.org",
    "crates.io",
    "static.crates.io",
    "index.crates.io",
)
"""The public package registries setup may reach by default (https and http on 443 and 80)."""
MODEL_APIS = ("api.anthropic.com", "api.openai.com")
DEFAULT_AGENT_EGRESS = (*MODEL_APIS, *DEFAULT_SETUP_EGRESS)
"""Where external agents may connect when nothing more precise is known (the server's settings
narrow the model APIs to the providers it has keys for)."""
DEFAULT_PORTS = (443, 80)
"""The ports a listed host without one may be reached on."""
Resolver = Callable[[str, int], Awaitable[list[str]]]
Reason = Literal["unlisted", "narrowed", "inward", "unresolved"]
"""Why a request was refused (`bot.plan.blocked` says what would allow each)."""


@dataclass(frozen=True)
class Entry:
    """One allowed destination: a host (`*.example.org` for its subdomains), a port or the defaults."""

    host: str
    port: int | None = None

    def matches(self, host: str, port: int) -> bool:
        if port not in ((self.port,) if self.port is not None else DEFAULT_PORTS):
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host


def parse_egress(text: str | Sequence[str]) -> tuple[Entry, ...]:
    """`host`, `host:port`, `*.domain`, `[v6]:port`, comma- or space-separated; ValueError when malformed."""
    items = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    entries = []
    for item in items:
        host, port = split_host_port(item.strip(), default=None)
        if not host or any(c in host for c in "/@?#") or (port is not None and not 0 < port < 65536):
            raise ValueError(f"{item!r} is not a host, host:port or *.domain")
        entries.append(Entry(host, port))
    return tuple(entries)


def split_host_port(target: str, *, default: int | None) -> tuple[str, int | None]:
    host, port = target, default
    if target.startswith("["):
        inner, _, rest = target[1:].partition("]")
        host = inner
        if rest.startswith(":"):
            port = int(rest[1:])
    elif target.count(":") == 1:
        host, _, digits = target.partition(":")
        port = int(digits)
    return host.lower().rstrip("."), port


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


_EMBEDS_IPV4 = tuple(
    ipaddress.IPv6Network(prefix)
    for prefix in (
        "64:ff9b::/96",  # NAT64's well-known prefix (RFC 6052): the IPv4 address it translates to
        "::/96",  # IPv4-compatible (deprecated): `::a.b.c.d`
        "::ffff:0:0:0/96",  # IPv4-translated (SIIT, RFC 2765)
    )
)
_NEVER_PUBLIC = tuple(
    ipaddress.IPv6Network(prefix)
    for prefix in (
        "64:ff9b:1::/48",  # NAT64's local-use prefix (RFC 8215): a translator of the site's own
        "fec0::/10",  # site-local (deprecated, still routed inward by some networks)
    )
)


def public(address: str) -> bool:
    """Whether an address is on the public internet: not loopback, link-local (cloud metadata),
    private, shared, multicast, reserved or unspecified, nor an IPv6 form that carries such an
    IPv4 address (mapped, IPv4-compatible, translated, NAT64, 6to4), nor site-local."""
    ip = _ip(address.split("%")[0])
    if ip is None:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in net for net in _NEVER_PUBLIC):
            return False
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
        elif any(ip in net for net in _EMBEDS_IPV4):
            if ip in _EMBEDS_IPV4[1]:  # `::a.b.c.d` is no address a registry has: never public
                return False
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.is_global and not ip.is_multicast


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the system's resolver, off the event loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class Allowlist:
    """Where one proxy's clients may connect: the operator's entries, narrowed (never widened) by
    a repository's when it has a list of its own."""

    entries: tuple[Entry, ...]
    narrowed: tuple[Entry, ...] | None = None
    """The repository's list (`agent.egress`); None: the operator's list as it is."""
    who: str = "setup"
    """Whose proxy it is, for messages: `setup`, `agent` or `MCP`."""
    setting: str = "PLAN_CASCADE_SETUP_EGRESS"
    """The operator's setting the entries come from."""

    def listed(self, host: str, port: int) -> Reason | None:
        """None when both lists have `host:port`, else why not."""
        if not any(e.matches(host, port) for e in self.entries):
            return "unlisted"
        if self.narrowed is not None and not any(e.matches(host, port) for e in self.narrowed):
            return "narrowed"
        return None


def mcp_allowlist(allowed: Sequence[Entry]) -> Allowlist:
    """Where MCP servers may connect (`PLAN_CASCADE_MCP_EGRESS`): a local one through its proxy,
    a remote one from the bot's process."""
    return Allowlist(tuple(allowed), who="MCP", setting="PLAN_CASCADE_MCP_EGRESS")


async def decide(
    host: str, port: int, rules: Allowlist, *, resolve: Resolver = system_resolver
) -> tuple[str | None, Reason | None, str]:
    """(the address to connect to, None, "") when `host:port` may be reached, else (None, why
    in a word, why in a sentence)."""
    refused = rules.listed(host, port)
    if refused == "unlisted":
        return None, refused, f"{host}:{port} is not on the {rules.who} egress list ({rules.setting})"
    if refused == "narrowed":
        return None, refused, f"{host}:{port} is not on this repository's agent.egress list"
    if _ip(host) is not None:
        return host, None, ""  # the operator named this very address and port
    try:
        addresses = await resolve(host, port)
    except OSError as exc:
        return None, "unresolved", f"{host} does not resolve: {exc}"
    # A name that resolves inward (a registry mirror on the private network, split-horizon DNS)
    # is reached only at an address the operator listed with this port as well.
    inward = [a for a in addresses if not public(a) and not any(e.matches(a, port) for e in rules.entries)]
    if not addresses or inward:
        return None, "inward", f"{host} resolves to a non-public address ({', '.join(inward) or 'none'})"
    return addresses[0], None, ""


async def destination(
    host: str, port: int, allowed: Sequence[Entry], *, resolve: Resolver = system_resolver
) -> tuple[str | None, str]:
    """(the address to connect to, "") when setup may reach `host:port`, else (None, why not)."""
    address, _, why = await decide(host, port, Allowlist(tuple(allowed)), resolve=resolve)
    return address, why
