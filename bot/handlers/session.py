"""One issue's worth of context for a handler: the GitHub port, the repo config, the plan.

Built per event by `open_session`; nothing here is global.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.config.errors import config_error
from bot.config.identity import CommitIdentity
from bot.config.load import load_repo_config
from bot.config.mcp import operator_problems
from bot.config.repo import CONFIG_PATH, AgentConfig, RepoConfig, format_config_problems_markdown
from bot.config.schedules import frequency_problems
from bot.environment.setup import READ_FILES, files_to_read
from bot.errors import GitHubError, NotInstalled, RepoConfigError
from bot.github.models import Comment, Issue
from bot.github.port import GitHubPort
from bot.publishing.commit_mode import BranchRules, CommitPublisher
from bot.rendering import messages
from bot.store.permissions import WRITE_ROLES, PermissionCache, Verdict, may_act, may_start
from bot.store.plans import LoadedPlan, PlanStore, require_identity
from bot.workspace.mirror import Mirror

if TYPE_CHECKING:
    from bot.db.queue import ClaimedJob
    from bot.runtime.routing import Event
    from bot.runtime.services import Services

log = logging.getLogger(__name__)
DEFAULT_TRIGGER_LABEL = "plan-cascade"
SETUP_FILES = (*READ_FILES, "requirements.txt")
"""Read with the plan's other reads, before the tree says which exist: the first plan comment
then waits for no second wave of reads (detection reads only the files in the tree)."""


@dataclass
class Session:
    """What a handler needs to act on one issue of one repository."""

    services: Services
    port: GitHubPort
    repo: str
    issue: int
    installation_id: int | None
    default_branch: str
    clone_url: str | None
    bot_login: str | None
    app_slug: str | None
    config: RepoConfig | None = None
    config_error: RepoConfigError | None = None
    _plan: LoadedPlan | None = field(default=None, repr=False)
    _plan_read: bool = field(default=False, repr=False)
    _issue: Issue | None = field(default=None, repr=False)
    _tree: list[str] | None = field(default=None, repr=False)
    _config_read: bool = field(default=False, repr=False)
    _files: dict[str, asyncio.Future[str | None]] = field(default_factory=dict, repr=False)
    _acks: set[asyncio.Future[None]] = field(default_factory=set, repr=False)

    @property
    def store(self) -> PlanStore:
        """The plan store shared by the process."""
        return self.services.plan_store

    @property
    def permissions(self) -> PermissionCache:
        """The permission cache shared by the process."""
        return self.services.permissions

    async def load_config(self) -> RepoConfig | None:
        """Read `.github/plan-cascade.yml` from the default branch (defaults when absent)."""
        text = await self.port.get_file_text(self.repo, CONFIG_PATH, ref=self.default_branch)
        try:
            # Parsing and validating is CPU work on untrusted text: off the event loop.
            self.config = await asyncio.to_thread(load_repo_config, text)
            self.config_error = None
            self._check_operator_settings(self.config)
        except RepoConfigError as exc:
            self.config, self.config_error = None, exc
        self._config_read = True
        self.services.repo_cache.keep_config(self.repo, self.default_branch, self.config)
        return self.config

    def _check_operator_settings(self, config: RepoConfig) -> None:
        """What this server's operator refuses in the config (`"*"` tools, MCP variables it has
        not set): reported on the issue like the file's own problems (RepoConfigError)."""
        policy = self.services.sandbox_policy().mcp
        servers = config.agent.mcp_servers
        problems = operator_problems(
            servers, allow_all_tools=policy.allow_all_tools, variables=policy.variables
        )
        problems += frequency_problems(
            self.repo, config.schedules, min_minutes=self.services.settings.schedule_min_minutes
        )
        if problems:
            raise config_error(problems)

    async def fresh_config(self) -> RepoConfig | None:
        """The config as this job read it, or read now: every decision uses the file as it is."""
        return self.config if self._config_read else await self.load_config()

    def mirror(self) -> Mirror:
        """The server's bare mirror of this repository (under the data dir), fetched with our token;
        its pushes go as `publishing.commits` says (GitHub may make the commits, signed)."""
        assert self.clone_url, "a repository without a clone URL has no mirror"
        mode = self.config.publishing.commits if self.config is not None else "auto"
        rules = self.services.extras.setdefault("branch_rules", BranchRules())  # the process's
        pusher = CommitPublisher(
            self.port, self.repo, mode=mode, default_branch=self.default_branch, rules=rules
        )
        return Mirror(
            root=self.services.settings.data_dir.resolve(),
            clone_url=self.clone_url,
            token_provider=self.port.git_token,
            pusher=pusher,
        )

    @property
    def app_url(self) -> str | None:
        """The App's page (GitHub's `html_url` for it, or derived from the server's web root)."""
        return self.services.identity.app_url(self.app_slug)

    async def commit_identity(self, approvers: Sequence[str] = ()) -> CommitIdentity:
        """Who the bot's commits here are by, crediting `approvers` (see `bot.runtime.identity`)."""
        agent = self.config.agent if self.config is not None else AgentConfig()
        return await self.services.identity.commits(
            self.port, agent, bot_login=self.bot_login, approvers=approvers
        )

    async def trigger_label(self, *, asked: str | None = None) -> str:
        """The label that asks for a plan: from the config read recently, else read now.

        `asked`: the label just added. When the config must be read and that label is likely the
        trigger (the default one, or the one the config named before), the file tree is read in
        the same round trip: the next round trip then reads exactly the manifests setup
        detection needs, wherever they are (`requirements/dev.txt`), and the plan comment
        follows in the third.
        """
        cache = self.services.repo_cache
        cached = cache.config(self.repo, self.default_branch)
        if cached is not None:
            return cached.trigger_label
        likely = {DEFAULT_TRIGGER_LABEL, cache.last_trigger_label(self.repo, self.default_branch)}
        if asked is not None and asked in likely:
            config, _ = await asyncio.gather(self.load_config(), self._tree_if_any())
        else:
            config = await self.load_config()
        return config.trigger_label if config is not None else DEFAULT_TRIGGER_LABEL

    async def _tree_if_any(self) -> None:
        """Read the tree ahead; a failure is left to the real read (which raises where handled)."""
        try:
            await self.tree()
        except GitHubError:
            return

    async def issue_info(self) -> Issue:
        """The issue, read once per session."""
        if self._issue is None:
            self._issue = await self.port.get_issue(self.repo, self.issue)
        return self._issue

    async def tree(self) -> list[str]:
        """The default branch's file paths, read once per session (raises GitHubError)."""
        if self._tree is None:
            self._tree = await self.port.list_tree(self.repo, self.default_branch)
        return self._tree

    async def file_text(self, path: str) -> str | None:
        """A file's text at the default branch (None when absent), read once per session."""
        read = self._files.get(path)
        if read is None:
            read = asyncio.ensure_future(self.port.get_file_text(self.repo, path, ref=self.default_branch))
            self._files[path] = read
        try:
            return await read
        except BaseException:
            if self._files.get(path) is read:  # a failed read is tried again by the next caller
                del self._files[path]
            raise

    def _setup_files(self) -> tuple[str, ...]:
        """The files setup detection will read, when the config known now leaves it to detection:
        those of the tree when it was read ahead, else the usual ones whether or not they exist
        (a miss costs a request, not a round trip). Read in the prefetch."""
        known = self.services.repo_cache.config(self.repo, self.default_branch)
        if known is not None and known.setup is not None:
            return ()
        return tuple(files_to_read(self._tree)) if self._tree is not None else SETUP_FILES

    async def current_plan(self) -> LoadedPlan | None:
        """The plan as this session last read it (read now if it has not been)."""
        return self._plan if self._plan_read else await self.load_plan()

    async def prefetch(self, *reads: Awaitable[object]) -> list[object]:
        """`reads` and what a plan request reads (plan, issue, tree, the manifests setup detection
        reads) at once: one round trip; the results of `reads`.

        A failure of one of `reads` is raised (once all have finished: a permission read that
        fails keeps the job from going on). A failed plan, issue, tree or file read is left to
        the real read, which raises where it is handled.
        """
        speculative = [self.file_text(path) for path in self._setup_files()]
        found = await asyncio.gather(
            *reads, self.load_plan(), self.issue_info(), self.tree(), *speculative, return_exceptions=True
        )
        mine = found[: len(reads)]
        for result in mine:
            if isinstance(result, BaseException):
                raise result
        return mine

    async def report_config_error(self) -> None:
        """Comment the config problems on the issue; nothing runs."""
        assert self.config_error is not None
        log.warning("invalid %s: %s", CONFIG_PATH, "; ".join(self.config_error.problems))
        await self.reply(format_config_problems_markdown(self.config_error))

    async def load_plan(self, *, comments: Sequence[Comment] | None = None) -> LoadedPlan | None:
        """The issue's plan (from the comment; rebuilt into the cache when missing).

        `comments`: the issue's comments, when this job has just listed them."""
        self._plan = await self.store.load(
            self.port, self.repo, self.issue, bot_login=self.bot_login, comments=comments
        )
        self._plan_read = True
        return self._plan

    async def reply(self, body: str) -> None:
        """A comment on the issue."""
        await self.port.create_issue_comment(self.repo, self.issue, body=body)

    def acknowledge(self, *, comment_id: int | None = None) -> None:
        """👀 on the issue (or on its comment `comment_id`): queued in the installation's write
        queue, not awaited, dropped if the answer goes first. Only for someone known to have
        write access: an outsider's request costs no write (see `refuse`)."""
        self._acks.add(
            asyncio.ensure_future(self.port.acknowledge(self.repo, self.issue, comment_id=comment_id))
        )

    async def permitted(
        self, verdict: Awaitable[Verdict], login: str, *, comment_id: int | None = None
    ) -> Verdict:
        """`verdict` (whether `login` may act), with the 👀 once write access is known: at once for
        someone GitHub said had write access when last asked (a cached read, up to a day old: the
        first answer needs no round trip for it), else when `verdict` allows; never for others."""
        early = self.permissions.known_writer(self.repo, login)
        if early:
            self.acknowledge(comment_id=comment_id)
        result = await verdict
        if result.allowed and not early:
            self.acknowledge(comment_id=comment_id)
        return result

    async def acknowledged(self) -> None:
        """Wait for the 👀 to be queued (sent, without a write queue: the Action's)."""
        while self._acks:
            await self._acks.pop()

    async def may_act(
        self, login: str, association: str | None = None, user_type: str | None = None
    ) -> Verdict:
        """Whether `login` has write access here (never a bot; a GitHub error refuses)."""
        return await may_act(
            self.port,
            self.permissions,
            repo=self.repo,
            login=login,
            association=association,
            user_type=user_type,
        )

    async def may_start(
        self, login: str, association: str | None = None, user_type: str | None = None
    ) -> Verdict:
        """The approval rule, for anything that starts or resumes work (see `bot.store.permissions`)."""
        approvers = list(self.config.approvers) if self.config else []
        return await may_start(
            self.port,
            self.permissions,
            repo=self.repo,
            login=login,
            approvers=approvers,
            association=association,
            user_type=user_type,
        )

    async def refuse(self, login: str, verdict: Verdict, *, on: int | None = None) -> None:
        """The one short reply to someone who may not do what they asked. Someone without write
        access is told once per issue, then not again, and the installation tells at most
        `REFUSALS_PER_HOUR` an hour (see `bot.store.refusals`): an outsider's commands cannot
        spend the installation's writes. A writer (not an approver) and a GitHub error are
        always answered."""
        issue = on or self.issue
        metrics = self.services.metrics
        if verdict.permission not in WRITE_ROLES and verdict.permission != "unknown":
            if not self.services.refusals.allow(
                repo=self.repo, issue=issue, login=login, installation=self.installation_id
            ):
                log.info("not telling %s again on %s#%s: refused without a reply", login, self.repo, issue)
                if metrics is not None:
                    metrics.refusals.labels("silenced").inc()
                return
        if metrics is not None:
            metrics.refusals.labels("posted").inc()
        config = self.config if self._config_read else await self._config_for_reply()
        approvers = list(config.approvers) if config else []
        body = messages.permission_denied(login, verdict.permission, approvers=approvers)
        await self.port.create_issue_comment(self.repo, issue, body=body)

    async def _config_for_reply(self) -> RepoConfig | None:
        """The config, read for a reply that names its approvers (none when it cannot be read)."""
        try:
            return await self.load_config()
        except GitHubError as exc:
            log.warning("could not read %s for the reply: %s", CONFIG_PATH, exc.message)
            return None

    def may_be_trigger(self, label: str) -> bool:
        """Whether `label` is (per the config read recently) or likely is the trigger label."""
        cache = self.services.repo_cache
        cached = cache.config(self.repo, self.default_branch)
        if cached is not None:
            return label == cached.trigger_label
        return label in {DEFAULT_TRIGGER_LABEL, cache.last_trigger_label(self.repo, self.default_branch)}


async def open_session(
    services: Services,
    *,
    repo: str,
    issue: int,
    installation_id: int | None,
    default_branch: str | None = None,
    clone_url: str | None = None,
) -> Session:
    """A session for `repo#issue`, with the port for the installation."""
    assert services.github_for is not None, "services.github_for is not wired"
    if installation_id is None and services.settings.app_id:
        raise NotInstalled(
            f"the delivery for {repo} came through no App installation: configure the webhook on the "
            "GitHub App (not on the repository) and install the App on the repository"
        )
    port = await services.github_for(installation_id, repo)
    slug = await services.app_slug(port)
    if not default_branch or not clone_url:
        known = services.repo_cache.info(repo)
        if known is None:
            info = await port.get_repository(repo)
            known = (info.default_branch, info.clone_url)
            services.repo_cache.keep_info(repo, *known)
        default_branch = default_branch or known[0]
        clone_url = clone_url or known[1]
    return Session(
        services=services,
        port=port,
        repo=repo,
        issue=issue,
        installation_id=installation_id,
        default_branch=default_branch,
        clone_url=clone_url,
        bot_login=require_identity(services.bot_login or (f"{slug}[bot]" if slug else None)),
        app_slug=slug,
    )


async def session_for_event(services: Services, event: Event, *, issue: int) -> Session:
    """A session for an event's repository (branch and clone URL from the payload)."""
    assert event.repo is not None
    repo = event.envelope.repository
    return await open_session(
        services,
        repo=event.repo,
        issue=issue,
        installation_id=event.installation_id,
        default_branch=repo.default_branch if repo else None,
        clone_url=repo.clone_url if repo else None,
    )


async def session_for_job(services: Services, job: ClaimedJob) -> Session | None:
    """A session for a job about `repo#issue`, with its config; None (reported) when invalid."""
    data = job.payload
    session = await open_session(
        services, repo=data["repo"], issue=int(data["issue"]), installation_id=data.get("installation_id")
    )
    if await session.load_config() is None:
        await session.report_config_error()
        return None
    return session
