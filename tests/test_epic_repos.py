"""Epics across repositories: one plan in `acme/service`, children in `acme/service`, `acme/client`
and `acme/web`, opened only once the epic's plan is approved, each approved in its own repository
and started once the children it needs are merged there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.llm import Completion, Usage
from bot.llm.scripted import ScriptedLLM
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from bot.testing.fake_github_installations import FULL_PERMISSIONS
from tests.harness import INSTALLATION, Harness, commented, labeled, pr_closed

SERVICE, CLIENT, WEB = "acme/service", "acme/client", "acme/web"
WEB_INSTALLATION = 4343


def via_installation(payload: dict[str, Any], repo: str) -> dict[str, Any]:
    """A delivery as GitHub sends it: naming the installation that covers `repo`."""
    payload["installation"]["id"] = WEB_INSTALLATION if repo == WEB else INSTALLATION
    return payload


PLAN = "<!-- plan-cascade:plan -->"
ROLLUP = "<!-- plan-cascade:epic-rollup -->"


def story(sid: str, title: str, deps: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": sid,
        "title": title,
        "depends_on": deps or [],
        "acceptance_criteria": [f"{title.lower()} passes its 3 unit tests"],
    }


EPIC_FEATURES: list[dict[str, Any]] = [
    {"id": "FEAT-001", "title": "Service returns the field", "stories": ["STORY-001"]},
    {
        "id": "FEAT-002",
        "title": "Client reads the field",
        "repository": CLIENT,
        "depends_on": ["FEAT-001"],
        "stories": ["STORY-002"],
    },
    {
        "id": "FEAT-003",
        "title": "Web shows the field",
        "repository": WEB,
        "depends_on": ["FEAT-002"],
        "stories": ["STORY-003"],
    },
]


def answer(call: dict[str, Any], features: list[dict[str, Any]]) -> Completion:
    """By the schema asked for: the epic's PRD and features, a one-story PRD for each child."""
    text = "\n".join(m.content for m in call["messages"])
    if call["schema_name"] == "epic":
        data: dict[str, Any] = {"features": features}
    elif call["schema_name"] == "quality_review":
        data = {"verdict": "good", "fixes": [], "warnings": []}
    elif "Part of" not in text:
        data = {
            "version": 1,
            "title": "A new field end to end",
            "summary": "The field, from the service through the client to the web app.",
            "strategy": "mega",
            "stories": [
                story("STORY-001", "Service field"),
                story("STORY-002", "Client field", ["STORY-001"]),
                story("STORY-003", "Web field", ["STORY-002"]),
            ],
        }
    else:
        data = {"version": 1, "title": "A feature", "summary": "One feature.", "strategy": "hybrid",
                "stories": [story("STORY-001", "Do it")]}  # fmt: skip
    usage = Usage(input_tokens=10, output_tokens=10)
    return Completion(text=json.dumps(data), tool_calls=[], usage=usage, cost_usd=0.0, model="fake",
                      stop_reason="end_turn")  # fmt: skip


def config(script: Path | None, extra: str = "") -> str:
    agent = (
        f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
        "  sandbox: none\n"
        if script is not None
        else ""
    )
    return f"{agent}gates:\n  detect: false\n  strict: true\nllm:\n  quality_review: false\n{extra}"


def setup(h: Harness, tmp_path: Path, *, remotes: bool = False, allowed: str = "[acme/*]") -> list[Any]:
    """The three repositories (real git remotes when `remotes`), the App on all three, `maint`
    a maintainer of each; returns the model's calls."""
    from tests.execution_support import agent_script, make_remote

    features = [dict(f) for f in EPIC_FEATURES]
    llm = ScriptedLLM(respond=lambda call: answer(call, features), model="fake", provider="fake")
    h.services.llm_for = lambda cfg, model: llm
    script = agent_script(tmp_path, "ok.sh", 'echo done > "$2/$(date +%s%N).txt"\n') if remotes else None
    for repo in (SERVICE, CLIENT, WEB):
        fake = h.fake.add_repo(repo)
        if remotes:
            (tmp_path / repo).mkdir(parents=True)
            fake.clone_url = f"file://{make_remote(tmp_path / repo)}"
        h.fake.set_permission(repo, "maint", "maintain")
        extra = f"epics:\n  repositories: {allowed}\n" if repo == SERVICE else ""
        h.fake.set_file(repo, ".github/plan-cascade.yml", config(script, extra))
    h.fake.install(INSTALLATION, [SERVICE, CLIENT])
    h.fake.install(WEB_INSTALLATION, [WEB])  # another installation: its own tokens
    h.fake.add_issue(
        SERVICE, title="A new field end to end", body="Add the field to acme/client and acme/web too."
    )
    return [llm, features]


def say(h: Harness, repo: str, number: int, body: str, user: str = "maint") -> Any:
    payload = commented(number=number, body=body, user=user, association="MEMBER", repo=repo,
                        clone_url=h.fake.repo(repo).clone_url)  # fmt: skip
    return h.deliver("issue_comment", via_installation(payload, repo))


def comments(h: Harness, repo: str, number: int) -> list[str]:
    return [c.body for c in h.fake.comments(repo, number)]


def plan(h: Harness, repo: str, number: int) -> Any:
    found = [c for c in h.fake.comments(repo, number) if PLAN in c.body]
    return decode_state(found[0].body) if found else None


def issues(h: Harness, repo: str) -> dict[int, Any]:
    return {n: i for n, i in h.fake.repo(repo).issues.items() if not i.is_pull}


def pulls_of(h: Harness, repo: str, issue: int) -> list[Any]:
    return [p for p in h.fake.repo(repo).pulls.values() if p.head_ref.startswith(f"plan-cascade/{issue}/")]


async def label_epic(h: Harness) -> None:
    await h.deliver(
        "issues", labeled(number=1, sender="maint", repo=SERVICE, clone_url=h.fake.repo(SERVICE).clone_url)
    )
    await h.drain(timeout=180)


async def test_an_epic_across_three_repositories_opens_children_on_approval_and_merges_them_in_order(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, execute=True) as h:
        llm, _ = setup(h, tmp_path, remotes=True)
        await label_epic(h)
        # The model was shown the candidates (each with its paths) and nothing else.
        epic_prompt = next(p for p in llm.prompts() if "Candidate repositories" in p)
        print(epic_prompt[:3000])
        assert "## acme/client" in epic_prompt and "## acme/web" in epic_prompt
        epic = plan(h, SERVICE, 1)
        assert epic.status == PlanStatus.AWAITING_APPROVAL and epic.epic_problems == []
        assert [f.repository for f in epic.prd.features] == [None, CLIENT, WEB]
        body = next(c for c in comments(h, SERVICE, 1) if PLAN in c)
        assert "| acme/client | opened on approval |" in body and "| acme/web | opened on approval |" in body
        # Nothing opened anywhere before the epic's plan is approved.
        assert list(issues(h, SERVICE)) == [1] and issues(h, CLIENT) == {} and issues(h, WEB) == {}

        await say(h, SERVICE, 1, "/plan-cascade approve")
        await h.drain(timeout=180)
        epic = plan(h, SERVICE, 1)
        assert epic.child_issues == {
            "FEAT-001": f"{SERVICE}#2",
            "FEAT-002": f"{CLIENT}#1",
            "FEAT-003": f"{WEB}#1",
        }
        client_issue, web_issue = issues(h, CLIENT)[1], issues(h, WEB)[1]
        assert (
            "Part of acme/service#1" in client_issue.body and "Runs after acme/service#2" in client_issue.body
        )
        assert "Runs after #1" not in web_issue.body and "Runs after acme/client#1" in web_issue.body
        # Each child is planned in its own repository, with the epic's context.
        for repo, number in ((SERVICE, 2), (CLIENT, 1), (WEB, 1)):
            assert plan(h, repo, number).status == PlanStatus.AWAITING_APPROVAL, (repo, number)
        assert any("one feature of the epic acme/service#1" in p for p in llm.prompts())

        # The client's child, approved before the service's is merged, waits.
        await say(h, CLIENT, 1, "/plan-cascade approve")
        await h.drain(timeout=180)
        assert pulls_of(h, CLIENT, 1) == [] and "waits for acme/service#2" in comments(h, CLIENT, 1)[-1]
        await say(h, WEB, 1, "/plan-cascade approve")
        await say(h, SERVICE, 2, "/plan-cascade approve")
        await h.drain(timeout=240)
        (service_pull,) = pulls_of(h, SERVICE, 2)
        assert pulls_of(h, CLIENT, 1) == [] and pulls_of(h, WEB, 1) == []
        rollup = next(c for c in comments(h, SERVICE, 1) if c.startswith(ROLLUP))
        assert f"| {CLIENT} | {CLIENT}#1 | A feature | approved | — | #2 |" in rollup, rollup

        # Merging the service's batch PR starts the client's child by itself, then the web's.
        for repo, number in ((SERVICE, 2), (CLIENT, 1), (WEB, 1)):
            (pull,) = pulls_of(h, repo, number)
            h.fake.merge_pull(repo, pull.number)
            await h.deliver("pull_request", via_installation(pr_closed(h.fake, pull.number, repo=repo), repo))
            await h.drain(timeout=240)
        rollup = next(c for c in comments(h, SERVICE, 1) if c.startswith(ROLLUP))
        rows = [line for line in rollup.splitlines() if line.startswith("| acme/")]
        assert len(rows) == 3 and all("| merged |" in row and "(merged)" in row for row in rows), rollup
        assert service_pull.number in [p.number for p in pulls_of(h, SERVICE, 2)]


async def test_a_target_where_the_app_is_not_installed_is_named_and_nothing_opens(tmp_path: Path) -> None:
    async with Harness(tmp_path, execute=True) as h:
        setup(h, tmp_path)
        h.fake.installations.installs.pop(WEB_INSTALLATION)  # not on acme/web
        await label_epic(h)
        epic = plan(h, SERVICE, 1)
        (problem,) = epic.epic_problems
        assert problem.startswith("acme/web: the App is not installed there: install it on acme/web")
        body = next(c for c in comments(h, SERVICE, 1) if PLAN in c)
        assert "cannot be approved yet" in body and "acme/web: the App is not installed there" in body
        await say(h, SERVICE, 1, "/plan-cascade approve")
        await h.drain(timeout=180)
        assert plan(h, SERVICE, 1).status == PlanStatus.AWAITING_APPROVAL
        assert "cannot open its children yet" in comments(h, SERVICE, 1)[-1]
        assert list(issues(h, SERVICE)) == [1] and issues(h, CLIENT) == {} and issues(h, WEB) == {}
        # Installed meanwhile: the next approval looks again, and the children open.
        h.fake.install(WEB_INSTALLATION, [WEB])
        await say(h, SERVICE, 1, "/plan-cascade approve")
        await h.drain(timeout=180)
        assert plan(h, SERVICE, 1).epic_problems == [] and set(issues(h, WEB)) == {1}


async def test_a_target_whose_installation_lacks_a_permission_is_named(tmp_path: Path) -> None:
    async with Harness(tmp_path, execute=True) as h:
        setup(h, tmp_path)
        h.fake.install(WEB_INSTALLATION, [WEB], permissions={**FULL_PERMISSIONS, "issues": "read"})
        await label_epic(h)
        (problem,) = plan(h, SERVICE, 1).epic_problems
        assert problem.startswith("acme/web: the App's installation there lacks issues: write")
        await say(h, SERVICE, 1, "/plan-cascade approve")
        await h.drain(timeout=180)
        assert issues(h, CLIENT) == {} and issues(h, WEB) == {} and list(issues(h, SERVICE)) == [1]


async def test_a_target_the_allowed_list_excludes_is_named_and_nothing_opens(tmp_path: Path) -> None:
    """A maintainer's own `prd` block may name any repository: the allowed list still decides."""
    async with Harness(tmp_path, execute=True) as h:
        setup(h, tmp_path, allowed="[acme/client]")
        prd = {
            "version": 1,
            "title": "A new field end to end",
            "strategy": "mega",
            "stories": [story("STORY-001", "Service field"), story("STORY-002", "Web field", ["STORY-001"])],
            "features": [
                {"id": "FEAT-001", "title": "Service", "stories": ["STORY-001"]},
                {"id": "FEAT-002", "title": "Web", "repository": WEB, "depends_on": ["FEAT-001"]},
            ],
        }
        h.fake.repo(SERVICE).issues[1].body = f"```prd\n{json.dumps(prd)}\n```"
        await label_epic(h)
        (problem,) = plan(h, SERVICE, 1).epic_problems
        assert problem.startswith("FEAT-002 names acme/web, which is not on this repository's allowed list")
        await say(h, SERVICE, 1, "/plan-cascade approve")
        await h.drain(timeout=180)
        assert issues(h, WEB) == {} and list(issues(h, SERVICE)) == [1]


async def test_the_model_may_not_place_a_feature_outside_the_candidates(tmp_path: Path) -> None:
    async with Harness(tmp_path, execute=True) as h:
        _, features = setup(h, tmp_path, allowed="[acme/client]")
        features[2]["repository"] = "evil/elsewhere"
        await label_epic(h)
        assert plan(h, SERVICE, 1) is None
        said = comments(h, SERVICE, 1)[-1]
        assert (
            "evil/elsewhere, which is not a candidate repository; use one of acme/service, acme/client"
            in said
        )


async def test_a_writer_of_the_epic_who_only_reads_the_client_cannot_approve_its_child(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, execute=True) as h:
        setup(h, tmp_path)
        h.fake.set_permission(SERVICE, "svc", "write")
        h.fake.set_permission(CLIENT, "svc", "read")
        await label_epic(h)
        await say(h, SERVICE, 1, "/plan-cascade approve", user="svc")  # a writer of acme/service
        await h.drain(timeout=180)
        assert set(issues(h, CLIENT)) == {1} and plan(h, CLIENT, 1).status == PlanStatus.AWAITING_APPROVAL
        await say(h, CLIENT, 1, "/plan-cascade approve", user="svc")
        await h.drain(timeout=180)
        assert (
            plan(h, CLIENT, 1).status == PlanStatus.AWAITING_APPROVAL and plan(h, CLIENT, 1).approvals == []
        )
        assert "svc" in comments(h, CLIENT, 1)[-1] and "read" in comments(h, CLIENT, 1)[-1]


async def test_cancelling_the_epic_cancels_the_children_that_have_not_run(tmp_path: Path) -> None:
    async with Harness(tmp_path, execute=True) as h:
        setup(h, tmp_path)
        await label_epic(h)
        await say(h, SERVICE, 1, "/plan-cascade approve")
        await h.drain(timeout=180)
        await say(h, CLIENT, 1, "/plan-cascade approve")  # waits for the service's child
        await h.drain(timeout=180)
        assert plan(h, CLIENT, 1).status == PlanStatus.APPROVED
        await say(h, SERVICE, 1, "/plan-cascade cancel")
        await h.drain(timeout=180)
        assert plan(h, SERVICE, 1).status == PlanStatus.CANCELLED
        for repo, number in ((SERVICE, 2), (CLIENT, 1), (WEB, 1)):
            child = plan(h, repo, number)
            assert child.status == PlanStatus.CANCELLED and "was cancelled by @maint" in (child.note or "")
            assert "this child will not run" in comments(h, repo, number)[-1]
        said = comments(h, SERVICE, 1)[-1]
        assert "- #2: cancelled" in said and "- acme/client#1: cancelled" in said and "acme/web#1" in said
        # A cancelled child cannot be approved into running.
        await say(h, CLIENT, 1, "/plan-cascade approve")
        await h.drain(timeout=180)
        assert plan(h, CLIENT, 1).status == PlanStatus.CANCELLED and h.fake.repo(CLIENT).pulls == {}


async def test_a_failed_child_leaves_its_dependants_waiting_with_the_reason_on_the_roll_up(
    tmp_path: Path,
) -> None:
    from tests.execution_support import agent_script

    async with Harness(tmp_path, execute=True) as h:
        setup(h, tmp_path, remotes=True)
        failing = agent_script(tmp_path, "fail.sh", "echo nothing to do >&2\nexit 3\n")
        extra = "epics:\n  repositories: [acme/*]\n"
        h.fake.set_file(SERVICE, ".github/plan-cascade.yml", config(failing, extra))
        await label_epic(h)
        await say(h, SERVICE, 1, "/plan-cascade approve")
        await h.drain(timeout=180)
        await say(h, CLIENT, 1, "/plan-cascade approve")
        await say(h, SERVICE, 2, "/plan-cascade approve")
        await h.drain(timeout=240)
        assert plan(h, SERVICE, 2).status == PlanStatus.FAILED
        assert plan(h, CLIENT, 1).status == PlanStatus.APPROVED and h.fake.repo(CLIENT).pulls == {}
        rollup = next(c for c in comments(h, SERVICE, 1) if c.startswith(ROLLUP))
        client_row = next(line for line in rollup.splitlines() if line.startswith(f"| {CLIENT} |"))
        assert "| #2 (failed: " in client_row, rollup


async def test_the_planner_sees_a_private_candidate_only_when_who_asked_can_read_it(tmp_path: Path) -> None:
    async with Harness(tmp_path, execute=True) as h:
        llm, _ = setup(h, tmp_path)
        h.fake.repo(WEB).private = True
        h.fake.set_file(WEB, "src/secret_plans.py", "x = 1\n")
        h.fake.set_permission(SERVICE, "svc", "write")  # no access to acme/web
        await h.deliver("issues", labeled(number=1, sender="svc", repo=SERVICE))
        await h.drain(timeout=180)
        prompt = next(p for p in llm.prompts() if "Candidate repositories" in p)
        assert "## acme/web" in prompt and "not readable by who asked" in prompt
        assert "secret_plans" not in "\n".join(llm.prompts())
        assert "## acme/client" in prompt and ".github/plan-cascade.yml" in prompt


async def test_an_epic_stopped_while_opening_its_children_opens_only_the_rest_when_run_again(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, execute=True) as h:
        setup(h, tmp_path)
        await label_epic(h)
        h.fake.faults.fail("POST", r"/repos/acme/web/issues", status=403, message="Forbidden")
        await say(h, SERVICE, 1, "/plan-cascade approve")
        await h.drain(timeout=180, retries=1)
        assert (
            set(issues(h, SERVICE)) == {1, 2} and set(issues(h, CLIENT)) == {1} and set(issues(h, WEB)) == {1}
        )
        assert len(plan(h, SERVICE, 1).child_issues) == 3
        # Every child open: the epic is approved no more.
        await say(h, SERVICE, 1, "/plan-cascade approve")
        await h.drain(timeout=180)
        assert "approve those" in comments(h, SERVICE, 1)[-1]
        assert set(issues(h, WEB)) == {1} and set(issues(h, CLIENT)) == {1}
