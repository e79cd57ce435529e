"""Attack 8: one approval rule for everything that starts or resumes work, as a matrix.

Paths: `approve`, 👍, an approving review of the plan PR, `retry`, `skip`, `fix` on a batch
PR, and a check run's Re-run. Roles: admin, maintain and write pass (they are approvers);
triage, read, no access, a bot with write access, and a writer who is not in `approvers:`
are refused. Every path is tried by every role on one plan.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bot.handlers.plan_io import update_plan
from bot.handlers.session import open_session
from bot.plan.state import PlanStatus, StoryStatus, update_story
from bot.plan.state_block import decode_state
from bot.testing.deliveries import load_fixture
from tests.execution_support import make_remote
from tests.harness import INSTALLATION, REPO, Harness, commented
from tests.test_github_flow import PRD
from tests.test_plan_pr import review_payload

ROLES: dict[str, tuple[str, bool]] = {
    "admin1": ("admin", True),
    "maint": ("maintain", True),
    "writer": ("write", True),
    "triager": ("triage", False),
    "reader": ("read", False),
    "nobody": ("none", False),
    "other-app[bot]": ("write", False),
    "writer2": ("write", False),  # write access, but not in approvers:
}
APPROVERS = ["admin1", "maint", "writer", "triager", "reader", "nobody"]
CONFIG = f"approvers: [{', '.join(APPROVERS)}]\nrequired_approvals: 6\nplan_pr: true\n"
ALLOWED = sorted(login for login, (_, ok) in ROLES.items() if ok)


def association(login: str) -> str:
    role = ROLES[login][0]
    return (
        {"admin": "OWNER", "maintain": "MEMBER", "write": "COLLABORATOR"}.get(role, "NONE")
        if (not login.endswith("[bot]"))
        else "NONE"
    )


def user_type(login: str) -> str:
    return "Bot" if login.endswith("[bot]") else "User"


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path, intercept=frozenset({"review_fix", "rerun_gate"})) as harness:
        harness.remote = make_remote(tmp_path)
        harness.fake.repo(REPO).clone_url = f"file://{harness.remote}"
        harness.fake.set_file(REPO, ".github/plan-cascade.yml", CONFIG)
        harness.fake.add_issue(REPO, title="Rate limiting", body=PRD)
        for login, (role, _) in ROLES.items():
            if role != "none":
                harness.fake.set_permission(REPO, login, role)
        await harness.deliver("issue_comment", commented(number=1, body="/plan-cascade plan", user="maint"))
        await harness.drain()
        yield harness


def state_of(h: Harness):  # type: ignore[no-untyped-def]
    (comment,) = h.plan_comments(1)
    return decode_state(comment.body)


async def set_failed(h: Harness) -> None:
    session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
    await session.load_config()
    loaded = await session.load_plan()
    assert loaded is not None

    def failed(state):  # type: ignore[no-untyped-def]
        state = update_story(state, "STORY-001", status=StoryStatus.FAILED, reason="gates failed")
        return state.model_copy(update={"status": PlanStatus.FAILED})

    await update_plan(session, loaded, failed)


def comment_by(login: str, body: str, **kw: object) -> dict:
    return commented(
        number=1, body=body, user=login, association=association(login), user_type=user_type(login), **kw
    )  # type: ignore[arg-type]


async def approve(h: Harness, login: str) -> None:
    await h.deliver("issue_comment", comment_by(login, "/plan-cascade approve"))


async def thumbs_up(h: Harness, login: str) -> None:
    from bot.handlers.approval import poll_reactions

    (comment,) = h.plan_comments(1)
    h.fake.add_reaction(REPO, comment.id, login, "+1")
    session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
    await session.load_config()
    await poll_reactions(session)


async def plan_pr_review(h: Harness, login: str) -> None:
    pull = next(p for p in h.fake.repo(REPO).pulls.values() if p.head_ref == "plan-cascade/1/plan")
    from tests.execution_support import git

    head = git("rev-parse", "plan-cascade/1/plan", cwd=h.remote)
    payload = review_payload(
        pr_number=pull.number,
        head_ref=pull.head_ref,
        commit=head,
        user=login,
        association=association(login),
        user_type=user_type(login),
    )
    await h.deliver("pull_request_review", payload)


async def retry(h: Harness, login: str) -> None:
    await set_failed(h)
    await h.deliver("issue_comment", comment_by(login, "/plan-cascade retry STORY-001"))


async def skip(h: Harness, login: str) -> None:
    await set_failed(h)
    await h.deliver("issue_comment", comment_by(login, "/plan-cascade skip STORY-001"))


async def fix(h: Harness, login: str) -> None:
    pulls = [p for p in h.fake.repo(REPO).pulls.values() if p.head_ref == "plan-cascade/1/batch-1"]
    pull = pulls[0] if pulls else h.fake.add_pull(REPO, head="plan-cascade/1/batch-1", title="batch 1")
    payload = commented(
        number=pull.number,
        body="/plan-cascade fix rename the limiter",
        user=login,
        association=association(login),
        user_type=user_type(login),
        on_pr=True,
    )
    await h.deliver("issue_comment", payload)


async def rerun(h: Harness, login: str) -> None:
    payload = copy.deepcopy(load_fixture("check_run.rerequested.1"))
    payload["repository"].update({"full_name": REPO, "default_branch": "main"})
    payload["installation"] = {"id": INSTALLATION}
    payload["check_run"].update({"id": 999, "external_id": "1:STORY-001:files:1", "head_sha": "a" * 40})
    payload["sender"].update({"login": login, "type": user_type(login)})
    await h.deliver("check_run", payload)


Path_ = Callable[[Harness, str], Awaitable[None]]


def approvers_recorded(h: Harness) -> list[str]:
    return sorted({a.user for a in state_of(h).current_approvals()})


def started_by(h: Harness, kind: str) -> int:
    return sum(1 for k, _ in h.intercepted if k == kind)


@pytest.mark.parametrize(
    ("path", "outcome"),
    [
        (approve, approvers_recorded),
        (thumbs_up, approvers_recorded),
        (plan_pr_review, approvers_recorded),
        (retry, lambda h: started_by(h, "execute_plan")),
        (skip, lambda h: started_by(h, "execute_plan")),
        (fix, lambda h: started_by(h, "review_fix")),
        (rerun, lambda h: started_by(h, "rerun_gate")),
    ],
    ids=["approve", "thumbs-up", "plan-pr-review", "retry", "skip", "fix", "re-run"],
)
async def test_every_path_that_starts_work_obeys_one_rule(h: Harness, path: Path_, outcome) -> None:  # type: ignore[no-untyped-def]
    allowed: list[str] = []
    for login in ROLES:
        before = outcome(h)
        await path(h, login)
        await h.drain()
        after = outcome(h)
        if after != before:
            allowed.append(login)
    assert sorted(allowed) == ALLOWED
