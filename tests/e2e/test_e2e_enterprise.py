"""End to end on a GitHub Enterprise Server: the real server process, a fake GHES over HTTP (REST
only under `/api/v3`, GraphQL only at `/api/graphql`, one host for the API and the web pages), a
default branch whose ruleset requires signed commits. A plan runs to its pull requests without a
request outside the server's paths and without `github.com` in anything the bot writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_model import now_iso
from tests.e2e.world import REPO, World, make_world, payload
from tests.execution_support import git

pytestmark = pytest.mark.e2e


def _protect(fake: FakeGitHub) -> None:
    fake.add_ruleset(REPO, ["required_signatures"], include=["~DEFAULT_BRANCH"])


@pytest.fixture
def ghes(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, enterprise=True, before_start=_protect)


def test_a_plan_runs_to_its_pull_requests_on_an_enterprise_server(ghes: World) -> None:
    ghes.run_greetings()
    fake = ghes.fake
    pulls = sorted(fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    assert [(p.head_ref, p.base_ref) for p in pulls] == [
        ("plan-cascade/1/batch-1", "main"),
        ("plan-cascade/1/batch-2", "plan-cascade/1/batch-1"),
    ]
    # GitHub made (and signed) the bot's commits; their branch moved through GHES's GraphQL.
    heads = [git("rev-parse", f"plan-cascade/1/batch-{n}", cwd=ghes.remote) for n in (1, 2)]
    assert all(fake.verified(REPO, sha) for sha in heads)
    assert fake.requests_to("POST", "/api/graphql")
    # `help` links the App's page on this server.
    comment = {"id": 5550009, "body": "/plan-cascade help", "author_association": "MEMBER",
               "user": {"login": "maint", "type": "User"}, "created_at": now_iso()}  # fmt: skip
    ghes.post("issue_comment", payload("issue_comment.created.1", number=1, comment=comment,
                                       sender={"login": "maint", "type": "User"}))  # fmt: skip
    app_page = f"{fake.urls.html}/apps/{fake.app_slug}"
    ghes.wait(lambda: any(app_page in c.body for c in fake.comments(REPO, 1)))
    # Every request on the server's own paths; none the fake does not serve.
    paths = {r.path for r in fake.requests}
    assert all(p.startswith("/api/v3/") or p == "/api/graphql" for p in paths), sorted(paths)
    assert fake.unexpected == []
    # Nothing the bot wrote names github.com: what it sent GitHub, and the commits GitHub holds.
    sent = [json.dumps(r.json) for r in fake.requests if r.method in ("POST", "PATCH", "PUT") and r.json]
    written = [*sent, git("log", "--all", "--format=%an %ae %cn %ce%n%B", cwd=ghes.remote)]
    assert not [text for text in written if "github.com" in text.lower()]
