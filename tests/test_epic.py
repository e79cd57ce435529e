"""Mega plans: the epic's features become child issues, planned on their own, run in order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.handlers.epic import feature_order, parse_child_marker
from bot.llm import Completion, Usage
from bot.llm.scripted import ScriptedLLM
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from bot.planning.epic import Epic
from tests.harness import REPO, Harness, commented, labeled, pr_closed


def story(sid: str, title: str, deps: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": sid,
        "title": title,
        "depends_on": deps or [],
        "acceptance_criteria": [f"{title.lower()} passes its 3 unit tests"],
    }


def schema_answer(call: dict[str, Any]) -> Completion:
    """Answers by the schema asked for: an epic PRD for the parent, a small PRD for each child."""
    schema_name = call["schema_name"]
    text = "\n".join(m.content for m in call["messages"])
    if schema_name == "epic":
        answer: dict[str, Any] = {
            "features": [
                {"id": "FEAT-002", "title": "Billing API", "depends_on": ["FEAT-001"]},
                {"id": "FEAT-001", "title": "Billing data model"},
            ]
        }
    elif schema_name == "quality_review":
        answer = {"verdict": "good", "fixes": [], "warnings": []}
    elif "Billing platform" in text and "Part of #" not in text:
        answer = {
            "version": 1,
            "title": "Billing platform",
            "summary": "Everything billing.",
            "strategy": "mega",
            "complexity": "high",
            "risk": "high",
            "stories": [story("STORY-001", "Data model"), story("STORY-002", "API", ["STORY-001"])],
        }
    else:
        answer = {
            "version": 1,
            "title": "A feature",
            "summary": "One feature.",
            "strategy": "hybrid",
            "stories": [story("STORY-001", "Do it")],
        }
    return Completion(
        text=json.dumps(answer),
        tool_calls=[],
        usage=Usage(input_tokens=10, output_tokens=10),
        cost_usd=0.0,
        model="fake",
        stop_reason="end_turn",
    )


def schema_llm() -> ScriptedLLM:
    """A model that answers every planning call by its schema (see `schema_answer`)."""
    return ScriptedLLM(respond=schema_answer, model="fake", provider="fake")


def test_the_roll_up_neutralises_what_a_model_wrote() -> None:
    from bot.handlers.epic import rollup_body

    body = rollup_body(1, [(2, "Ping @octo-org | <img src=x>", None)])
    row = body.splitlines()[5]
    assert row == "| #2 | Ping @&#8203;octo-org \\| &lt;img src=x&gt; | not planned yet | — |"


def test_feature_order_puts_dependencies_first() -> None:
    epic = Epic.model_validate(
        {
            "features": [
                {"id": "FEAT-002", "title": "b", "depends_on": ["FEAT-001"]},
                {"id": "FEAT-001", "title": "a"},
            ]
        }
    )
    assert feature_order(epic.features) == ["FEAT-001", "FEAT-002"]


async def test_an_epic_becomes_child_issues_planned_and_run_in_order(tmp_path: Path) -> None:
    async with Harness(tmp_path) as h:
        llm = schema_llm()
        h.services.llm_for = lambda config, model: llm
        h.fake.add_issue(
            REPO, title="Billing platform", body="A whole billing platform: data model, then API."
        )
        await h.deliver("issues", labeled(number=1, sender="octo-org"))
        await h.drain()
        parent = decode_state(h.plan_comments(1)[0].body)
        assert parent.children == [2, 3] and parent.prd.strategy.value == "mega"
        model_issue, api_issue = h.fake.repo(REPO).issues[2], h.fake.repo(REPO).issues[3]
        assert model_issue.title == "Billing data model" and "plan-cascade" in model_issue.labels
        assert parse_child_marker(api_issue.body) == (1, [2]) and "#2" in api_issue.body
        assert "epic" in h.comments(1)[-1] and "#2" in h.comments(1)[-1]
        # Each child got its own plan.
        assert len(h.plan_comments(2)) == 1 and len(h.plan_comments(3)) == 1
        # The epic itself cannot be approved; a child that waits for another does not start.
        await h.deliver("issue_comment", commented(number=1, body="/plan-cascade approve"))
        await h.deliver("issue_comment", commented(number=3, body="/plan-cascade approve"))
        await h.drain()
        assert (
            "epic" in h.comments(1)[-1]
            and decode_state(h.plan_comments(1)[0].body).status != PlanStatus.APPROVED
        )
        assert decode_state(h.plan_comments(3)[0].body).status == PlanStatus.APPROVED
        assert h.started and h.started[-1]["issue"] == 3  # queued; the job itself checks the order


async def test_a_child_waits_for_the_children_it_needs(tmp_path: Path) -> None:
    from bot.handlers.epic import child_marker, waiting_for
    from bot.handlers.session import open_session

    async with Harness(tmp_path) as h:
        h.fake.add_issue(REPO, title="first", body="x")
        h.fake.add_issue(REPO, title="second", body="y\n" + child_marker(9, [1]))
        session = await open_session(h.services, repo=REPO, issue=2, installation_id=4242)
        assert await waiting_for(session) == ["#1"], "issue 1 has no completed plan yet"


async def test_approving_an_approved_plan_starts_it_again(tmp_path: Path) -> None:
    from tests.test_github_flow import PRD

    async with Harness(tmp_path) as h:
        h.fake.add_issue(REPO, title="Rate limiting", body=PRD)
        await h.deliver("issues", labeled(number=1, sender="octo-org"))
        await h.drain()  # the plan exists before anyone can approve what it says
        await h.deliver("issue_comment", commented(number=1, body="/plan-cascade approve"))
        await h.drain()
        assert len(h.started) == 1
        # e.g. a child that was told to wait for the children it needs: approve again, it starts.
        await h.deliver("issue_comment", commented(number=1, body="/plan-cascade approve"))
        await h.drain()
        assert len(h.started) == 2 and h.started[0] == h.started[1]


async def test_a_child_runs_on_its_dependencies_merged_code_and_the_epic_keeps_a_roll_up(
    tmp_path: Path,
) -> None:
    """#3 needs #2: approved first, it waits for #2's PR to be *merged* and then starts by itself."""
    from tests.execution_support import agent_script, make_remote

    async with Harness(tmp_path, execute=True) as h:
        llm = schema_llm()
        h.services.llm_for = lambda config, model: llm
        h.fake.repo(REPO).clone_url = f"file://{make_remote(tmp_path)}"
        h.fake.set_permission(REPO, "maint", "maintain")
        script = agent_script(tmp_path, "ok.sh", 'echo done > "$2/$(date +%s%N).txt"\n')
        h.fake.set_file(
            REPO,
            ".github/plan-cascade.yml",
            f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
            "  sandbox: none\ngates:\n  detect: false\n  strict: true\nllm:\n  quality_review: false\n",
        )
        h.fake.add_issue(
            REPO, title="Billing platform", body="A whole billing platform: data model, then API."
        )
        await h.deliver("issues", labeled(number=1, sender="maint"))
        await h.drain()
        # Each child was planned with the epic's context.
        child_prompts = [p for p in llm.prompts() if "Part of #1" in p]
        assert child_prompts and all(
            "one feature of the epic #1 (Billing platform): Everything billing." in p for p in child_prompts
        )

        def say(number: int, body: str):
            return h.deliver(
                "issue_comment", commented(number=number, body=body, user="maint", association="MEMBER")
            )

        def pulls_of(issue: int) -> list:
            return [
                p for p in h.fake.repo(REPO).pulls.values() if p.head_ref.startswith(f"plan-cascade/{issue}/")
            ]

        await say(3, "/plan-cascade approve")
        await h.drain(timeout=180)
        assert pulls_of(3) == [] and "waits for #2 to be merged" in h.comments(3)[-1]
        await say(2, "/plan-cascade approve")
        await h.drain(timeout=180)
        (pull,) = pulls_of(2)
        assert decode_state(h.plan_comments(2)[0].body).status == PlanStatus.COMPLETED
        # Completed is not merged: #3 still waits, even when approved again.
        await say(3, "/plan-cascade approve")
        await h.drain(timeout=180)
        assert pulls_of(3) == []
        # #2's PR is merged: #3 starts by itself.
        h.fake.merge_pull(REPO, pull.number)
        payload = pr_closed(h.fake, pull.number)
        await h.deliver("pull_request", payload)
        await h.drain(timeout=180)
        assert len(pulls_of(3)) == 1
        assert decode_state(h.plan_comments(3)[0].body).status == PlanStatus.COMPLETED
        # One roll-up on the epic, edited as the children moved.
        from bot.handlers.epic import ROLLUP_MARKER

        rollups = [c for c in h.comments(1) if c.startswith(ROLLUP_MARKER)]
        assert len(rollups) == 1
        assert f"| #2 | A feature | merged | #{pull.number} (merged) |" in rollups[0]
        assert f"| #3 | A feature | completed | #{pulls_of(3)[0].number} |" in rollups[0]


REVISED_EPIC = """/plan-cascade revise

```prd
version: 1
title: Billing platform
summary: Everything billing, with invoices instead of an API.
strategy: mega
stories:
  - id: STORY-001
    title: Data model
    acceptance_criteria: ["the data model passes its 3 unit tests"]
  - id: STORY-002
    title: Invoices
    depends_on: [STORY-001]
    acceptance_criteria: ["an invoice is rendered for a paid order"]
features:
  - id: FEAT-001
    title: Billing data model
    stories: [STORY-001]
  - id: FEAT-003
    title: Invoices
    depends_on: [FEAT-001]
    stories: [STORY-002]
```
"""


async def test_revising_an_epic_keeps_its_children_and_opens_only_new_features(tmp_path: Path) -> None:
    """A revised epic within one repository: no second set of children (redelivered too)."""
    async with Harness(tmp_path) as h:
        llm = schema_llm()
        h.services.llm_for = lambda config, model: llm
        h.fake.add_issue(
            REPO, title="Billing platform", body="A whole billing platform: data model, then API."
        )
        await h.deliver("issues", labeled(number=1, sender="octo-org"))
        await h.drain()
        assert decode_state(h.plan_comments(1)[0].body).children == [2, 3]
        assert sorted(h.fake.repo(REPO).issues) == [1, 2, 3]
        # The model writes the same features again: nothing is opened, twice over.
        revise = commented(number=1, body="/plan-cascade revise say more about refunds")
        await h.deliver("issue_comment", revise)
        await h.drain()
        await h.deliver("issue_comment", commented(number=1, body="/plan-cascade revise and taxes"))
        await h.drain()
        epic = decode_state(h.plan_comments(1)[0].body)
        assert sorted(h.fake.repo(REPO).issues) == [1, 2, 3], "a revision opened the children again"
        assert epic.revision == 3 and epic.children == [2, 3]
        assert epic.child_features == {"FEAT-001": 2, "FEAT-002": 3}
        # A maintainer's PRD drops FEAT-002 and adds FEAT-003 (after FEAT-001): one new child,
        # waiting for the kept #2; #3 is told, and left open for whoever works on it.
        for _ in range(2):  # the same revision processed twice opens nothing twice
            await h.deliver("issue_comment", commented(number=1, body=REVISED_EPIC))
            await h.drain()
        assert sorted(h.fake.repo(REPO).issues) == [1, 2, 3, 4]
        invoices = h.fake.repo(REPO).issues[4]
        assert invoices.title == "Invoices" and parse_child_marker(invoices.body) == (1, [2])
        epic = decode_state(h.plan_comments(1)[0].body)
        assert epic.children == [2, 4] and epic.child_features == {"FEAT-001": 2, "FEAT-003": 4}
        dropped = [c for c in h.comments(3) if "no longer" in c]
        assert len(dropped) == 1 and "#1" in dropped[0] and h.fake.repo(REPO).issues[3].state == "open"
        assert len(h.plan_comments(4)) == 1  # the new child is planned; the kept ones are not again
        assert len(h.plan_comments(2)) == 1
        # What a kept or new child waits for is the epic's plan now, not a marker written before.
        from bot.handlers.epic import planned_needs, waiting_for
        from bot.handlers.session import open_session
        from bot.plan.epic import IssueRef

        stale = [IssueRef(REPO, 3)]
        assert planned_needs(epic, IssueRef(REPO, 4), stale) == ([IssueRef(REPO, 2)], [])
        assert planned_needs(epic, IssueRef(REPO, 3), stale) == (stale, [])  # not the epic's any more
        session = await open_session(h.services, repo=REPO, issue=4, installation_id=4242)
        assert await waiting_for(session) == ["#2"]


def test_a_plan_written_before_feature_ids_were_recorded_still_knows_its_children() -> None:
    """Older epics list only `children`, in their PRD's feature order: read that way on a revision."""
    from datetime import UTC, datetime

    from bot.handlers.epic_revision import known_children
    from bot.plan import extract_prd_block, parse_prd
    from bot.plan.state import new_plan

    block = extract_prd_block(REVISED_EPIC)
    assert block is not None
    old = new_plan(repo=REPO, issue=1, prd=parse_prd(block), at=datetime.now(UTC))
    assert known_children(old) == {}
    assert known_children(old.model_copy(update={"children": [2, 4]})) == {"FEAT-001": 2, "FEAT-003": 4}
    assert known_children(old.model_copy(update={"children": [2]})) == {}, "not in feature order: unknown"
    recorded = old.model_copy(update={"children": [2, 4], "child_features": {"FEAT-003": 4}})
    assert known_children(recorded) == {"FEAT-003": 4}
