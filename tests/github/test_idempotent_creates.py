"""Every create is made once, even when GitHub answers 502 (or times out) after making it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from bot.errors import GitHubError
from bot.github import GitHubKitPort, token_port
from bot.github.idempotent import matching_check_runs, matching_comment, replays_safely
from bot.github.identity import Identity, known
from bot.github.models import CheckRun, Comment
from bot.metrics import Metrics
from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_actions import add_check_run
from bot.testing.fake_github_model import FakeReview

REPO = "octo/widgets"
SHA = "a" * 40


def _own(fake: FakeGitHub) -> Identity:
    """The App the fake's clients write as (its id, slug and bot)."""
    return Identity(app_id=fake.app_id, app_slug=fake.app_slug, bot_login=fake.actor)


def _port(fake: FakeGitHub, metrics: Metrics | None = None, **kwargs: Any) -> GitHubKitPort:
    """The port as the server builds it: githubkit's default (bounded) retry is on, and it knows its App."""
    kwargs.setdefault("identity", known(_own(fake)))
    kwargs.setdefault("transport", fake.transport())
    return token_port("t", base_url=fake.api_url, metrics=metrics, **kwargs)


def _count(metrics: Metrics, name: str, kind: str) -> float:
    return metrics.registry.get_sample_value(name, {"kind": kind}) or 0.0


async def test_comment_answered_502_after_the_work_is_made_once(fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    fake.faults.fail("POST", rf"/repos/{REPO}/issues/\d+/comments", when="after")
    metrics = Metrics()
    made = await _port(fake, metrics).create_issue_comment(REPO, issue.number, body="plan <!-- m -->")
    assert [c.id for c in fake.comments(REPO, issue.number)] == [made.id]
    assert _count(metrics, "plan_cascade_github_adopted_total", "comment") == 1


async def test_check_run_answered_502_after_the_work_is_made_once(fake: FakeGitHub) -> None:
    fake.add_commit(REPO, SHA)
    fake.faults.fail("POST", rf"/repos/{REPO}/check-runs", when="after")
    run = await _port(fake).create_check_run(
        REPO, name="plan-cascade / S1 / test", head_sha=SHA, status="in_progress", external_id="7:S1:test:1"
    )
    assert list(fake.repo(REPO).check_runs) == [run.id]
    assert run.external_id == "7:S1:test:1"


async def test_pull_request_answered_502_after_the_work_is_made_once(fake: FakeGitHub) -> None:
    fake.add_branch(REPO, "trunk")
    fake.add_branch(REPO, "cascade/7/batch-1")
    fake.faults.fail("POST", rf"/repos/{REPO}/pulls", when="after")
    pr = await _port(fake).create_pull_request(
        REPO, title="Batch 1", body="b", head="cascade/7/batch-1", base="trunk"
    )
    assert list(fake.repo(REPO).pulls) == [pr.number]


async def test_an_existing_pull_request_is_the_answer(fake: FakeGitHub) -> None:
    fake.add_branch(REPO, "trunk")
    fake.add_branch(REPO, "cascade/7/batch-1")
    existing = fake.add_pull(REPO, head="cascade/7/batch-1", base="trunk")
    pr = await _port(fake).create_pull_request(
        REPO, title="Batch 1", body="b", head="cascade/7/batch-1", base="trunk"
    )
    assert pr.number == existing.number and list(fake.repo(REPO).pulls) == [existing.number]


async def test_review_answered_502_after_the_work_is_made_once(fake: FakeGitHub) -> None:
    fake.add_commit(REPO, SHA)
    pull = fake.add_pull(REPO, head="cascade/7/batch-1", base="trunk", user="alice")
    fake.faults.fail("POST", rf"/repos/{REPO}/pulls/\d+/reviews", when="after")
    review = await _port(fake).create_review(REPO, pull.number, commit_id=SHA, body="ok <!-- r -->")
    assert [r.id for r in fake.repo(REPO).reviews] == [review.id]


async def test_issue_answered_502_after_the_work_is_made_once(fake: FakeGitHub) -> None:
    fake.faults.fail("POST", rf"/repos/{REPO}/issues", when="after")
    issue = await _port(fake).create_issue(REPO, title="Story", body="b")
    assert list(fake.repo(REPO).issues) == [issue.number]


async def test_labels_and_reactions_answered_502_after_the_work_are_sets(fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    fake.faults.fail("POST", rf"/repos/{REPO}/issues/\d+/(labels|reactions)", when="after", times=2)
    port = _port(fake, auto_retry=False)
    with pytest.raises(GitHubError):
        await port.add_labels(REPO, issue.number, ["plan"])
    with pytest.raises(GitHubError):
        await port.add_issue_reaction(REPO, issue.number, "eyes")
    await port.add_labels(REPO, issue.number, ["plan"])
    await port.add_issue_reaction(REPO, issue.number, "eyes")
    assert fake.repo(REPO).issues[issue.number].labels == ["plan"]
    assert len(fake.repo(REPO).issue_reactions[issue.number]) == 1


async def test_a_timeout_after_the_work_adopts_what_was_made(fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    inner = fake.transport()
    dropped: list[str] = []

    class DropsFirstAnswer(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await inner.handle_async_request(request)
            if request.method == "POST" and not dropped:
                dropped.append(request.url.path)
                raise httpx.ReadTimeout("timed out", request=request)
            return response

    port = token_port("t", base_url=fake.api_url, transport=DropsFirstAnswer(), identity=known(_own(fake)))
    made = await port.create_issue_comment(REPO, issue.number, body="hello")
    assert dropped and [c.id for c in fake.comments(REPO, issue.number)] == [made.id]


async def test_502_before_the_work_is_sent_again(fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    fake.faults.fail("POST", rf"/repos/{REPO}/issues/\d+/comments", when="before", times=2)
    metrics = Metrics()
    port = _port(fake, metrics, create_delays=(0, 0))
    made = await port.create_issue_comment(REPO, issue.number, body="hello")
    assert [c.id for c in fake.comments(REPO, issue.number)] == [made.id]
    assert _count(metrics, "plan_cascade_github_server_retries_total", "comment") == 2


async def test_a_refusal_is_not_sent_again(fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    fake.fail_next("POST", rf"/repos/{REPO}/issues/\d+/comments", status=422, message="Validation Failed")
    with pytest.raises(GitHubError) as caught:
        await _port(fake).create_issue_comment(REPO, issue.number, body="hello")
    assert caught.value.status == 422
    assert len(fake.requests_to("POST", rf"/repos/{REPO}/issues/\d+/comments")) == 1


async def test_a_check_run_copy_that_slipped_through_is_completed(fake: FakeGitHub) -> None:
    """GitHub failed the create after making it, and the look for it failed too: the copy is
    made, then the first one is found and completed."""
    fake.add_commit(REPO, SHA)
    fake.faults.fail("POST", rf"/repos/{REPO}/check-runs", when="after")
    fake.faults.fail("GET", rf"/repos/{REPO}/commits/{SHA}/check-runs", when="before")
    port = _port(fake, auto_retry=False, create_delays=(0,))
    run = await port.create_check_run(
        REPO, name="plan-cascade", head_sha=SHA, status="in_progress", external_id="batch-1"
    )
    runs = fake.repo(REPO).check_runs
    assert len(runs) == 2 and runs[run.id].status == "in_progress"
    (other,) = [r for r in runs.values() if r.id != run.id]
    assert other.status == "completed" and other.conclusion == "neutral"


def test_githubkit_never_resends_a_creating_post() -> None:
    assert not replays_safely("POST", f"/repos/{REPO}/check-runs")
    assert not replays_safely("POST", f"/repos/{REPO}/issues/1/comments")
    assert not replays_safely("POST", f"/repos/{REPO}/pulls")
    assert replays_safely("POST", f"/repos/{REPO}/issues/1/labels")
    assert replays_safely("PATCH", f"/repos/{REPO}/check-runs/5")
    assert replays_safely("GET", f"/repos/{REPO}")


def test_only_a_recent_comment_of_this_apps_bot_with_the_same_body_is_adopted() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    after = now - timedelta(minutes=10)
    own = Identity(app_id=7, app_slug="pc", bot_login="pc[bot]")

    def comment(cid: int, body: str, login: str, age: timedelta, via: int | None = None) -> Comment:
        kind = "Bot" if login.endswith("[bot]") else "User"
        return Comment(
            id=cid, body=body, user_login=login, user_type=kind, created_at=now - age, via_app_id=via
        )

    spoof = comment(1, "hello", "mallory", timedelta(0))
    old = comment(2, "hello", "pc[bot]", timedelta(hours=1))
    other = comment(3, "bye", "pc[bot]", timedelta(0))
    workflow = comment(5, "hello", "github-actions[bot]", timedelta(0), via=15368)
    on_our_app = comment(6, "hello", "mallory", timedelta(0), via=7)  # a person's token of our App
    found = [spoof, old, other, workflow, on_our_app]
    assert matching_comment(found, body="hello", after=after, own=own) is None
    mine = comment(4, "hello\n", "pc[bot]", timedelta(seconds=3), via=7)
    assert matching_comment([*found, mine], body="hello", after=after, own=own) == mine
    renamed = comment(7, "hello", "pc-renamed[bot]", timedelta(0), via=7)  # the App renamed since
    assert matching_comment([*found, renamed], body="hello", after=after, own=own) == renamed


def test_only_a_check_run_of_this_app_is_adopted() -> None:
    def run(rid: int, app_id: int, slug: str) -> CheckRun:
        return CheckRun(id=rid, name="gate", head_sha=SHA, external_id="x", app_id=app_id, app_slug=slug)

    runs = [run(1, 7, "pc"), run(2, 15368, "github-actions"), run(3, 99, "pc")]
    by_id = Identity(app_id=7, app_slug="pc")
    assert [
        r.id for r in matching_check_runs(runs, name="gate", head_sha=SHA, external_id="x", own=by_id)
    ] == [1]
    by_slug = Identity(app_slug="github-actions")  # the Action on GITHUB_TOKEN: no App id to go by
    chosen = matching_check_runs(runs, name="gate", head_sha=SHA, external_id="x", own=by_slug)
    assert [r.id for r in chosen] == [2]
    assert matching_check_runs(runs, name="gate", head_sha=SHA, external_id="x", own=Identity()) == []


async def test_a_workflow_tokens_check_run_is_never_adopted_after_a_502(fake: FakeGitHub) -> None:
    """Anything with `checks: write` can make a run with our name, commit and external_id first."""
    fake.add_commit(REPO, SHA)
    name, external_id = "plan-cascade / S1 / test", "7:S1:test:1"
    planted = add_check_run(fake, REPO, name=name, head_sha=SHA, external_id=external_id)
    fake.faults.fail("POST", rf"/repos/{REPO}/check-runs", when="before")
    port = _port(fake, create_delays=(0,))
    run = await port.create_check_run(
        REPO, name=name, head_sha=SHA, status="in_progress", external_id=external_id
    )
    assert run.id != planted.id and run.app_id == fake.app_id
    runs = fake.repo(REPO).check_runs
    assert sorted(runs) == [planted.id, run.id] and runs[run.id].status == "in_progress"
    await port.update_check_run(REPO, run.id, conclusion="success")  # the bot's own run, its to finish


async def test_a_check_run_planted_in_the_race_leaves_the_bots_own_run_alone(fake: FakeGitHub) -> None:
    """GitHub made the bot's run and answered 502; meanwhile a workflow made a newer look-alike."""
    fake.add_commit(REPO, SHA)
    name, external_id = "plan-cascade / S1 / test", "7:S1:test:1"
    fake.faults.fail("POST", rf"/repos/{REPO}/check-runs", when="after")
    inner, planted = fake.transport(), []

    class PlantsAfterTheCreate(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await inner.handle_async_request(request)
            if request.method == "POST" and request.url.path.endswith("/check-runs") and not planted:
                planted.append(add_check_run(fake, REPO, name=name, head_sha=SHA, external_id=external_id))
            return response

    port = _port(fake, transport=PlantsAfterTheCreate(), create_delays=(0,))
    run = await port.create_check_run(
        REPO, name=name, head_sha=SHA, status="in_progress", external_id=external_id
    )
    runs = fake.repo(REPO).check_runs
    (ours,) = [r for r in runs.values() if r.app_slug is None]
    assert run.id == ours.id != planted[0].id
    assert ours.status == "in_progress" and ours.conclusion is None  # not marked a duplicate
    assert runs[planted[0].id].status == "in_progress"


async def test_another_bots_comment_with_the_same_body_is_never_adopted(fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    planted = fake.add_comment(REPO, issue.number, body="Plan approved.", user="github-actions[bot]")
    fake.faults.fail("POST", rf"/repos/{REPO}/issues/\d+/comments", when="before")
    made = await _port(fake, create_delays=(0,)).create_issue_comment(
        REPO, issue.number, body="Plan approved."
    )
    assert made.id != planted.id and made.user_login == fake.actor
    assert [c.id for c in fake.comments(REPO, issue.number)] == [planted.id, made.id]


async def test_another_bots_review_with_the_same_body_is_never_adopted(fake: FakeGitHub) -> None:
    fake.add_commit(REPO, SHA)
    pull = fake.add_pull(REPO, head="cascade/7/batch-1", base="trunk", user="alice")
    planted = FakeReview(1, pull.number, "ci-helper[bot]", "ok <!-- r -->", "COMMENTED", SHA)
    fake.repo(REPO).reviews.append(planted)
    fake.faults.fail("POST", rf"/repos/{REPO}/pulls/\d+/reviews", when="before")
    review = await _port(fake, create_delays=(0,)).create_review(
        REPO, pull.number, commit_id=SHA, body="ok <!-- r -->"
    )
    assert review.id != planted.id and review.user_login == fake.actor


async def test_another_bots_issue_with_the_same_title_and_body_is_never_adopted(fake: FakeGitHub) -> None:
    planted = fake.add_issue(REPO, title="Story", body="b", user="github-actions[bot]")
    fake.faults.fail("POST", rf"/repos/{REPO}/issues", when="before")
    issue = await _port(fake, create_delays=(0,)).create_issue(REPO, title="Story", body="b")
    assert issue.number != planted.number and issue.user_login == fake.actor


async def test_a_port_that_does_not_know_its_app_adopts_nothing(fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    fake.faults.fail("POST", rf"/repos/{REPO}/issues/\d+/comments", when="after")
    port = token_port("t", base_url=fake.api_url, transport=fake.transport(), create_delays=(0,))
    await port.create_issue_comment(REPO, issue.number, body="hello")
    assert len(fake.comments(REPO, issue.number)) == 2  # a second copy, never someone else's
