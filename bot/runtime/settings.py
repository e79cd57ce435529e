"""Server settings: the environment variables that are Plan Cascade's public contract.

Built by :func:`load_settings` (called from the CLI and the app factory), never at
import time. Missing or placeholder secrets fail start-up with a message that names
the variable to set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.config.mcp_policy import McpPolicy, mcp_variables
from bot.errors import ConfigurationError
from bot.github.urls import web_url
from bot.llm.registry import configuration_problem
from bot.network.rules import parse_egress
from bot.redaction import register_secret
from bot.runtime.appkeys import check_private_key, derive_state_key, is_placeholder
from bot.runtime.egress_defaults import default_agent_egress
from bot.sandbox.certs import ca_env
from bot.sandbox.cgroups import find_cgroups
from bot.sandbox.confinement import Sandbox
from bot.sandbox.limits import DEFAULT_OPEN_FILES, DEFAULT_PROCESSES, Limits, machine_memory
from bot.sandbox.reaper import ProcessRegistry
from bot.sandbox.toolchains import rustup_env

LLMProvider = Literal["anthropic", "openai", "deepseek", "ollama", "openai-compatible"]

MIN_RETENTION_DAYS = 3
"""The shortest `PLAN_CASCADE_RETENTION_DAYS` (0 aside): GitHub redelivers a delivery for 3 days."""
MIN_STATUS_TOKEN = 16
"""The shortest status-page token accepted."""


class Settings(BaseSettings):
    """Everything the server reads from the environment (or a `.env` file)."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", populate_by_name=True)
    _pem: str | None = PrivateAttr(default=None)

    app_id: str | None = Field(default=None, validation_alias="PLAN_CASCADE_APP_ID")
    """The GitHub App's numeric id."""
    private_key: SecretStr | None = Field(default=None, validation_alias="PLAN_CASCADE_PRIVATE_KEY")
    """The App's private key as PEM text."""
    private_key_path: Path | None = Field(default=None, validation_alias="PLAN_CASCADE_PRIVATE_KEY_PATH")
    """A file holding the App's private key (PEM), used when PLAN_CASCADE_PRIVATE_KEY is unset."""
    webhook_secret: SecretStr | None = Field(default=None, validation_alias="PLAN_CASCADE_WEBHOOK_SECRET")
    """The secret GitHub signs webhook deliveries with."""
    github_api_url: str = Field(default="https://api.github.com", validation_alias="GITHUB_API_URL")
    """GitHub's REST API root; for GitHub Enterprise Server `https://HOST/api/v3`."""
    github_server_url: str | None = Field(default=None, validation_alias="GITHUB_SERVER_URL")
    """GitHub's web root (`https://HOST` on an Enterprise Server); default derived from GITHUB_API_URL."""
    database_url: str | None = Field(default=None, validation_alias="PLAN_CASCADE_DATABASE_URL")
    """SQLAlchemy async URL; default a SQLite file in the data dir."""
    data_dir: Path = Field(default=Path(".plan-cascade"), validation_alias="PLAN_CASCADE_DATA_DIR")
    """Mirrors, worktrees, transcripts and the default database live here."""
    llm_provider: LLMProvider = Field(default="anthropic", validation_alias="PLAN_CASCADE_LLM_PROVIDER")
    """Which LLM provider plans and the builtin agent use."""
    llm_model: str | None = Field(default=None, validation_alias="PLAN_CASCADE_LLM_MODEL")
    """Model name; each provider has a sensible default."""
    llm_base_url: str | None = Field(default=None, validation_alias="PLAN_CASCADE_LLM_BASE_URL")
    """Base URL for OpenAI-compatible servers (DeepSeek, Ollama, vLLM, llama.cpp)."""
    anthropic_api_key: SecretStr | None = Field(default=None, validation_alias="ANTHROPIC_API_KEY")
    """Anthropic's SDK key."""
    openai_api_key: SecretStr | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    """OpenAI's SDK key (also used for OpenAI-compatible providers)."""
    workers: int = Field(default=2, ge=1, le=64, validation_alias="PLAN_CASCADE_WORKERS")
    """How many jobs run at once in this process."""
    approval_poll_seconds: float = Field(
        default=60, ge=1, validation_alias="PLAN_CASCADE_APPROVAL_POLL_SECONDS"
    )
    """How often plans awaiting approval are polled for 👍 reactions."""
    tool_path: str | None = Field(default=None, validation_alias="PLAN_CASCADE_TOOL_PATH")
    """PATH for agents and gates (their environment is scrubbed); default /usr/local/bin:/usr/bin:/bin."""
    github_write_interval: float = Field(
        default=1.0, ge=0, validation_alias="PLAN_CASCADE_GITHUB_WRITE_INTERVAL"
    )
    """Seconds between content-creating GitHub calls per installation (GitHub advises at least 1)."""
    redelivery_seconds: float = Field(default=300, ge=0, validation_alias="PLAN_CASCADE_REDELIVERY_SECONDS")
    """How often the App's failed webhook deliveries are looked for and asked again (0: never)."""
    schedule_min_minutes: int = Field(default=60, ge=1, validation_alias="PLAN_CASCADE_SCHEDULE_MIN_MINUTES")
    """The shortest interval a repository's `schedules:` may run at, in minutes (shorter ones are refused)."""
    schedule_poll_seconds: float = Field(
        default=20, ge=1, le=300, validation_alias="PLAN_CASCADE_SCHEDULE_POLL_SECONDS"
    )
    """How often due schedules are looked for (a run starts at most this late)."""
    log_level: str = Field(default="INFO", validation_alias="PLAN_CASCADE_LOG_LEVEL")
    """Python log level name."""
    job_lease_seconds: float = Field(default=60, ge=5, validation_alias="PLAN_CASCADE_JOB_LEASE_SECONDS")
    """How long a job stays claimed without a heartbeat (every third of it) before another host reclaims it;
    a dead worker on the same host is noticed at once."""
    job_max_attempts: int = Field(default=5, ge=1, validation_alias="PLAN_CASCADE_JOB_MAX_ATTEMPTS")
    """Attempts before a failing job is marked dead."""
    sandbox: Literal["required", "auto", "off"] | None = Field(
        default=None, validation_alias="PLAN_CASCADE_SANDBOX"
    )
    """Sandbox floor for agents, gates, setup: required (server default), auto (local/Action default), off."""
    bwrap: str = Field(default="bwrap", validation_alias="PLAN_CASCADE_BWRAP")
    """The bubblewrap program (a name on PATH or a path)."""
    agent_env: str = Field(default="", validation_alias="PLAN_CASCADE_AGENT_ENV")
    """Comma-separated variables of this environment handed to external CLI agents (visible to them)."""
    setup_env: str = Field(default="", validation_alias="PLAN_CASCADE_SETUP_ENV")
    """Comma-separated variables of this environment handed to setup commands (e.g. PIP_INDEX_URL)."""
    public_env: str = Field(default="", validation_alias="PLAN_CASCADE_PUBLIC_ENV")
    """Comma-separated names among those two whose values are no secret (a registry's URL, a flag)."""
    setup_egress: str | None = Field(default=None, validation_alias="PLAN_CASCADE_SETUP_EGRESS")
    """Comma-separated hosts (`host`, `host:port`, `*.domain`, `IP:port`) setup may reach; `none`: none."""
    sandbox_processes: int = Field(
        default=DEFAULT_PROCESSES, ge=0, validation_alias="PLAN_CASCADE_SANDBOX_PROCESSES"
    )
    """Processes and threads one confined process may run at once, all it starts included; 0: no limit."""
    sandbox_open_files: int = Field(
        default=DEFAULT_OPEN_FILES, ge=0, validation_alias="PLAN_CASCADE_SANDBOX_OPEN_FILES"
    )
    """Open files per confined process; 0: no limit (the server's own)."""
    sandbox_memory_mb: int | None = Field(
        default=None, ge=0, validation_alias="PLAN_CASCADE_SANDBOX_MEMORY_MB"
    )
    """MiB of memory (and of /tmp) for one confined process and all it starts; default half the
    machine's memory; 0: no limit."""
    sandbox_cgroup: str = Field(default="auto", validation_alias="PLAN_CASCADE_SANDBOX_CGROUP")
    """Where confined processes' cgroups are made: `auto`, `off`, or a delegated cgroup v2 folder."""
    mcp_egress: str = Field(default="", validation_alias="PLAN_CASCADE_MCP_EGRESS")
    """Comma-separated hosts MCP servers may reach (local ones through the egress proxy); default none."""
    mcp_allow_all_tools: bool = Field(default=False, validation_alias="PLAN_CASCADE_MCP_ALLOW_ALL_TOOLS")
    """Whether a repository may offer every tool of an MCP server (`tools: ["*"]`)."""
    agent_network: bool = Field(default=True, validation_alias="PLAN_CASCADE_AGENT_NETWORK")
    """Whether external CLI agents may go out (through the egress proxy); builtin agents and gates never."""
    agent_egress: str | None = Field(default=None, validation_alias="PLAN_CASCADE_AGENT_EGRESS")
    """Comma-separated hosts external agents may reach through the egress proxy; default: their
    model APIs and the public registries; `none`: none."""
    state_key: SecretStr | None = Field(default=None, validation_alias="PLAN_CASCADE_STATE_KEY")
    """Key that signs the plan state hidden in plan comments; default derived from the webhook secret."""
    retention_days: int = Field(default=14, ge=0, validation_alias="PLAN_CASCADE_RETENTION_DAYS")
    """Days done jobs and delivery records are kept (0: forever); at least 3, GitHub's redelivery window."""
    status_token: SecretStr | None = Field(default=None, validation_alias="PLAN_CASCADE_STATUS_TOKEN")
    """Turns on the operator's status page (`/status`, `/status.json`): the token that signs in to it."""
    public_url: str | None = Field(default=None, validation_alias="PLAN_CASCADE_PUBLIC_URL")
    """The URL GitHub reaches this server at (webhooks: `<it>/webhook`); unset, the set-up page asks."""

    @model_validator(mode="after")
    def _check_key_source(self) -> Settings:
        if self.private_key is not None and self.private_key_path is not None:
            raise ValueError("set PLAN_CASCADE_PRIVATE_KEY or PLAN_CASCADE_PRIVATE_KEY_PATH, not both")
        try:
            parse_egress(self.setup_egress_hosts() or ())
        except ValueError as exc:
            raise ValueError(f"PLAN_CASCADE_SETUP_EGRESS: {exc}") from None
        if 0 < self.retention_days < MIN_RETENTION_DAYS:
            raise ValueError(
                f"PLAN_CASCADE_RETENTION_DAYS={self.retention_days} is shorter than the {MIN_RETENTION_DAYS} "
                "days GitHub can redeliver a delivery for (its record is what makes a redelivery a "
                f"duplicate): set {MIN_RETENTION_DAYS} or more, or 0 to keep everything"
            )
        try:
            parse_egress(_hosts(self.agent_egress) or ())
        except ValueError as exc:
            raise ValueError(f"PLAN_CASCADE_AGENT_EGRESS: {exc}") from None
        try:
            parse_egress(self.mcp_egress_hosts())
        except ValueError as exc:
            raise ValueError(f"PLAN_CASCADE_MCP_EGRESS: {exc}") from None
        cgroup = self.sandbox_cgroup.strip()
        if cgroup not in ("auto", "off") and not Path(cgroup).is_absolute():
            raise ValueError(
                f"PLAN_CASCADE_SANDBOX_CGROUP must be auto, off or an absolute path, not {cgroup!r}"
            )
        return self

    # -- derived values -------------------------------------------------------------
    @property
    def web_root(self) -> str:
        """GitHub's web root: `GITHUB_SERVER_URL`, else the one behind `GITHUB_API_URL`."""
        return (self.github_server_url or "").rstrip("/") or web_url(self.github_api_url)

    @property
    def resolved_database_url(self) -> str:
        """The database URL, defaulting to `sqlite+aiosqlite:///<data_dir>/plan-cascade.db`."""
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'plan-cascade.db').resolve()}"

    def private_key_pem(self) -> str | None:
        """The App private key text, read from the file once (later calls reuse it in memory)."""
        if self.private_key is not None:
            return self.private_key.get_secret_value().replace("\\n", "\n")
        if self._pem is not None:
            return self._pem
        if self.private_key_path is not None:
            try:
                self._pem = self.private_key_path.read_text()
                return self._pem
            except OSError as exc:
                raise ConfigurationError(
                    f"PLAN_CASCADE_PRIVATE_KEY_PATH={self.private_key_path} cannot be read: {exc.strerror}"
                ) from exc
        return None

    def llm_problem(self) -> tuple[str, bool] | None:
        """Why the LLM settings cannot work: (message, fatal), or None."""
        keys = (self.anthropic_api_key, self.openai_api_key)
        anthropic, openai = (k.get_secret_value() if k is not None else None for k in keys)
        return configuration_problem(
            provider=self.llm_provider,
            model=self.llm_model,
            base_url=self.llm_base_url,
            anthropic_api_key=None if is_placeholder(anthropic) else anthropic,
            openai_api_key=None if is_placeholder(openai) else openai,
        )

    def app_problems(self) -> dict[str, str]:
        """Every App credential that is missing, a placeholder or unusable: its variable -> what is
        wrong (empty: all set). All at once: fixing them one start at a time teaches nothing."""
        problems: dict[str, str] = {}
        app, hook, key = "PLAN_CASCADE_APP_ID", "PLAN_CASCADE_WEBHOOK_SECRET", "PLAN_CASCADE_PRIVATE_KEY"
        app_id = (self.app_id or "").strip()
        if not app_id:
            problems[app] = "PLAN_CASCADE_APP_ID is not set: the GitHub App's numeric id"
        elif is_placeholder(app_id):
            problems[app] = f"PLAN_CASCADE_APP_ID is a placeholder ({app_id!r}), not the App's numeric id"
        elif not app_id.isdigit():
            problems[app] = f"PLAN_CASCADE_APP_ID must be the App's numeric id, got {app_id!r}"
        secret = (self.webhook_secret.get_secret_value() if self.webhook_secret else "").strip()
        if not secret:
            problems[hook] = (
                "PLAN_CASCADE_WEBHOOK_SECRET is not set: the webhook secret configured in your GitHub App"
            )
        elif is_placeholder(secret):
            problems[hook] = (
                "PLAN_CASCADE_WEBHOOK_SECRET is a placeholder, not the webhook secret of your GitHub App"
            )
        either = "PLAN_CASCADE_PRIVATE_KEY (PEM text) or PLAN_CASCADE_PRIVATE_KEY_PATH (a file)"
        try:
            pem = self.private_key_pem()
        except ConfigurationError as exc:
            return {**problems, key: exc.message}
        if not (pem or "").strip():
            problems[key] = f"{either} is not set: the App's private key"
        elif is_placeholder(pem):
            problems[key] = f"{either} is a placeholder, not the App's private key"
        else:
            try:
                check_private_key(str(pem))
            except ConfigurationError as exc:
                problems[key] = exc.message
        return problems

    def require_server_secrets(self) -> None:
        """Refuse to start a server without the App's credentials (naming every one missing), or with
        LLM settings that cannot work."""
        problems = self.app_problems()
        if problems:
            raise ConfigurationError("; ".join(problems.values()))
        problem = self.llm_problem()
        if problem is not None and problem[1]:
            raise ConfigurationError(problem[0])
        self.status_token_value()

    def status_token_value(self) -> str | None:
        """The status page's token, or None when the page is off (unset or empty).

        A token that is a placeholder or shorter than 16 characters is refused: the page shows
        private repositories' plans and costs to whoever holds it.
        """
        token = self.status_token.get_secret_value().strip() if self.status_token else ""
        if not token:
            return None
        if is_placeholder(token) or len(token) < MIN_STATUS_TOKEN:
            raise ConfigurationError(
                f"PLAN_CASCADE_STATUS_TOKEN must be at least {MIN_STATUS_TOKEN} characters and not a "
                "placeholder: generate one with "
                "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
            )
        return token

    def sandbox_policy(
        self, *, default: str = "required", environ: Mapping[str, str] | None = None
    ) -> Sandbox:
        """The operator's sandbox for every process started on untrusted code."""
        env = os.environ if environ is None else environ
        for name, value in self.handed(env).items():  # this process holds them now: never in clear,
            register_secret(value, name=name)  # never pushed
        agent_env = {name: env[name] for name in names_in(self.agent_env) if name in env}
        setup_names = names_in(self.setup_env)
        data = self.data_dir.resolve()
        hidden = [data, *([self.private_key_path.resolve()] if self.private_key_path else [])]
        return Sandbox(
            mode=self.sandbox or default,  # type: ignore[arg-type]
            bwrap=self.bwrap,
            hidden=tuple(hidden),
            registry=ProcessRegistry(data / "run" / "processes"),
            agent_network=self.agent_network,
            agent_env=agent_env,
            agent_egress=self.agent_egress_hosts(agent_env),
            setup_env={name: env[name] for name in setup_names if name in env},
            server_env={**ca_env(env), **rustup_env(self.tool_path, env)},
            setup_egress=self.setup_egress_hosts(),
            limits=self.sandbox_limits(cgroups=(self.sandbox or default) != "off"),
            mcp=McpPolicy(self.mcp_egress_hosts(), self.mcp_allow_all_tools, mcp_variables(env)),
        )

    def handed(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The values handed over by name, by name: of the variables `PLAN_CASCADE_AGENT_ENV` and
        `PLAN_CASCADE_SETUP_ENV` name (but those `PLAN_CASCADE_PUBLIC_ENV` says are no secret),
        and of `PLAN_CASCADE_MCP_*` (what MCP servers may name). They have no shape a rule knows,
        so they are secrets by where they come from."""
        env = os.environ if environ is None else environ
        names = {*names_in(self.agent_env), *names_in(self.setup_env)} - {*names_in(self.public_env)}
        return {**{n: env[n] for n in sorted(names) if env.get(n)}, **mcp_variables(env)}

    def sandbox_limits(self, *, cgroups: bool = True) -> Limits:
        """What each confined process may use of the host; with `cgroups`, where its cgroups go."""
        memory_mb = self.sandbox_memory_mb
        memory = machine_memory() // 2 if memory_mb is None else memory_mb * 1024 * 1024
        return Limits(
            processes=self.sandbox_processes,
            open_files=self.sandbox_open_files,
            memory=memory,
            cgroups=find_cgroups(self.sandbox_cgroup.strip()) if cgroups else None,
        )

    def setup_egress_hosts(self) -> tuple[str, ...] | None:
        """The hosts of `PLAN_CASCADE_SETUP_EGRESS` (None: the default registries; `none`: nothing)."""
        return _hosts(self.setup_egress)

    def agent_egress_hosts(self, agent_env: Mapping[str, str]) -> tuple[str, ...]:
        """The hosts of `PLAN_CASCADE_AGENT_EGRESS`; unset, the model APIs of the server's provider
        and of the keys and URLs in `agent_env` (what agents are handed), and the public registries."""
        listed = _hosts(self.agent_egress)
        if listed is not None:
            return listed
        return default_agent_egress(
            provider=self.llm_provider, base_url=self.llm_base_url, agent_env=agent_env
        )

    def mcp_egress_hosts(self) -> tuple[str, ...]:
        """The hosts of `PLAN_CASCADE_MCP_EGRESS` (none by default, or when it says `none`)."""
        return _hosts(self.mcp_egress) or ()

    def state_signing_key(self) -> bytes | None:
        """The key plan comments' state blocks are signed with (None: nothing to sign with).

        `PLAN_CASCADE_STATE_KEY` when set, else derived from the webhook secret, so a server
        needs no extra setting. Changing either invalidates the plans' signatures: the bot
        then asks for a re-plan on each issue (it never trusts a block it cannot verify).
        """
        explicit = self.state_key.get_secret_value() if self.state_key else None
        if not is_placeholder(explicit):
            assert explicit is not None
            return derive_state_key(explicit, purpose=b"plan-cascade/state-key/explicit/v1")
        secret = self.webhook_secret.get_secret_value() if self.webhook_secret else None
        if is_placeholder(secret):
            return None
        assert secret is not None
        return derive_state_key(secret, purpose=b"plan-cascade/state-key/v1")

    def llm_api_key(self) -> str | None:
        """The key for the configured provider, or None for providers that need none."""
        if self.llm_provider == "anthropic":
            key = self.anthropic_api_key
        elif self.llm_provider == "ollama":
            return None
        else:
            key = self.openai_api_key
        value = key.get_secret_value() if key else None
        return None if is_placeholder(value) else value


def names_in(setting: str) -> list[str]:
    """The variable names of a comma-separated setting (`PLAN_CASCADE_AGENT_ENV`, ...), in order."""
    return [n.strip() for n in setting.split(",") if n.strip()]


def _hosts(setting: str | None) -> tuple[str, ...] | None:
    """The hosts of an egress setting (None: unset, the default; `none`: nothing)."""
    text = (setting or "").strip()
    if not text:
        return None
    return () if text.lower() == "none" else tuple(text.replace(",", " ").split())


def load_settings(env_file: str | Path | None = ".env", **overrides: object) -> Settings:
    """Build settings from the environment (and `env_file` when it exists)."""
    kwargs: dict[str, object] = dict(overrides)
    if env_file is not None and Path(env_file).is_file():
        kwargs["_env_file"] = str(env_file)
    try:
        return Settings(**kwargs)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "settings"
            lines.append(f"{loc}: {err['msg']}")
        raise ConfigurationError("invalid settings: " + "; ".join(lines)) from None
