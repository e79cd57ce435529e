"""Values handed over by name are secrets (issue #47, defect 2): what `PLAN_CASCADE_SETUP_ENV`,
`PLAN_CASCADE_AGENT_ENV` and `PLAN_CASCADE_MCP_*` hand to setup, agents and MCP servers has no
shape a rule knows (an index password, a tracker token), so it is registered for redaction in
every process that holds it (server, worker, the Action) and looked for before every push.

Each value is random per test: nothing another test registered in this process can mask it.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from bot.action.inputs import read_inputs
from bot.action.services import action_services
from bot.plan.state import PlanStatus, StoryStatus
from bot.plan.state_block import decode_state
from bot.redaction import MASK, redact
from bot.runtime.settings import Settings
from tests.harness import REPO, Harness
from tests.test_push_secrets import all_objects
from tests.test_setup_env import plan_and_run


def shapeless() -> str:
    """A secret no rule recognises: lower-case words and hex, nothing like a known key."""
    return "index-pass-" + secrets.token_hex(10)


def everything_written(h: Harness) -> str:
    """Every comment, check run output and pull request body the bot wrote on the fake GitHub."""
    repo = h.fake.repo(REPO)
    texts = [c.body for number in repo.issues for c in h.fake.comments(REPO, number)]
    texts += [str(run.output) for run in repo.check_runs.values()]
    texts += [issue.body or "" for issue in repo.issues.values()]
    return "\n".join(texts)


async def test_a_value_setup_prints_is_masked_in_the_comment_that_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = shapeless()
    monkeypatch.setenv("INDEX_PASSWORD", value)
    setup = "setup:\n  - \"echo 'logging in with' $INDEX_PASSWORD; exit 3\"\n"
    async with Harness(
        tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off", PLAN_CASCADE_SETUP_ENV="INDEX_PASSWORD"
    ) as h:
        await plan_and_run(h, tmp_path, {"README.md": "# demo\n"}, extra=setup)
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None and state.status == PlanStatus.FAILED
        [notice] = [c for c in h.comments(1) if "unchanged base" in c]
        assert f"logging in with {MASK}" in notice  # setup did print it: the bot wrote it masked
        assert value not in everything_written(h)


async def test_a_value_handed_to_agents_is_never_pushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    value = shapeless()
    monkeypatch.setenv("TRACKER_TOKEN", value)
    agent = 'echo done > "$2/$id.txt"\necho "tracker = $TRACKER_TOKEN" > "$2/tracker-$id.cfg"\n'
    async with Harness(
        tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off", PLAN_CASCADE_AGENT_ENV="TRACKER_TOKEN"
    ) as h:
        await plan_and_run(
            h, tmp_path, {"README.md": "# demo\n"}, agent=agent, extra="gates:\n  max_retries: 0\n"
        )
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None
        story = state.stories["STORY-001"]
        assert story.status == StoryStatus.FAILED and story.reason is not None
        assert (
            "tracker-story-001.cfg:1 (a secret of the Plan Cascade server: the value of TRACKER_TOKEN)"
            in story.reason
        )  # the operator is told which variable, and what to do if it is no secret
        assert "TRACKER_TOKEN is handed over by name, so secret" in story.reason
        assert "PLAN_CASCADE_PUBLIC_ENV" in story.reason
        assert (
            "(a secret of the Plan Cascade server: the value of TRACKER_TOKEN)" in caplog.text
        )  # the log too
        assert value not in all_objects(tmp_path / "remote.git")
        assert value not in everything_written(h)


async def test_a_registry_url_declared_public_is_pushed_in_the_lockfile_that_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The corporate-proxy set-up hands setup a registry's URL, and `npm install` writes it in
    `package-lock.json`: declared public, it is neither masked nor refused in the push."""
    registry = f"https://npm-mirror-{secrets.token_hex(4)}.corp.example/"
    monkeypatch.setenv("COREPACK_NPM_REGISTRY", registry)
    setup = 'setup:\n  - "echo resolved $COREPACK_NPM_REGISTRY/left-pad.tgz > package-lock.json"\n'
    async with Harness(
        tmp_path,
        execute=True,
        PLAN_CASCADE_SANDBOX="off",
        PLAN_CASCADE_SETUP_ENV="COREPACK_NPM_REGISTRY",
        PLAN_CASCADE_PUBLIC_ENV="COREPACK_NPM_REGISTRY",
    ) as h:
        await plan_and_run(h, tmp_path, {"README.md": "# demo\n"}, extra=setup + "gates:\n  max_retries: 0\n")
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None
        story = state.stories["STORY-001"]
        assert story.status == StoryStatus.PASSED, story.reason
        assert registry in all_objects(tmp_path / "remote.git")
        assert redact(f"the registry is {registry}") == f"the registry is {registry}"


def test_only_the_names_declared_public_are_left_out() -> None:
    token, url = shapeless(), "https://registry.corp.example/npm/"
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        PLAN_CASCADE_SETUP_ENV="NPM_CONFIG_REGISTRY, NPM_TOKEN",
        PLAN_CASCADE_PUBLIC_ENV="NPM_CONFIG_REGISTRY, NOT_HANDED",
        PLAN_CASCADE_SANDBOX="off",
    )
    assert settings.handed({"NPM_CONFIG_REGISTRY": url, "NPM_TOKEN": token}) == {"NPM_TOKEN": token}


def test_every_value_handed_by_name_is_registered_where_the_sandbox_is_made() -> None:
    mcp, agent, setup = shapeless(), shapeless(), shapeless()
    environ = {
        "PLAN_CASCADE_MCP_TRACKER_KEY": mcp,
        "GEMINI_API_KEY": agent,
        "PIP_INDEX_PASSWORD": setup,
        "UNRELATED": shapeless(),
    }
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        PLAN_CASCADE_AGENT_ENV="GEMINI_API_KEY, MISSING",
        PLAN_CASCADE_SETUP_ENV="PIP_INDEX_PASSWORD",
        PLAN_CASCADE_SANDBOX="off",
    )
    said = f"mcp said {mcp}, the agent {agent}, setup {setup}, and {environ['UNRELATED']}"
    assert redact(said) == said  # nothing registered them before
    settings.sandbox_policy(environ=environ)
    assert redact(said) == f"mcp said {MASK}, the agent {MASK}, setup {MASK}, and {environ['UNRELATED']}"
    assert settings.handed(environ) == {
        "PLAN_CASCADE_MCP_TRACKER_KEY": mcp,
        "GEMINI_API_KEY": agent,
        "PIP_INDEX_PASSWORD": setup,
    }


def test_the_action_registers_what_it_hands_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    value = shapeless()
    monkeypatch.setenv("AZURE_OPENAI_KEY", value)
    monkeypatch.setenv("PLAN_CASCADE_AGENT_ENV", "AZURE_OPENAI_KEY")
    inputs = read_inputs(
        {
            "GITHUB_REPOSITORY": "octo/demo",
            "GITHUB_EVENT_NAME": "issues",
            "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
            "GITHUB_TOKEN": "t",
        }
    )
    assert redact(f"the agent said {value}") == f"the agent said {value}"
    action_services(inputs, data_dir=tmp_path)
    assert redact(f"the agent said {value}") == f"the agent said {MASK}"
