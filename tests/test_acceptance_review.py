"""The acceptance review of a batch, in-process: the real engine on a bare git remote, GitHub
faked (it refuses review comments outside the diff), the reviewer a scripted model.

All met → a ready PR with ticked boxes and a review citing lines; one not met → the story goes
back to its agent once with the reviewer's reasoning in its prompt → still not met → a draft.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.llm import Completion, ScriptedLLM, Usage, tool_reply
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from tests.execution_support import prompt_logging_repo
from tests.harness import REPO, Harness, commented

PRD = """Greet.

```prd
version: 1
title: Greeting
summary: One file that greets.
stories:
  - id: STORY-001
    title: Hello file
    acceptance_criteria:
      - "hello.txt contains the word hello"
      - "hello.txt says who is greeted"
```
"""


def verdicts(first: str, second: str, *, evidence: str = "hello.txt has no name") -> Completion:
    answer = {
        "summary": "One file.",
        "verdicts": [
            {
                "story_id": "STORY-001",
                "criterion": 1,
                "verdict": first,
                "evidence": "line 1 says hello",
                "path": "hello.txt",
                "line": 1,
            },
            # A line that is not in the diff: the evidence stays in the review's body.
            {
                "story_id": "STORY-001",
                "criterion": 2,
                "verdict": second,
                "evidence": evidence,
                "path": "hello.txt",
                "line": 40,
            },
        ],
    }
    usage = Usage(input_tokens=3000, output_tokens=400)
    return Completion(text=json.dumps(answer), usage=usage, cost_usd=0.25, model="scripted")


def read_call() -> Completion:
    reply = tool_reply("read", {"path": "hello.txt"})
    return reply.model_copy(update={"usage": Usage(input_tokens=2000, output_tokens=50), "cost_usd": 0.1})


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off") as harness:
        prompts = prompt_logging_repo(
            harness, tmp_path, title="Greet", body=PRD, writes='echo hello >> "$2/hello.txt"\n'
        )
        harness.prompts = prompts
        yield harness


async def _run(h: Harness, llm: ScriptedLLM) -> Any:
    h.services.llm_for = lambda config, model: llm
    for body in ("/plan-cascade plan", "/plan-cascade approve"):
        await h.deliver("issue_comment", commented(number=1, body=body, user="maint", association="MEMBER"))
        await h.drain(timeout=180)
    (comment,) = h.plan_comments(1)
    state = decode_state(comment.body)
    (pull,) = h.fake.repo(REPO).pulls.values()
    return state, pull


async def test_all_met_gives_a_ready_pr_with_ticked_boxes_and_a_review_on_the_lines(h: Harness) -> None:
    llm = ScriptedLLM([read_call(), verdicts("met", "met", evidence="it greets the world")])
    state, pull = await _run(h, llm)
    assert state.status == PlanStatus.COMPLETED, state.note
    assert not pull.draft
    body = h.fake.repo(REPO).issues[pull.number].body
    assert "- [x] hello.txt contains the word hello" in body
    assert "- [x] hello.txt says who is greeted" in body
    # The reviewer read the file through its read-only tool, at the batch head.
    prompt = llm.calls[0]["messages"][0].content
    assert "hello.txt says who is greeted" in prompt and "+hello" in prompt
    assert {t.name for t in llm.calls[0]["tools"]} == {"read", "glob", "grep", "submit"}
    observation = llm.calls[1]["messages"][-1]
    assert observation.role == "tool" and "hello" in observation.content
    # One review, with a comment on the one cited line that is in the diff.
    (review,) = h.fake.repo(REPO).reviews
    assert review.state == "COMMENTED" and review.commit_id == pull.head_sha
    assert "Acceptance review of batch 1" in review.body and "it greets the world" in review.body
    assert [(c.path, c.line) for c in h.fake.repo(REPO).review_comments] == [("hello.txt", 1)]
    # Its cost counts toward the plan's budget and is shown.
    assert state.review_cost_usd == pytest.approx(0.35)
    assert state.review_tokens == 5450
    assert [c.verdict for c in state.stories["STORY-001"].acceptance] == ["met", "met"]
    assert "acceptance reviews $0.35" in body


async def test_not_met_goes_back_once_with_the_reasoning_then_stays_a_draft(h: Harness) -> None:
    llm = ScriptedLLM(
        [
            verdicts("met", "not_met", evidence="REASON-7: it greets nobody by name"),
            verdicts("met", "not_met", evidence="REASON-8: still nobody"),
        ]
    )
    state, pull = await _run(h, llm)
    runs = h.prompts.read_text().split("===\n")[:-1]
    assert len(runs) == 2, "the story ran once, then once more for the review"
    assert "REASON-7: it greets nobody by name" not in runs[0]
    assert "REASON-7: it greets nobody by name" in runs[1]
    assert len(llm.calls) == 2, "reviewed once per batch head, and never a third time"
    record = state.stories["STORY-001"]
    assert record.review_rounds == 1
    assert [c.verdict for c in record.acceptance] == ["met", "not_met"]
    assert pull.draft
    body = h.fake.repo(REPO).issues[pull.number].body
    assert "- [x] hello.txt contains the word hello" in body
    assert "- [ ] hello.txt says who is greeted — ❌ **not met**" in body and "REASON-8" in body
    assert (
        "Opened as a draft: the acceptance review found criteria not met (STORY-001 criterion 2 of 2)" in body
    )
    # The second head got its review; the roll-up check says why it is not green.
    (review,) = h.fake.repo(REPO).reviews
    assert review.commit_id == pull.head_sha and "REASON-8" in review.body
    rollup = [r for r in h.fake.repo(REPO).check_runs.values() if r.name == "plan-cascade"]
    assert rollup[-1].conclusion == "failure"
    assert "acceptance criteria not met" in rollup[-1].output["title"]


async def test_a_story_fixed_after_the_review_gives_a_ready_pr(h: Harness) -> None:
    llm = ScriptedLLM(
        [
            verdicts("met", "not_met", evidence="REASON-9: no name"),
            verdicts("met", "met", evidence="now named"),
        ]
    )
    state, pull = await _run(h, llm)
    assert not pull.draft
    assert state.stories["STORY-001"].review_rounds == 1
    assert "- [x] hello.txt says who is greeted" in h.fake.repo(REPO).issues[pull.number].body
    assert "sent STORY-001 back" in h.fake.repo(REPO).issues[pull.number].body


async def test_a_review_that_cannot_finish_leaves_the_boxes_to_the_gates(h: Harness) -> None:
    llm = ScriptedLLM(["this is not JSON"] * 20)
    state, pull = await _run(h, llm)
    assert not pull.draft
    body = h.fake.repo(REPO).issues[pull.number].body
    assert "Acceptance criteria not reviewed (step limit reached" in body
    assert "- [x] hello.txt says who is greeted" in body
    assert h.fake.repo(REPO).reviews == []
    assert state.review_tokens > 0, "what an unfinished review spent still counts"


async def test_the_review_can_be_turned_off(h: Harness) -> None:
    text = h.fake.repo(REPO).files["main"][".github/plan-cascade.yml"]
    h.fake.set_file(REPO, ".github/plan-cascade.yml", text + "publishing:\n  acceptance_review: false\n")
    llm = ScriptedLLM([])
    state, pull = await _run(h, llm)
    assert llm.calls == [] and not pull.draft and state.review_cost_usd == 0
