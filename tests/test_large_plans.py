"""A plan too large for one comment keeps its state in continuation comments, and survives."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import delete

from bot.db.models import PlanRecord
from bot.handlers.plan_io import save_plan
from bot.handlers.session import open_session
from bot.plan.state import PlanStatus, StoryStatus, new_plan, update_story
from bot.plan.state_block import parse_part, parse_reference
from bot.rendering.plan_comment import COMMENT_LIMIT, comment_size
from tests.harness import INSTALLATION, REPO, Harness
from tests.rendering.samples import big_prd


async def test_a_300_story_plan_round_trips_through_github(tmp_path: Path) -> None:
    async with Harness(tmp_path) as h:
        h.fake.add_issue(REPO, title="Huge", body="a big one")
        session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
        await session.load_config()
        state = new_plan(repo=REPO, issue=1, prd=big_prd(300), at=datetime(2026, 1, 1, tzinfo=UTC))
        saved = await save_plan(session, state, comment_id=None)
        comments = h.fake.comments(REPO, 1)
        assert comments[0].id == saved.comment_id, "the plan comes first in the timeline"
        assert all(comment_size(c.body) <= COMMENT_LIMIT for c in comments)
        ids, _digest, _signature = parse_reference(comments[0].body)
        assert ids == [c.id for c in comments[1:]] and len(ids) >= 2
        assert all(parse_part(c.body) for c in comments[1:])
        # A progress save rewrites only the parts that changed and never adds comments.
        progressed = update_story(saved.state, "STORY-001", status=StoryStatus.RUNNING)
        progressed = (await save_plan(session, progressed, comment_id=saved.comment_id)).state
        assert len(h.fake.comments(REPO, 1)) == len(comments)
        # The database is lost: the plan is rebuilt from the comments.
        async with h.runtime.db.write() as db:
            await db.execute(delete(PlanRecord))
        fresh = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
        loaded = await fresh.load_plan()
        assert loaded is not None and loaded.state == progressed
        assert loaded.state.status == PlanStatus.AWAITING_APPROVAL


async def test_a_tampered_or_foreign_part_is_not_trusted(tmp_path: Path) -> None:
    async with Harness(tmp_path) as h:
        h.fake.add_issue(REPO, title="Huge", body="a big one")
        session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
        await session.load_config()
        state = new_plan(repo=REPO, issue=1, prd=big_prd(300), at=datetime(2026, 1, 1, tzinfo=UTC))
        saved = await save_plan(session, state, comment_id=None)
        part = h.fake.comments(REPO, 1)[1]
        part.body = part.body.replace("A", "B", 1)
        async with h.runtime.db.write() as db:
            await db.execute(delete(PlanRecord))
        fresh = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
        assert await fresh.load_plan() is None
        assert saved.comment_id
