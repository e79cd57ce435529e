"""An in-process Plan Cascade against the fake GitHub: post real (edited) fixture payloads,
drain the queue, assert on what GitHub ends up holding. Shared by the handler tests."""

from __future__ import annotations

import asyncio
import copy
import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import update

from bot.app.server import Runtime, build_runtime, create_app
from bot.db.models import Job
from bot.runtime.services import Services
from bot.testing.deliveries import encode, load_fixture, signed_headers
from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_model import now_iso
from tests.support import WEBHOOK_SECRET, asgi_client, make_settings

REPO = "octo-org/hello-world"
INSTALLATION = 4242
_ids = itertools.count(900_000)


def _repo_fields(payload: dict[str, Any], repo: str, clone_url: str) -> None:
    owner, name = repo.split("/")
    payload["repository"].update(
        {
            "full_name": repo,
            "name": name,
            "default_branch": "main",
            "clone_url": clone_url,
        }
    )
    payload["repository"]["owner"]["login"] = owner
    payload["installation"] = {"id": INSTALLATION, "node_id": "MDIz"}


def labeled(
    *,
    number: int,
    label: str = "plan-cascade",
    sender: str = "octo-org",
    repo: str = REPO,
    clone_url: str = "",
) -> dict[str, Any]:
    """An `issues.labeled` delivery from GitHub's published example, edited."""
    payload = copy.deepcopy(load_fixture("issues.labeled.1"))
    _repo_fields(payload, repo, clone_url)
    payload["issue"]["number"] = number
    payload["label"]["name"] = label
    payload["sender"].update({"login": sender, "type": "User"})
    return payload


def commented(
    *,
    number: int,
    body: str,
    user: str = "octo-org",
    association: str = "OWNER",
    repo: str = REPO,
    comment_id: int | None = None,
    on_pr: bool = False,
    user_type: str = "User",
    clone_url: str = "",
    created_at: str | None = None,
) -> dict[str, Any]:
    """An `issue_comment.created` delivery from GitHub's published example, edited."""
    payload = copy.deepcopy(load_fixture("issue_comment.created.1"))
    _repo_fields(payload, repo, clone_url)
    payload["issue"]["number"] = number
    if not on_pr:
        payload["issue"].pop("pull_request", None)
    else:
        payload["issue"]["pull_request"] = {"url": f"http://github.test/repos/{repo}/pulls/{number}"}
    payload["comment"].update(
        {
            "id": comment_id or next(_ids),
            "body": body,
            "author_association": association,
            "created_at": created_at or now_iso(),  # GitHub stamps a comment when it is written
        }
    )
    payload["comment"]["user"].update({"login": user, "type": user_type})
    payload["comment"].pop("performed_via_github_app", None)
    payload["sender"].update({"login": user, "type": user_type})
    return payload


def pr_closed(fake: FakeGitHub, number: int, *, repo: str = REPO) -> dict[str, Any]:
    """A `pull_request.closed` delivery of pull request `number` as the fake GitHub has it now
    (merged or not), in GitHub's published example."""
    from bot.testing.fake_github_pulls import pull_data

    payload = copy.deepcopy(load_fixture("pull_request.closed.1"))
    _repo_fields(payload, repo, fake.repo(repo).clone_url)
    pull = pull_data(fake, fake.repo(repo), fake.repo(repo).pulls[number])
    payload["pull_request"] = pull
    payload["number"] = number
    return payload


class Harness:
    """The server's runtime wired to a FakeGitHub; no network, no threads."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        fake: FakeGitHub | None = None,
        execute: bool = False,
        intercept: frozenset[str] = frozenset(),
        throttle: Any = None,
        **settings: Any,
    ) -> None:
        self.tmp_path = tmp_path
        self.fake = fake or FakeGitHub(api_url="http://github.test", strict=True)
        self.fake.add_repo(REPO)
        self.settings = make_settings(tmp_path, GITHUB_API_URL=self.fake.api_url, **settings)
        if fake is None:  # GitHub names the App the settings name (its check runs carry that id)
            self.fake.app_id = int(str(self.settings.app_id))
        from bot.github.throttle import Throttle

        services = Services(
            settings=self.settings,
            extras={
                "github_transport": self.fake.transport(),
                # GitHub's pacing (1 s between writes) is tested on its own; here it would only add minutes.
                "throttle_factory": throttle
                or (lambda: Throttle(per_minute=100_000, per_hour=100_000, min_interval=0.0)),
            },
        )
        self.runtime: Runtime = build_runtime(self.settings, services=services)
        self.started: list[dict[str, Any]] = []
        self.intercepted: list[tuple[str, dict[str, Any]]] = []
        """Jobs of the `intercept` kinds that were queued (and not run)."""
        held = intercept | ({"execute_plan"} if not execute else set())
        if held:
            queue_it = services.enqueue
            assert queue_it is not None

            async def enqueue(kind: str, group: str, payload: dict[str, Any]) -> None:
                if kind not in held:
                    await queue_it(kind, group, payload)
                    return
                self.intercepted.append((kind, payload))
                if kind == "execute_plan":
                    self.started.append(payload)

            services.enqueue = enqueue
        self.app = create_app(self.settings, runtime=self.runtime, start_workers=False, migrate=False)
        self.client = asgi_client(self.app)

    async def __aenter__(self) -> Harness:
        await self.runtime.db.migrate()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
        await self.runtime.db.dispose()

    @property
    def services(self) -> Services:
        return self.runtime.services

    async def deliver(self, event: str, payload: dict[str, Any], *, delivery: str | None = None) -> int:
        """Post a signed delivery; returns the HTTP status."""
        body = encode(payload)
        headers = signed_headers(body, secret=WEBHOOK_SECRET, event=event, delivery_id=delivery)
        resp = await self.client.post("/webhook", content=body, headers=headers)
        return resp.status_code

    async def drain(self, *, timeout: float = 120, deferred: bool = False, retries: int = 0) -> list[str]:
        """Run queued jobs until none is due, and the writes nobody awaits (👀, signatures, progress)
        until none is left; returns the jobs' outcomes. Failures are re-raised; so is a job put back
        to wait for GitHub's pacing, unless `deferred`. Up to `retries` failed attempts are run
        again at once, as the queue runs them after its backoff (the job resumes from what it saved)."""
        pool = self.runtime.worker_pool(concurrency=1)
        outcomes = []
        async with asyncio.timeout(timeout):
            while True:
                job = await self.runtime.queue.claim("test-worker")
                if job is None:
                    await self.services.extras["throttles"].settle()
                    return outcomes
                outcome = await pool.run_job(job, "test-worker")
                outcomes.append(outcome)
                if outcome == "queued" and retries > 0:
                    retries -= 1
                    await self.due_now(job.id)
                    continue
                if outcome != "done" and not (deferred and outcome == "deferred"):
                    row = await self.runtime.queue.get(job.id)
                    raise AssertionError(f"job {job.kind} failed: {row.last_error if row else '?'}")

    async def due_now(self, job_id: int) -> None:
        """Make a queued job due at once (its backoff passed)."""
        async with self.runtime.db.write() as db:
            await db.execute(update(Job).where(Job.id == job_id).values(run_after=datetime.now(UTC)))

    def comments(self, number: int) -> list[str]:
        return [c.body for c in self.fake.comments(REPO, number)]

    def plan_comments(self, number: int) -> list[Any]:
        return [c for c in self.fake.comments(REPO, number) if "<!-- plan-cascade:plan -->" in c.body]
