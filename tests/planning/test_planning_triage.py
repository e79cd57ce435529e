"""Intent first: a question gets an answer and no plan; an unclear task gets questions, and a
maintainer's answer (not a read-only user's) brings the plan, with the answer in its prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.llm import Completion, ScriptedLLM, tool_reply
from bot.plan.state_block import decode_state
from tests.execution_support import make_remote
from tests.harness import REPO, Harness, commented, labeled
from tests.planning.test_planning_exploration import FILES, PLAIN, PRD, SECRET_LINE


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        harness.remote = make_remote(tmp_path, FILES)
        harness.fake.repo(REPO).clone_url = f"file://{harness.remote}"
        for path, text in {**FILES, ".github/plan-cascade.yml": PLAIN}.items():
            harness.fake.set_file(REPO, path, text)
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.set_permission(REPO, "reader", "read")
        yield harness


async def _label(h: Harness, llm: ScriptedLLM) -> None:
    h.services.llm_for = lambda cfg, model: llm
    await h.deliver("issues", labeled(number=1, clone_url=f"file://{h.remote}"))
    await h.drain()


async def _comment(h: Harness, body: str, user: str, association: str) -> None:
    payload = commented(
        number=1, body=body, user=user, association=association, clone_url=f"file://{h.remote}"
    )
    await h.deliver("issue_comment", payload)
    await h.drain()


def submit(**findings: object) -> Completion:
    return tool_reply("submit", {"relevant_files": [], **findings})


async def test_a_question_gets_an_answer_and_no_plan_until_asked_anyway(h: Harness) -> None:
    h.fake.add_issue(
        REPO, title="How is the member discount computed?", body="Where does the rate come from?"
    )
    llm = ScriptedLLM(
        [
            tool_reply("read", {"path": "shop/engine/rules/loyalty.py"}),
            submit(
                intent="question",
                answer="From LOYALTY_DISCOUNT_RATE, a constant.",
                references=[
                    {"path": "shop/engine/rules/loyalty.py", "line": 1, "why": "the constant"},
                    {"path": "invented/path.py", "line": 9, "why": "made up"},
                ],
            ),
        ]
    )
    await _label(h, llm)
    assert h.plan_comments(1) == []
    reply = h.comments(1)[-1]
    assert "reads as a question, so here is an answer from the code" in reply
    assert "From LOYALTY_DISCOUNT_RATE" in reply and "shop/engine/rules/loyalty.py:1 — the constant" in reply
    assert "invented/path.py" not in reply and "/plan-cascade plan anyway" in reply
    # Asked for anyway: exploration is told it is a task, and a plan comes.
    llm.replies += [submit(intent="question", answer="still a question"), Completion(text=json.dumps(PRD))]
    await _comment(h, "/plan-cascade plan anyway", "maint", "MEMBER")
    assert len(h.plan_comments(1)) == 1
    assert "ask no questions" in llm.calls[2]["system"]


async def test_unclear_task_gets_questions_and_a_maintainers_answer_brings_the_plan(h: Harness) -> None:
    h.fake.add_issue(REPO, title="Discounts", body="Make discounts better.")
    questions = ["Should members get more than 15%?", "Does the discount apply to shipping?"]
    llm = ScriptedLLM([submit(questions=questions)])
    await _label(h, llm)
    assert h.plan_comments(1) == []
    asked = h.comments(1)[-1]
    assert "1. Should members get more than 15%?" in asked and "2. Does the discount apply" in asked
    assert "<!-- plan-cascade:questions -->" in asked
    # A read-only user's answer changes nothing.
    await _comment(h, "Make it 50% and include shipping!", "reader", "NONE")
    assert h.plan_comments(1) == [] and len(llm.calls) == 1
    # A maintainer's answer resumes planning with the answer in the planner's prompt.
    llm.replies += [submit(relevant_files=[]), Completion(text=json.dumps(PRD))]
    await _comment(h, "Members get 20%, never on shipping.", "maint", "MEMBER")
    (comment,) = h.plan_comments(1)
    planner_prompt = llm.calls[-1]["messages"][0].content
    assert "Members get 20%, never on shipping." in planner_prompt
    assert "Should members get more than 15%?" in planner_prompt
    assert "Make it 50%" not in planner_prompt
    state = decode_state(comment.body)
    assert state.clarifications is not None and "Answers by @maint" in state.clarifications
    assert "### Clarifications" in comment.body
    # Once there is a plan, a reply is just a comment again.
    calls = len(llm.calls)
    await _comment(h, "One more thought.", "maint", "MEMBER")
    assert len(llm.calls) == calls and len(h.plan_comments(1)) == 1
    # `ask` works on an issue with a plan too, and leaves the plan as it was.
    llm.replies += [tool_reply("submit", {"answer": f"It is `{SECRET_LINE}`."})]
    await _comment(h, "/plan-cascade ask what is the rate?", "maint", "MEMBER")
    assert SECRET_LINE in h.comments(1)[-1] and "**Answer** to @maint" in h.comments(1)[-1]
    assert h.plan_comments(1)[0].body == comment.body
