"""The Action's pure edges: environment parsing, step outputs, the result contract."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from bot.action.inputs import ACTIONS_BOT, read_inputs
from bot.action.outputs import error_command, output_block, plan_outputs, write_outputs
from bot.action.services import InlineJobs, action_services
from bot.errors import ConfigurationError, JobError
from bot.orchestration.actions_contract import StoryReport, dispatch_inputs, gate_of, story_check_name
from bot.plan.state import PlanStatus
from tests.execution_support import approved_state

BASE = {
    "GITHUB_EVENT_NAME": "issues",
    "GITHUB_EVENT_PATH": "/tmp/event.json",
    "GITHUB_REPOSITORY": "octo/demo",
    "GITHUB_RUN_ID": "42",
    "GITHUB_RUN_ATTEMPT": "2",
}
PRD = """
version: 1
title: One
summary: One story.
stories:
  - id: STORY-001
    title: Only
    acceptance_criteria: ["one.txt contains the line 'one'"]
"""


def test_the_token_input_wins_over_github_token() -> None:
    inputs = read_inputs({**BASE, "GITHUB_TOKEN": "ghs_env", "PLAN_CASCADE_GITHUB_TOKEN": "ghs_input"})
    assert inputs.token == "ghs_input" and "ghs_input" not in repr(inputs)
    assert read_inputs({**BASE, "GITHUB_TOKEN": "ghs_env"}).token == "ghs_env"
    with pytest.raises(ConfigurationError, match="github_token"):
        read_inputs({**BASE, "PLAN_CASCADE_GITHUB_TOKEN": "  "})


def test_defaults_and_identity() -> None:
    inputs = read_inputs({**BASE, "GITHUB_TOKEN": "t", "RUNNER_TEMP": "/runner/tmp"})
    assert inputs.api_url == "https://api.github.com" and inputs.mode == "event"
    assert inputs.bot_login == ACTIONS_BOT and inputs.app_slug is None
    assert inputs.delivery_id == "42-2"
    assert inputs.run_url == "https://github.com/octo/demo/actions/runs/42"
    assert inputs.data_dir == Path("/runner/tmp/plan-cascade")
    assert inputs.config_path == ".github/plan-cascade.yml" and inputs.trigger_label == "plan-cascade"
    app = read_inputs({**BASE, "GITHUB_TOKEN": "t", "PLAN_CASCADE_BOT_LOGIN": "my-cascade[bot]"})
    assert app.app_slug == "my-cascade"


def test_bad_environments_name_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="GITHUB_REPOSITORY"):
        read_inputs({**BASE, "GITHUB_TOKEN": "t", "GITHUB_REPOSITORY": "demo"})
    with pytest.raises(ConfigurationError, match="GITHUB_EVENT_PATH"):
        read_inputs({**BASE, "GITHUB_TOKEN": "t", "GITHUB_EVENT_PATH": ""})
    with pytest.raises(ConfigurationError, match="PLAN_CASCADE_MODE"):
        read_inputs({**BASE, "GITHUB_TOKEN": "t", "PLAN_CASCADE_MODE": "serve"})
    story_mode = {**BASE, "GITHUB_TOKEN": "t", "PLAN_CASCADE_MODE": "run-story"}
    with pytest.raises(ConfigurationError, match="PLAN_CASCADE_STORY, PLAN_CASCADE_BATCH"):
        read_inputs({**story_mode, "PLAN_CASCADE_ISSUE": "3"})
    story = read_inputs(
        {
            **BASE,
            "GITHUB_TOKEN": "t",
            "PLAN_CASCADE_MODE": "run-story",
            "PLAN_CASCADE_ISSUE": "3",
            "PLAN_CASCADE_STORY": "STORY-002",
            "PLAN_CASCADE_BATCH": "2",
            "PLAN_CASCADE_PLAN_HASH": "abc",
        }
    ).story
    assert story is not None and (story.issue, story.story_id, story.batch) == (3, "STORY-002", 2)


def test_outputs_are_heredocs_safe_for_any_value(tmp_path: Path) -> None:
    marks = itertools.chain(["EOF", "EOF"], (f"M{i}" for i in range(10)))
    text = output_block({"a": "one", "b": "two\nEOF\nthree"}, delimiter=lambda: next(marks))
    assert text == "a<<EOF\none\nEOF\nb<<M0\ntwo\nEOF\nthree\nM0\n"
    path = tmp_path / "out"
    write_outputs(path, {"x": "1"})
    write_outputs(path, {"y": "2"})
    assert path.read_text().count("<<ghadelimiter_") == 2
    write_outputs(None, {"x": "1"})  # outside Actions: nothing to write


def test_error_command_escapes_newlines_and_percent() -> None:
    assert error_command("50% done\nthen\r") == "::error::50%25 done%0Athen%0D"


def test_plan_outputs() -> None:
    state = approved_state(PRD)
    assert plan_outputs({}) == {"plan_state": "", "pull_requests": ""}
    assert plan_outputs({7: state}) == {"plan_state": "approved", "pull_requests": ""}
    other = state.model_copy(update={"issue": 9, "status": PlanStatus.RUNNING})
    assert plan_outputs({9: other, 7: state})["plan_state"] == "7=approved,9=running"


def test_story_report_round_trip_and_strangers() -> None:
    report = StoryReport(dispatch_id="d1", story_id="STORY-001", attempts=2, tokens=1234, cost_usd=0.5)
    assert StoryReport.parse(report.external_id()) == report
    assert StoryReport.parse("batch-1") is None and StoryReport.parse(None) is None
    assert StoryReport.parse("a:b:x:1:2") is None
    assert story_check_name("STORY-001") == "plan-cascade / STORY-001"
    assert gate_of("plan-cascade / STORY-001 / test", "STORY-001") == "test"
    assert gate_of("plan-cascade / STORY-0011 / test", "STORY-001") is None
    inputs = dispatch_inputs(issue=3, batch=1, story_ids=["A", "B"], plan_hash="h", dispatch_id="d")
    assert inputs == {
        "mode": "run-story",
        "issue": "3",
        "batch": "1",
        "stories": '["A", "B"]',
        "plan_hash": "h",
        "dispatch_id": "d",
    }
    assert all(isinstance(v, str) for v in inputs.values())


async def test_services_have_no_app_id_and_run_jobs_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAN_CASCADE_APP_ID", "999")  # a runner's stray variable changes nothing
    inputs = read_inputs({**BASE, "GITHUB_TOKEN": "t"})
    services, jobs = action_services(inputs, data_dir=tmp_path)
    assert services.settings.app_id is None and services.db is None and services.plan_store.db is None
    assert services.bot_login == ACTIONS_BOT
    seen: list[str] = []
    kinds = jobs.kinds

    @kinds.register("first")
    async def first(job, svc):  # type: ignore[no-untyped-def]
        seen.append(f"first {job.payload['n']}")
        await svc.enqueue("second", "g", {"n": job.payload["n"]})

    @kinds.register("second")
    async def second(job, svc):  # type: ignore[no-untyped-def]
        seen.append(f"second {job.payload['n']}")

    assert services.enqueue is not None
    await services.enqueue("first", "g", {"n": 1})
    await services.enqueue("first", "g", {"n": 2})
    assert seen == [], "nothing runs inside the handler that queued it"
    assert await jobs.drain(delivery_id="d") == 4
    assert seen == ["first 1", "first 2", "second 1", "second 2"]
    await services.enqueue("nope", "g", {})
    with pytest.raises(JobError, match="nope"):
        await jobs.drain(delivery_id="d")
    assert isinstance(jobs, InlineJobs)
