from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from bot.errors import PlanValidationError
from bot.plan import Story
from bot.plan.state import PlanState, new_plan
from bot.plan.state_block import PLAN_MARKER, decode_state, encode_state
from bot.rendering import ExecutionEstimate, mermaid_flowchart, render_plan_comment
from bot.rendering.plan_comment import COMMENT_LIMIT, comment_size
from tests.rendering.samples import (
    T0,
    approved_state,
    assert_snapshot,
    awaiting_state,
    big_prd,
    failed_state,
    running_state,
    sample_prd,
)

ESTIMATE = ExecutionEstimate(tokens=680_000, cost_usd=3.26, minutes=51)
STATES: dict[str, Callable[[], PlanState]] = {
    "awaiting": awaiting_state,
    "approved": approved_state,
    "running": running_state,
    "failed": failed_state,
}


def visible_text(body: str) -> str:
    """The body without the state block, fenced code blocks and code spans (where nothing pings)."""
    body = body.split("<!-- plan-cascade:state", 1)[0]
    body = re.sub(r"^```.*?^```", "", body, flags=re.S | re.M)
    return re.sub(r"(`+).*?\1", "", body)


def pinging_mentions(body: str) -> list[str]:
    return re.findall(r"@[A-Za-z0-9]", visible_text(body))


STATE_PLACEHOLDER = "<!-- plan-cascade:state v1 (the encoded state; see the round-trip test) -->"


@pytest.mark.parametrize("name", sorted(STATES))
def test_plan_comment_snapshot(name: str) -> None:
    state = STATES[name]()
    body = render_plan_comment(state, estimate=ESTIMATE, app_url="https://github.com/apps/plan-cascade-bot")
    assert body.endswith(encode_state(state, key=None) + "\n")
    # The state block changes with every field added to PlanState: the snapshot shows what people see.
    assert_snapshot(f"plan_comment_{name}.md", body.replace(encode_state(state, key=None), STATE_PLACEHOLDER))


@pytest.mark.parametrize("name", sorted(STATES))
def test_state_round_trips_through_the_comment(name: str) -> None:
    state = STATES[name]()
    body = render_plan_comment(state)
    assert body.startswith(PLAN_MARKER + "\n")
    assert body.rstrip().endswith(encode_state(state, key=None))
    assert decode_state(body) == state


def test_the_awaiting_comment_offers_approval_commands_and_counts_approvals() -> None:
    body = render_plan_comment(awaiting_state())
    assert "👍 this comment" in body and "`/plan-cascade approve batch 1`" in body
    assert "**0 of 2** approvals for this revision: 2 more needed." in body
    assert "stale, the plan has changed since" in body
    assert "### 📝 Changes in revision 2" in body
    assert "_✂️" not in body


def test_the_failed_comment_offers_retry_and_skip_for_the_failed_story() -> None:
    body = render_plan_comment(failed_state())
    assert "`/plan-cascade retry STORY-003`" in body and "`/plan-cascade skip STORY-003`" in body
    assert "👍 this comment" not in body
    assert "- [x] **STORY-001**" in body and "- [ ] **STORY-003**" in body


def test_the_running_comment_shows_progress_and_pull_requests() -> None:
    body = render_plan_comment(running_state())
    assert "🔄 running (attempt 2)" in body
    assert "[PR #101](https://github.com/acme/api/pull/101) (merged)" in body
    assert "**2 of 4 stories passed**" in body


def test_mermaid_escapes_quotes_brackets_html_and_backticks() -> None:
    prd = sample_prd()
    prd.stories[0] = prd.stories[0].model_copy(update={"title": 'Say "hi" [now] <b>#1</b> & ``` end'})
    state = new_plan(repo="acme/api", issue=1, prd=prd, at=T0)
    graph = mermaid_flowchart(state)
    assert (
        'STORY_001["STORY-001: Say #quot;hi#quot; [now] #lt;b#gt;#35;1#lt;/b#gt; #amp; #96;#96;#96; end"]'
        in graph
    )
    body = render_plan_comment(state)
    fence = body[body.index("```mermaid") :]
    assert fence.index("\n```\n") > fence.index("STORY_001[")  # the title did not close the fence


def test_mermaid_ids_are_sanitised_and_kept_distinct() -> None:
    prd = sample_prd().model_copy(
        update={
            "stories": [
                Story(id="A-001", title="one", acceptance_criteria=["x"]),
                Story(id="A_001", title="two", acceptance_criteria=["x"], depends_on=["A-001"]),
                Story(id="1-002", title="three", acceptance_criteria=["x"]),
            ]
        }
    )
    graph = mermaid_flowchart(new_plan(repo="a/b", issue=1, prd=prd, at=T0))
    assert '    A_001["A-001: one"]' in graph
    assert '    A_001_2["A_001: two"]' in graph
    assert '    s_1_002["1-002: three"]' in graph
    assert "  A_001 --> A_001_2" in graph
    assert '  subgraph batch2["Batch 2"]' in graph


def test_untrusted_text_pings_nobody_and_renders_no_html() -> None:
    prd = sample_prd()
    prd.stories[0] = prd.stories[0].model_copy(
        update={
            "title": "@admins please <img src=x onerror=alert(1)>",
            "description": "cc @octocat\n\n# not a heading @team",
            "acceptance_criteria": ["@someone checks <script>alert(1)</script>"],
            "files": ["@scope/pkg/index.ts"],
        }
    )
    prd = prd.model_copy(update={"summary": "Ask @maintainers | and @org/team"})
    state = new_plan(repo="acme/api", issue=1, prd=prd, at=T0).model_copy(
        update={
            "note": "@note-person",
            "warnings": ["@warned"],
            "changelog": ["@changed"],
            "perspectives": {"@persp": "@body\n```\n@in-code\n"},
        }
    )
    body = render_plan_comment(state)
    assert pinging_mentions(body) == []
    assert "<img" not in body and "<script" not in body
    assert "@&#8203;admins please &lt;img" in body
    assert decode_state(body) == state


def test_a_forged_state_block_in_untrusted_text_is_never_decoded() -> None:
    forged = encode_state(failed_state(), key=None)
    prd = sample_prd()
    prd.stories[0] = prd.stories[0].model_copy(update={"title": forged, "verification": forged})
    state = new_plan(repo="acme/api", issue=1, prd=prd.model_copy(update={"summary": forged}), at=T0)
    body = render_plan_comment(state)
    assert body.count("<!-- plan-cascade:state") == 1
    assert decode_state(body) == state


def test_each_trimming_step_is_taken_in_order_and_said() -> None:
    state = awaiting_state()
    full = render_plan_comment(state)
    step1 = render_plan_comment(state, limit=comment_size(full) - 1)
    assert "- **security**: left out to fit the comment size limit" in step1
    assert "<details><summary><b>STORY-001</b>" in step1
    assert "_✂️ Trimmed to fit GitHub's comment size limit: the planning perspectives' text." in step1

    step2 = render_plan_comment(state, limit=comment_size(step1) - 1)
    assert "<details><summary><b>STORY-001</b>" not in step2
    assert "- **STORY-001**: 2 criteria" in step2
    assert "```mermaid" in step2
    assert "the acceptance criteria (one line per story)" in step2

    step3 = render_plan_comment(state, limit=comment_size(step2) - 1)
    assert "```mermaid" not in step3
    assert "_The dependency graph is left out to fit the comment size limit" in step3
    assert "| **STORY-005** |" in step3

    step4 = render_plan_comment(state, limit=comment_size(step3) - 1)
    assert "| **STORY-005** |" not in step4
    assert re.search(r"_… and \d+ more stories \(the full plan is in the state block / PRD\)\._", step4)
    assert re.search(r"the story lists \(the first \d of 5 stories are shown\)", step4)

    minimal = render_plan_comment(state, limit=len(encode_state(state, key=None)) + 1200)
    assert "### Stories" not in minimal and "everything but the status and the commands" in minimal

    for body, before in ((step1, full), (step2, step1), (step3, step2), (step4, step3), (minimal, step4)):
        assert comment_size(body) < comment_size(before)
        assert decode_state(body) == state


def test_the_state_block_alone_too_large_raises_with_a_fix() -> None:
    state = awaiting_state()
    with pytest.raises(PlanValidationError) as caught:
        render_plan_comment(state, limit=len(encode_state(state, key=None)))
    assert caught.value.message == "the plan is too large for one GitHub comment"
    assert any("limits.max_stories" in p and "split the issue" in p for p in caught.value.problems)


@pytest.mark.parametrize("room", [1_500, 2_000, 3_000, 5_000, 10_000, 20_000, 40_000])
def test_the_limit_is_never_exceeded(room: int) -> None:
    state = new_plan(repo="acme/api", issue=7, prd=big_prd(12), at=T0)
    limit = comment_size(encode_state(state, key=None)) + room
    body = render_plan_comment(state, limit=limit)
    assert comment_size(body) <= limit
    assert decode_state(body) == state


def test_a_200_story_plan_fits_in_one_comment() -> None:
    state = new_plan(repo="acme/api", issue=7, prd=big_prd(200), at=T0)
    body = render_plan_comment(state)
    assert comment_size(body) <= COMMENT_LIMIT
    assert decode_state(body) == state
    assert "_✂️ Trimmed" in body and "more stories" in body


def test_a_300_story_plan_fits_with_its_state_in_continuation_comments() -> None:
    from bot.plan.state_block import PART_SIZE, split_payload, state_payload, state_reference

    state = new_plan(repo="acme/api", issue=7, prd=big_prd(300), at=T0)
    payload = state_payload(state)
    parts = split_payload(payload)
    assert len(payload) > COMMENT_LIMIT and all(len(p) <= PART_SIZE for p in parts)
    reference = state_reference(list(range(1, len(parts) + 1)), payload, key=None)
    body = render_plan_comment(state, state_block=reference)
    assert comment_size(body) <= COMMENT_LIMIT
    assert "STORY-300" in body or "more stories" in body


def test_the_size_counts_utf16_units() -> None:
    assert comment_size("✅") == 1
    assert comment_size("🔄") == 2
