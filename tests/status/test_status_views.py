"""What the status page shows, as pure functions over database rows."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from bot.db.engine import Database
from bot.db.models import Delivery, Job
from bot.github.urls import web_url as github_web_url
from bot.plan.state import Approval, PlanStatus, StoryStatus, update_story, with_batch
from bot.status.access import Access, cookie_header, safe_next
from bot.status.detail import plan_detail
from bot.status.format import size
from bot.status.operations import Limits, answers_by_outcome, installations, intake, spend, work
from bot.status.plans import (
    DEFAULT_BUDGET_USD,
    Filters,
    batch_tally,
    levels,
    plan_summary,
    plan_table,
    safe_url,
)
from bot.status.reads import read_intake, read_work
from tests.status.seed import NOW, delivery, job, plan_record, running_plan

WEB = "https://github.com"


def test_links_lead_to_githubs_web_pages_and_only_over_http() -> None:
    assert github_web_url("https://api.github.com") == "https://github.com"
    assert github_web_url("https://ghe.example.com/api/v3/") == "https://ghe.example.com"
    assert github_web_url("http://127.0.0.1:9/api") == "http://127.0.0.1:9"
    assert safe_url("https://github.com/o/r/pull/1") == "https://github.com/o/r/pull/1"
    for bad in ("javascript:alert(1)", "data:text/html,x", "//evil.example/x", None, ""):
        assert safe_url(bad) is None


def test_a_plan_line_counts_stories_batches_cost_and_current_approvals() -> None:
    state = running_plan()
    stale = Approval(user="old-approver", at=NOW, via="command", plan_hash="0" * 64, revision=1)
    state = state.model_copy(update={"approvals": [*state.approvals, stale]})
    line = plan_summary(plan_record(state), state, web_url=WEB)
    assert (line.key, line.title, line.status, line.revision) == (
        "octo-org/shop#12",
        "Greetings",
        "running",
        1,
    )
    assert line.issue_url == "https://github.com/octo-org/shop/issues/12"
    assert line.page == "/status/plans/octo-org/shop/12"
    assert line.approved_by == ("maintainer",), "an approval of another revision approves nothing"
    assert (line.stories.done, line.stories.running, line.stories.waiting, line.stories.total) == (1, 1, 1, 3)
    assert (line.batches.running, line.batches.waiting, line.batches.total) == (1, 1, 2)
    assert line.cost_usd == 0.5 and line.tokens == 12_500
    assert (line.budget_usd, line.budget_known) == (DEFAULT_BUDGET_USD, False)
    known = plan_summary(plan_record(state), state, web_url=WEB, budget_usd=3.0)
    assert (known.budget_usd, known.budget_known) == (3.0, True)
    later = plan_summary(plan_record(state, at=NOW + timedelta(minutes=3)), state, web_url=WEB)
    assert later.last_activity == NOW + timedelta(minutes=3)


def test_batches_are_the_prds_levels_and_their_status_follows_the_stories() -> None:
    state = running_plan()
    assert levels(state) == state.batches_ids() == [["STORY-001", "STORY-002"], ["STORY-003"]]
    failed = update_story(state, "STORY-002", status=StoryStatus.FAILED)
    assert batch_tally(failed).failed == 1
    finished = update_story(state, "STORY-002", status=StoryStatus.SKIPPED)
    assert (batch_tally(finished).done, batch_tally(finished).waiting) == (1, 1)
    merged = with_batch(state, state.batches[1].model_copy(update={"merged": True}))
    assert batch_tally(merged).done == 1  # a merged PR is done whatever the records say


def test_the_plans_table_filters_sorts_newest_first_and_limits() -> None:
    lines = []
    for n, repo in enumerate(["octo-org/shop", "acme/api", "octo-org/shop"]):
        state = running_plan(repo, n + 1, at=NOW + timedelta(minutes=n))
        if n == 1:
            state = state.model_copy(update={"status": PlanStatus.COMPLETED})
        lines.append(plan_summary(plan_record(state), state, web_url=WEB))
    shown, matching = plan_table(lines, Filters(), limit=2)
    assert [p.key for p in shown] == ["octo-org/shop#3", "acme/api#2"] and matching == 3
    shown, matching = plan_table(lines, Filters(repo="OCTO-ORG/Shop"), limit=10)
    assert [p.key for p in shown] == ["octo-org/shop#3", "octo-org/shop#1"] and matching == 2
    shown, _ = plan_table(lines, Filters(status="completed"), limit=10)
    assert [p.key for p in shown] == ["acme/api#2"]


def test_a_plans_page_links_checks_and_prs_draws_the_graph_and_tells_the_timeline() -> None:
    state = running_plan()
    hostile = state.batches[0].model_copy(
        update={"pr_url": "javascript:alert(1)", "ci_actions": ["re-ran run 5"]}
    )
    state = with_batch(state, hostile)
    detail = plan_detail(plan_record(state), state, web_url=WEB)
    first, second = detail.batches
    assert first.pr_url == "https://github.com/octo-org/shop/pull/7", "an unsafe URL is replaced by GitHub's"
    story = first.stories[0]
    assert [(c.name, c.conclusion, c.url) for c in story.checks] == [
        ("tests", "success", "https://github.com/octo-org/shop/runs/9001"),
        ("lint", "success", "https://github.com/octo-org/shop/runs/9002"),
    ]
    assert (story.attempts, story.agent, story.model, story.cost_usd) == (
        2,
        "builtin",
        "claude-sonnet-5-5",
        0.42,
    )
    assert second.stories[0].depends_on == ("STORY-001", "STORY-002")
    graph = detail.graph
    assert {(e.source, e.target) for e in graph.edges} == {
        ("STORY-001", "STORY-003"),
        ("STORY-002", "STORY-003"),
    }
    columns = {n.id: n.x for n in graph.nodes}
    assert columns["STORY-001"] == columns["STORY-002"] < columns["STORY-003"]
    what = [e.what for e in detail.timeline]
    assert what[0].startswith("planned") and what[1].startswith("approved by maintainer via reaction")
    assert what[2].startswith("last change — running")
    assert "STORY-001: passed after 2 attempts (builtin · claude-sonnet-5-5)" in what
    assert "batch 1: pull request #7 (open)" in what and "batch 1: CI — re-ran run 5" in what
    assert all(e.at is not None for e in detail.timeline[:3]) and detail.timeline[-1].at is None


def test_the_queue_shows_waiting_kinds_oldest_first_running_leases_and_error_tails() -> None:
    from bot.status.operations import WaitingRow

    running = job(
        id=2, status="running", attempts=1, locked_by="host:123:abc", lease_until=NOW + timedelta(seconds=40)
    )
    dead = job(id=3, status="dead", attempts=5, last_error="x" * 2000 + "RuntimeError: boom")
    view = work(
        counts={"queued": 4, "running": 1, "dead": 1},
        waiting=[
            WaitingRow("webhook", 3, 3, NOW - timedelta(seconds=30)),
            WaitingRow("poll_approvals", 1, 0, NOW - timedelta(minutes=10)),
        ],
        running=[running],
        retrying=[],
        dead=[dead],
        now=NOW,
    )
    assert [w.kind for w in view.waiting] == ["poll_approvals", "webhook"]
    assert view.oldest_waiting_seconds == 600
    assert view.running[0].worker == "host:123:abc" and view.running[0].lease_left_seconds == 40
    error = view.dead[0].last_error
    assert error is not None and error.endswith("RuntimeError: boom") and len(error) <= 601


def test_intake_joins_deliveries_to_their_jobs_and_counts_this_process_answers() -> None:
    first, second = delivery("d-1"), delivery("d-2", event="ping", action=None, outcome="ignored")
    dead = job(id=9, status="dead", delivery_id="d-1", last_error="boom")
    view = intake(recent=[second, first], failed=[(first, dead)], jobs=[dead], answers={"duplicate": 2})
    assert [(d.id, d.job_status) for d in view.recent] == [("d-2", None), ("d-1", "dead")]
    assert view.failed[0].job_error == "boom"
    assert (view.answer_times, view.redeliveries) == ("not recorded", "not counted here")
    counted = intake(recent=[], failed=[], jobs=[], answers={}, redeliveries=3)
    assert counted.redeliveries == "3 since this process began"
    samples = [
        ("plan_cascade_deliveries_total", {"event": "issues", "outcome": "accepted"}, 3.0),
        ("plan_cascade_deliveries_total", {"event": "ping", "outcome": "accepted"}, 1.0),
        ("plan_cascade_deliveries_total", {"event": "unverified", "outcome": "bad_signature"}, 2.0),
        ("plan_cascade_deliveries_created", {"event": "issues", "outcome": "accepted"}, 1.7e9),
    ]
    assert answers_by_outcome(samples) == {"accepted": 4, "bad_signature": 2, "refused": 2}


def test_spend_counts_a_plans_cost_on_its_last_active_day() -> None:
    lines = []
    for n, (repo, age) in enumerate([("a/x", timedelta(hours=1)), ("a/x", timedelta(days=2)),
                                      ("b/y", timedelta(days=3)), ("b/y", timedelta(days=9))]):  # fmt: skip
        state = running_plan(repo, n + 1, at=NOW - age)
        lines.append(plan_summary(plan_record(state), state, web_url=WEB))
    rows = spend(lines, now=NOW)
    assert [(s.repo, s.today_usd, s.week_usd, s.plans_today, s.plans_week) for s in rows] == [
        ("a/x", 0.5, 1.0, 1, 2),
        ("b/y", 0.0, 0.5, 0, 1),
    ]


PAUSED = "paused now, 2 s left; 2 pause(s), 3 s in all"


def test_installations_show_what_githubs_answers_said_of_their_rate_limits() -> None:
    known = {
        7: Limits(remaining=4812, limit=5000, seen_ago_s=5, paused_for_s=1.5, pauses=2, paused_total_s=3.2),
        8: Limits(created_hour=12),
    }
    found = installations([("a/x", 7), ("a/y", 7), ("a/x", 7), ("b/z", None), ("c/w", 8)], known)
    assert [(i.id, i.repos, i.plans, i.rate_limit, i.paused) for i in found] == [
        (
            7,
            ("a/x", "a/y"),
            3,
            "4,812 of 5,000 left (just now)",
            "paused now, 2 s left; 2 pause(s), 3 s in all",
        ),
        (8, ("c/w",), 1, "12 of 500 creations in the last hour", "none"),
        (None, ("b/z",), 1, "not seen by this process", "none"),
    ]


def test_a_rate_limit_gate_keeps_the_quota_and_pauses_github_reported() -> None:
    from bot.github.pause import GateRegistry, RateLimitGate

    clock = [100.0]
    gates = GateRegistry(lambda key: RateLimitGate(str(key), clock=lambda: clock[0], wall=lambda: 1e9))
    gate = gates.get(7)
    gate.note(200, {"x-ratelimit-remaining": "4999", "x-ratelimit-limit": "5000"})
    assert gate.quota == (4999, 5000, 1e9) and gate.pauses == 0
    gate.note(403, {"retry-after": "2", "x-ratelimit-remaining": "4998", "x-ratelimit-limit": "5000"})
    assert gate.pauses == 1 and gate.paused_seconds == 2 and gate.remaining() == 2
    assert gate.quota == (4998, 5000, 1e9) and list(gates.known()) == [7]


def test_sessions_expire_resist_tampering_and_bind_their_csrf_token() -> None:
    clock = [1_000_000.0]
    access = Access("a-long-status-token-0123", clock=lambda: clock[0])
    session, sid = access.new_session()
    assert access.session_id(session) == sid and access.session_id(session + "0") is None
    issued, _, mac = session.split(".")
    assert access.session_id(f"{int(issued) + 1}.{sid}.{mac}") is None
    other = sid[:-1] + ("y" if sid.endswith("x") else "x")  # another session's id, never the same
    assert access.session_id(f"{issued}.{other}.{mac}") is None
    assert access.session_id("a-long-status-token-0123") is None
    assert (
        access.session_id(Access("another-long-token-456", clock=lambda: clock[0]).new_session()[0]) is None
    )
    assert access.new_session()[1] != sid
    assert access.csrf_ok(session, access.csrf_for(session))
    assert not access.csrf_ok(access.new_session()[0] + "x", access.csrf_for(session))
    assert not access.csrf_ok(None, access.csrf_for(""))
    assert access.bearer_ok("Bearer a-long-status-token-0123") and access.bearer_ok(
        "bearer  a-long-status-token-0123"
    )
    assert not access.bearer_ok("Basic a-long-status-token-0123") and not access.bearer_ok(None)
    clock[0] += 8 * 24 * 3600
    assert access.session_id(session) is None, "a week-old session is over"
    assert "Secure" in cookie_header("v", secure=True) and "Secure" not in cookie_header("v", secure=False)
    assert safe_next("/status/plans/a/b/1") == "/status/plans/a/b/1"
    for bad in ("https://evil.example", "//evil.example", "/status//evil", "/webhook", None):
        assert safe_next(bad) == "/status"


async def test_the_queue_and_intake_reads_on_a_real_database(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'status.db'}")
    await db.migrate()
    rows = [
        job(id=1, status="queued", at=NOW - timedelta(minutes=5)),
        job(id=2, status="queued", kind="poll_approvals", run_after=NOW + timedelta(hours=1)),
        job(id=3, status="queued", last_error="retry me", group_key="a/x#2"),
        job(id=4, status="dead", delivery_id="d-1", last_error="boom", group_key="a/x#3"),
        job(id=5, status="done", delivery_id="d-2", group_key="a/x#4"),
    ]
    async with db.write() as session:
        for row in rows:
            session.add(Job(**{c.name: getattr(row, c.name) for c in Job.__table__.columns}))
        for d in (delivery("d-1", at=NOW - timedelta(minutes=1)), delivery("d-2")):
            session.add(Delivery(**{c.name: getattr(d, c.name) for c in Delivery.__table__.columns}))
    queue = await read_work(db, now=NOW)
    assert queue.counts == {"queued": 3, "dead": 1, "done": 1}
    by_kind = {w.kind: (w.count, w.due) for w in queue.waiting}
    assert by_kind == {"webhook": (2, 2), "poll_approvals": (1, 0)}
    assert [j.id for j in queue.retrying] == [3] and [j.id for j in queue.dead] == [4]
    seen = await read_intake(db)
    assert [d.id for d in seen.recent] == ["d-2", "d-1"]
    assert {j.id for j in seen.jobs} == {4, 5} and [(d.id, j.id) for d, j in seen.failed] == [("d-1", 4)]
    await db.dispose()


async def test_plan_lines_are_remade_only_for_rows_that_changed(tmp_path: Path) -> None:
    from bot.db.models import PlanRecord
    from bot.status.lines import PlanLines
    from tests.status.seed import plan_values

    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'status.db'}")
    await db.migrate()
    first, second = running_plan("a/x", 1), running_plan("a/x", 2)
    async with db.write() as session:
        session.add(PlanRecord(**plan_values(first)))
        session.add(PlanRecord(**plan_values(second)))
        session.add(PlanRecord(**{**plan_values(running_plan("a/x", 3)), "state": {"not": "a plan"}}))
    lines = PlanLines(web_url=WEB)
    before = {line.key: line for line in (await lines.read(db)).lines}
    passed = update_story(second, "STORY-002", status=StoryStatus.PASSED)
    async with db.write() as session:
        row = await session.get(PlanRecord, ("a/x", 2))
        assert row is not None
        row.state, row.version, row.updated_at = passed.model_dump(mode="json"), 6, NOW + timedelta(seconds=1)
    rows = await lines.read(db)
    after = {line.key: line for line in rows.lines}
    assert after["a/x#1"] is before["a/x#1"], "an unchanged row is not parsed again"
    assert after["a/x#2"].stories.done == 2 and before["a/x#2"].stories.done == 1
    assert rows.unreadable == ["a/x#3"] and sorted(rows.installations) == [("a/x", 777)] * 3
    async with db.write() as session:
        await session.delete(await session.get(PlanRecord, ("a/x", 1)))
    assert [line.key for line in (await lines.read(db)).lines] == ["a/x#2"]
    await db.dispose()


async def test_the_warm_up_parses_every_plan_so_the_first_page_load_parses_none(tmp_path: Path) -> None:
    from fastapi import APIRouter

    from bot.db.models import PlanRecord
    from bot.status.http import StatusPage
    from bot.status.lines import PlanLines
    from tests.status.seed import plan_values

    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'status.db'}")
    await db.migrate()
    async with db.write() as session:
        for issue in (1, 2, 3):
            session.add(PlanRecord(**plan_values(running_plan("a/x", issue))))
    page = StatusPage(router=APIRouter(), lines=PlanLines(web_url=WEB), db=db)
    await page.warm_up()  # what `serve` starts in the background once it is up
    assert page.lines.parsed == 3
    assert len((await page.lines.read(db)).lines) == 3
    assert page.lines.parsed == 3, "the first page load parsed plans again"
    await db.dispose()


def test_sizes_read_like_ls_si() -> None:
    assert [size(n) for n in (None, 0, 812, 4_200, 123_456, 1_300_000_000, 2_500_000_000_000)] == [
        "—",
        "0 B",
        "812 B",
        "4.2 KB",
        "123 KB",
        "1.3 GB",
        "2500 GB",
    ]


def test_inline_code_marks_backticks_and_escapes_the_rest() -> None:
    from bot.status.format import inline_code

    assert str(inline_code("re-run `execution.backend: actions` <now>")) == (
        "re-run <code>execution.backend: actions</code> &lt;now&gt;"
    )
    assert str(inline_code("`<b>`")) == "<code>&lt;b&gt;</code>"
