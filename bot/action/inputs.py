"""What `plan-cascade action` reads from its environment: GitHub's runner variables and the
Action's inputs (passed by `action/action.yml` as `PLAN_CASCADE_*` variables).

Parsed once from a mapping (never from `os.environ` directly), so tests hand in a dict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from bot.config.repo import CONFIG_PATH
from bot.errors import ConfigurationError

ACTIONS_BOT = "github-actions[bot]"
"""The login comments made with the workflow's GITHUB_TOKEN are written under."""
Mode = Literal["event", "run-story"]


class StoryInputs(BaseModel):
    """One matrix job of a dispatched batch (`mode: run-story`)."""

    issue: int = Field(description="The plan's issue number.")
    story_id: str = Field(description="The story this job runs, e.g. `STORY-001`.")
    batch: int = Field(description="The batch the story belongs to (1-based).")
    plan_hash: str = Field(description="The approved revision; a changed plan is refused.")
    dispatch_id: str = Field(default="", description="Correlates the result with the App's dispatch.")


class ActionInputs(BaseModel):
    """Everything one `plan-cascade action` run needs to know."""

    mode: Mode = Field(default="event", description="`event` answers the triggering event.")
    event_name: str = Field(default="", description="GITHUB_EVENT_NAME, e.g. `issues`.")
    event_path: Path | None = Field(default=None, description="GITHUB_EVENT_PATH: the payload file.")
    repository: str = Field(description="GITHUB_REPOSITORY, `owner/name`.")
    api_url: str = Field(default="https://api.github.com", description="GITHUB_API_URL.")
    server_url: str = Field(default="https://github.com", description="GITHUB_SERVER_URL.")
    token: str = Field(repr=False, description="The token every GitHub call and git push uses.")
    bot_login: str = Field(default=ACTIONS_BOT, description="Login our comments are written under.")
    run_id: str = Field(default="0", description="GITHUB_RUN_ID.")
    run_attempt: str = Field(default="1", description="GITHUB_RUN_ATTEMPT.")
    config_path: str = Field(default=CONFIG_PATH, description="Where the repo config lives.")
    trigger_label: str = Field(default="plan-cascade", description="Label of issues polled on schedule.")
    llm_provider: str = Field(default="anthropic", description="PLAN_CASCADE_LLM_PROVIDER.")
    llm_model: str | None = Field(default=None, description="PLAN_CASCADE_LLM_MODEL.")
    llm_base_url: str | None = Field(default=None, description="PLAN_CASCADE_LLM_BASE_URL.")
    anthropic_api_key: str | None = Field(default=None, repr=False, description="ANTHROPIC_API_KEY.")
    openai_api_key: str | None = Field(default=None, repr=False, description="OPENAI_API_KEY.")
    sandbox: str | None = Field(
        default=None, description="PLAN_CASCADE_SANDBOX: required, auto (default here) or off."
    )
    state_key: str | None = Field(
        default=None, repr=False, description="PLAN_CASCADE_STATE_KEY: signs the plan state in comments."
    )
    data_dir: Path | None = Field(default=None, description="Mirrors and worktrees; None = a temp dir.")
    output_path: Path | None = Field(default=None, description="GITHUB_OUTPUT: where outputs go.")
    tool_path: str | None = Field(default=None, description="PATH for agents and gates.")
    log_level: str = Field(default="INFO", description="PLAN_CASCADE_LOG_LEVEL.")
    story: StoryInputs | None = Field(default=None, description="Set in `run-story` mode.")

    @property
    def delivery_id(self) -> str:
        """`<run id>-<attempt>`: the Action's stand-in for a webhook delivery id."""
        return f"{self.run_id}-{self.run_attempt}"

    @property
    def run_url(self) -> str:
        """Link to this workflow run."""
        return f"{self.server_url.rstrip('/')}/{self.repository}/actions/runs/{self.run_id}"

    @property
    def app_slug(self) -> str | None:
        """The App's slug when we act as an App (`<slug>[bot]`), else None (GITHUB_TOKEN)."""
        if self.bot_login.endswith("[bot]") and self.bot_login != ACTIONS_BOT:
            return self.bot_login.removesuffix("[bot]")
        return None


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value.strip() if value and value.strip() else None


def _story(env: Mapping[str, str]) -> StoryInputs:
    missing = [
        n
        for n in ("PLAN_CASCADE_ISSUE", "PLAN_CASCADE_STORY", "PLAN_CASCADE_BATCH", "PLAN_CASCADE_PLAN_HASH")
        if not _get(env, n)
    ]
    if missing:
        raise ConfigurationError(f"mode run-story needs {', '.join(missing)} (the story inputs)")
    try:
        issue, batch = int(env["PLAN_CASCADE_ISSUE"]), int(env["PLAN_CASCADE_BATCH"])
    except ValueError:
        raise ConfigurationError("PLAN_CASCADE_ISSUE and PLAN_CASCADE_BATCH must be numbers") from None
    return StoryInputs(
        issue=issue,
        story_id=env["PLAN_CASCADE_STORY"].strip(),
        batch=batch,
        plan_hash=env["PLAN_CASCADE_PLAN_HASH"].strip(),
        dispatch_id=_get(env, "PLAN_CASCADE_DISPATCH_ID") or "",
    )


def read_inputs(env: Mapping[str, str]) -> ActionInputs:
    """Parse the environment; a missing or invalid value names the variable to set."""
    token = _get(env, "PLAN_CASCADE_GITHUB_TOKEN") or _get(env, "GITHUB_TOKEN")
    if token is None:
        raise ConfigurationError(
            "no GitHub token: set the Action's `github_token` input (PLAN_CASCADE_GITHUB_TOKEN) "
            "or GITHUB_TOKEN"
        )
    repository = _get(env, "GITHUB_REPOSITORY")
    if repository is None or repository.count("/") != 1:
        raise ConfigurationError("GITHUB_REPOSITORY must be `owner/name` (GitHub Actions sets it)")
    mode = _get(env, "PLAN_CASCADE_MODE") or "event"
    if mode not in ("event", "run-story"):
        raise ConfigurationError(f"PLAN_CASCADE_MODE must be `event` or `run-story`, got {mode!r}")
    event_path = _get(env, "GITHUB_EVENT_PATH")
    if mode == "event" and (not _get(env, "GITHUB_EVENT_NAME") or event_path is None):
        raise ConfigurationError(
            "GITHUB_EVENT_NAME and GITHUB_EVENT_PATH must be set (GitHub Actions sets them)"
        )
    runner_temp = _get(env, "PLAN_CASCADE_DATA_DIR") or _get(env, "RUNNER_TEMP")
    data_dir = None
    if runner_temp:
        data_dir = (
            Path(runner_temp) if _get(env, "PLAN_CASCADE_DATA_DIR") else Path(runner_temp) / "plan-cascade"
        )
    return ActionInputs(
        mode=mode,  # type: ignore[arg-type]
        event_name=_get(env, "GITHUB_EVENT_NAME") or "",
        event_path=Path(event_path) if event_path else None,
        repository=repository,
        api_url=_get(env, "GITHUB_API_URL") or "https://api.github.com",
        server_url=_get(env, "GITHUB_SERVER_URL") or "https://github.com",
        token=token,
        bot_login=_get(env, "PLAN_CASCADE_BOT_LOGIN") or ACTIONS_BOT,
        run_id=_get(env, "GITHUB_RUN_ID") or "0",
        run_attempt=_get(env, "GITHUB_RUN_ATTEMPT") or "1",
        config_path=_get(env, "PLAN_CASCADE_CONFIG_PATH") or CONFIG_PATH,
        trigger_label=_get(env, "PLAN_CASCADE_TRIGGER_LABEL") or "plan-cascade",
        llm_provider=_get(env, "PLAN_CASCADE_LLM_PROVIDER") or "anthropic",
        llm_model=_get(env, "PLAN_CASCADE_LLM_MODEL"),
        llm_base_url=_get(env, "PLAN_CASCADE_LLM_BASE_URL"),
        anthropic_api_key=_get(env, "ANTHROPIC_API_KEY"),
        openai_api_key=_get(env, "OPENAI_API_KEY"),
        state_key=_get(env, "PLAN_CASCADE_STATE_KEY"),
        sandbox=_get(env, "PLAN_CASCADE_SANDBOX"),
        data_dir=data_dir,
        output_path=Path(p) if (p := _get(env, "GITHUB_OUTPUT")) else None,
        tool_path=_get(env, "PLAN_CASCADE_TOOL_PATH") or _get(env, "PATH"),
        log_level=_get(env, "PLAN_CASCADE_LOG_LEVEL") or "INFO",
        story=_story(env) if mode == "run-story" else None,
    )


def load_event(inputs: ActionInputs) -> dict[str, object]:
    """The triggering event's payload (GITHUB_EVENT_PATH), `{}` when there is none."""
    if inputs.event_path is None:
        return {}
    try:
        data = json.loads(inputs.event_path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the event payload {inputs.event_path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"the event payload {inputs.event_path} is not a JSON object")
    return data
