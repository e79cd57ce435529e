"""Where external agents may connect when the operator does not say: their model's API and the registries.

`PLAN_CASCADE_AGENT_EGRESS` unset means: the API host of the server's provider
(`PLAN_CASCADE_LLM_PROVIDER`, or the host of `PLAN_CASCADE_LLM_BASE_URL`), the API hosts of the
keys handed to agents (`ANTHROPIC_API_KEY` in `PLAN_CASCADE_AGENT_ENV` → `api.anthropic.com`,
`OPENAI_API_KEY` → `api.openai.com`) and of the base URLs handed to them (`ANTHROPIC_BASE_URL`,
`OPENAI_BASE_URL`), plus the public package registries setup may reach by default. A model
served on the server itself (`http://localhost:11434/v1`, Ollama) is listed with its loopback
addresses and that port alone: the operator named it, and nothing else of the loopback opens.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from bot.llm.registry import DEFAULT_BASE_URLS
from bot.network.rules import DEFAULT_SETUP_EGRESS

PROVIDER_HOSTS = {"anthropic": "api.anthropic.com", "openai": "api.openai.com"}
"""The API host of each provider whose SDK has a fixed one."""
KEY_HOSTS = {
    "ANTHROPIC_API_KEY": "api.anthropic.com",
    "ANTHROPIC_AUTH_TOKEN": "api.anthropic.com",
    "CLAUDE_CODE_OAUTH_TOKEN": "api.anthropic.com",
    "OPENAI_API_KEY": "api.openai.com",
    "CODEX_API_KEY": "api.openai.com",
    "DEEPSEEK_API_KEY": "api.deepseek.com",
}
"""A credential handed to agents, and the API it is for."""
URL_VARIABLES = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE")
"""Variables handed to agents that name their model's endpoint."""
LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


def url_entries(url: str) -> list[str]:
    """The egress entries that reach the server of `url` (none for something that is no URL)."""
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return []
    if not host or parts.scheme not in ("http", "https"):
        return []
    name = f"[{host}]" if ":" in host else host
    if port is None or (parts.scheme, port) in (("https", 443), ("http", 80)):
        entries = [name]  # a listed host without a port: 443 and 80
        port = 443 if parts.scheme == "https" else 80
    else:
        entries = [f"{name}:{port}"]
    if host.lower() in LOOPBACK_NAMES or host.lower().endswith(".localhost"):
        entries += [f"127.0.0.1:{port}", f"[::1]:{port}"]  # the name resolves inward: its addresses too
    return entries


def default_agent_egress(
    *, provider: str, base_url: str | None, agent_env: Mapping[str, str]
) -> tuple[str, ...]:
    """The model APIs of the configured providers and of what agents are handed, then the registries."""
    hosts: list[str] = []
    if provider in PROVIDER_HOSTS:
        hosts.append(PROVIDER_HOSTS[provider])
    url = base_url or DEFAULT_BASE_URLS.get(provider)
    if url:
        hosts += url_entries(url)
    for name, value in agent_env.items():
        if name in KEY_HOSTS:
            hosts.append(KEY_HOSTS[name])
        if name in URL_VARIABLES:
            hosts += url_entries(value)
    return tuple(dict.fromkeys([*hosts, *DEFAULT_SETUP_EGRESS]))
