"""Services for one Action run: one token port, no database, jobs run inline.

The handlers are the server's own; only the edges differ. GitHub is the only state: a
fresh process reads the plan from its comment each time. There is no App id in these
settings, so deliveries without an `installation` (every Actions payload) are accepted.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from bot.action.inputs import ActionInputs
from bot.app.wiring import default_job_kinds, make_llm_factory
from bot.clock import utcnow
from bot.config.repo import CONFIG_PATH
from bot.db.queue import ClaimedJob
from bot.errors import JobError, RepoConfigError
from bot.github.auth import token_port
from bot.github.identity import ACTIONS_APP_SLUG, Identity, known
from bot.github.port import GitHubPort
from bot.github.transport import SharedTransport
from bot.runtime.appkeys import derive_state_key, is_placeholder
from bot.runtime.services import Services
from bot.runtime.settings import Settings, load_settings
from bot.runtime.worker import JobKinds
from bot.store.plans import PlanStore

if TYPE_CHECKING:
    from bot.handlers.session import Session

log = logging.getLogger(__name__)


class ConfigPathPort:
    """A port that reads the repo config from `config_path` instead of the default path."""

    def __init__(self, inner: GitHubPort, config_path: str) -> None:
        self._inner = inner
        self._config_path = config_path

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def get_file_text(self, repo: str, path: str, *, ref: str | None = None) -> str | None:
        """The file's text; the config is read from the Action's `config_path`."""
        wanted = self._config_path if path == CONFIG_PATH else path
        return await self._inner.get_file_text(repo, wanted, ref=ref)


@dataclass
class InlineJobs:
    """The Action's queue: jobs run in this process, in order, after the handler that queued them."""

    services: Services
    kinds: JobKinds
    pending: deque[tuple[str, str, dict[str, Any]]] = field(default_factory=deque)
    done: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: count(1))

    async def enqueue(self, kind: str, group_key: str, payload: dict[str, Any]) -> None:
        """Queue a job; `drain` runs it."""
        log.info("job %s for %s queued inline", kind, group_key)
        self.pending.append((kind, group_key, payload))

    async def drain(self, *, delivery_id: str) -> int:
        """Run every queued job (and the jobs those queue); returns how many ran."""
        ran = 0
        while self.pending:
            kind, group_key, payload = self.pending.popleft()
            handler = self.kinds.get(kind)
            if handler is None:
                raise JobError(f"no handler registered for job kind {kind!r}")
            job = ClaimedJob(
                id=next(self._ids),
                kind=kind,
                group_key=group_key,
                payload=payload,
                delivery_id=delivery_id,
                attempts=1,
                max_attempts=1,
                created_at=utcnow(),
            )
            await handler(job, self.services)
            self.done.append((kind, payload))
            ran += 1
        return ran


def action_settings(inputs: ActionInputs, data_dir: Path) -> Settings:
    """Settings from the inputs alone: no App id, no database, no webhook secret."""
    return load_settings(
        None,
        app_id=None,
        private_key=None,
        private_key_path=None,
        webhook_secret=None,
        database_url=None,
        github_api_url=inputs.api_url,
        github_server_url=inputs.server_url,
        data_dir=data_dir,
        llm_provider=inputs.llm_provider,
        llm_model=inputs.llm_model,
        llm_base_url=inputs.llm_base_url,
        anthropic_api_key=inputs.anthropic_api_key,
        openai_api_key=inputs.openai_api_key,
        tool_path=inputs.tool_path,
        log_level=inputs.log_level,
        sandbox=inputs.sandbox,
    )


def state_key(inputs: ActionInputs) -> bytes | None:
    """The key plan state is signed with: the `PLAN_CASCADE_STATE_KEY` secret, if the workflow passes it.

    Without one, a plan comment is believed only when its GraphQL edit history shows that
    nobody but the bot edited it.
    """
    if is_placeholder(inputs.state_key):
        return None
    assert inputs.state_key is not None
    return derive_state_key(inputs.state_key, purpose=b"plan-cascade/state-key/explicit/v1")


def action_services(
    inputs: ActionInputs, *, data_dir: Path, transport: httpx.AsyncBaseTransport | None = None
) -> tuple[Services, InlineJobs]:
    """Services wired for one Action run, and the inline job runner behind `enqueue`."""
    settings = action_settings(inputs, data_dir)
    if transport is None:
        transport = SharedTransport()  # one SSL context and connection pool for the run
    # After a 5xx only what this token's App made is adopted: GitHub Actions' (`GITHUB_TOKEN`,
    # shared with every workflow of the repository) or the App whose token the workflow made.
    own = Identity(app_slug=inputs.app_slug or ACTIONS_APP_SLUG, bot_login=inputs.bot_login)
    base = token_port(inputs.token, base_url=inputs.api_url, transport=transport, identity=known(own))
    port: GitHubPort = base if inputs.config_path == CONFIG_PATH else ConfigPathPort(base, inputs.config_path)  # type: ignore[assignment]
    slug = inputs.app_slug

    async def github_for(installation_id: int | None, repo: str) -> GitHubPort:
        return port

    async def slug_source() -> str | None:
        return slug

    services = Services(
        settings=settings,
        github_for=github_for,
        bot_login=inputs.bot_login,
        plan_store=PlanStore(None, key=state_key(inputs)),
        sandbox=settings.sandbox_policy(default="auto"),
        slug_source=slug_source,
    )
    services.llm_for = make_llm_factory(services)
    jobs = InlineJobs(services, default_job_kinds())
    services.enqueue = jobs.enqueue
    return services, jobs


async def require_config(session: Session) -> None:
    """Load the repo config or fail the run, naming the bad keys."""
    if await session.load_config() is None:
        error = session.config_error or RepoConfigError("the repo config is invalid")
        raise error
