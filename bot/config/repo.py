"""The repository configuration, `.github/plan-cascade.yml`, the Probot way (STYLE.md §8).

The GitHub layer reads the file from the default branch and hands its text to
:func:`~bot.config.load.load_repo_config`, which parses the YAML, deep-merges it over the typed defaults
(nested mappings merge; lists and scalars replace) and validates it. Every invalid key becomes
one problem line in a :class:`~bot.errors.RepoConfigError`; :func:`format_config_problems_markdown`
renders them for an issue comment. Key names are a public contract: see docs/configuration.md.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.config.agent_names import BUILTIN_AGENTS, agent_problems
from bot.config.egress import AgentEgress
from bot.config.epics import EpicsConfig
from bot.config.errors import (
    COMMAND_PLACEHOLDERS,
    CONFIG_PATH,
    Expect,
    format_config_problems_markdown,
    format_key,
    problems_error,
)
from bot.config.globs import is_denied
from bot.config.mcp import McpServer, mcp_problems
from bot.config.schedules import Schedule, schedule_problems

__all__ = [
    "COMMAND_PLACEHOLDERS",
    "CONFIG_PATH",
    "RepoConfig",
    "format_config_problems_markdown",
    "is_denied",
]

StoryType = Literal["feature", "bugfix", "refactor", "test", "docs", "infra"]
LLMProvider = Literal["anthropic", "openai", "deepseek", "ollama", "openai-compatible"]
Phase = Literal["planning", "implementation", "retry", "refactor", "review"]
STORY_TYPES: tuple[str, ...] = get_args(StoryType)
LLM_PROVIDERS: tuple[str, ...] = get_args(LLMProvider)


def split_model_ref(entry: str) -> tuple[str | None, str]:
    """(provider, model) of a `llm.planning_models` entry: `provider:model`, or a bare model name.

    Only a known provider before the first `:` names one (Ollama tags such as `llama3:8b` stay
    model names).
    """
    provider, sep, model = entry.partition(":")
    if sep and provider.strip().lower() in LLM_PROVIDERS:
        return provider.strip().lower(), model.strip()
    return None, entry.strip()


PHASES: tuple[str, ...] = get_args(Phase)

Login = Annotated[
    str, Field(pattern=r"^[A-Za-z0-9-]+$"), Expect('a GitHub login (letters, digits and "-", no "@")')
]
TeamSlug = Annotated[
    str, Field(pattern=r"^[A-Za-z0-9_.-]+$"), Expect('a team slug without the organization, like "backend"')
]
GateName = Annotated[
    str,
    Field(pattern=r"^[a-z0-9][a-z0-9_-]*$"),
    Expect('a name of lowercase letters, digits, "-" and "_", starting with a letter or digit'),
]
RESERVED_GATES = ("typecheck", "test", "lint", "setup", "dependencies")
"""Check-run names the bot writes itself: no custom gate may take one."""
NonEmpty = Annotated[str, Field(min_length=1)]
SetupCommand = Annotated[str, Field(min_length=1, max_length=2000)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelPrice(_Section):
    """The price of one model, in US dollars per million tokens."""

    input_per_mtok: float = Field(ge=0, description="US dollars per million input (prompt) tokens.")
    output_per_mtok: float = Field(ge=0, description="US dollars per million output (completion) tokens.")


class LLMConfig(_Section):
    """Which language model plans, and how."""

    provider: LLMProvider | None = Field(
        None, description="Overrides PLAN_CASCADE_LLM_PROVIDER for this repo."
    )
    model: str | None = Field(None, description="Model name for this repository (null = the server's).")
    planning_models: list[str] = Field(
        [],
        description="Cross-checked planning: each proposes, one synthesis. `model` uses this "
        "repository's provider; `provider:model` (e.g. `openai:gpt-5`) another one, keyed from the "
        "server's environment.",
    )
    multi_perspective: Literal["auto", "always", "never"] = Field(
        "auto", description="Plan from several perspectives first (auto = when the issue is large)."
    )
    quality_review: bool = Field(True, description="LLM review of completeness, granularity, testability.")
    exploration: bool = Field(
        True, description="Read the code (read-only) before planning, to ground the plan."
    )
    exploration_max_steps: int = Field(12, ge=1, le=60, description="Model calls exploration may make.")
    exploration_max_cost_usd: float = Field(0.5, gt=0, le=10, description="US dollars exploration may spend.")
    prices: dict[str, ModelPrice] = Field({}, description="Prices of models the built-in table lacks.")

    @model_validator(mode="after")
    def _check_planning_models(self) -> LLMConfig:
        empty = [entry for entry in self.planning_models if not split_model_ref(entry)[1]]
        if empty:
            listed = ", ".join(repr(entry) for entry in empty)
            raise problems_error([f"llm.planning_models: {listed} names no model (write `provider:model`)"])
        return self


class AgentPhases(_Section):
    """Fallback chains of agents per phase; an empty chain means [agent.default]."""

    planning: list[str] = Field(
        [], description="Not used yet: exploration before planning is the built-in read-only explorer."
    )
    implementation: list[str] = Field([], description="Agents that implement a story.")
    retry: list[str] = Field([], description="Agents that fix a story after its gates failed.")
    refactor: list[str] = Field([], description="Agents that run refactoring stories.")
    review: list[str] = Field([], description="Agents that review a finished story.")


class AgentLimits(_Section):
    """Limits of one agent run on one story."""

    max_iterations: int = Field(40, ge=1, description="Agent steps (model calls) per story.")
    max_tokens: int = Field(400_000, ge=1, description="Tokens one story may use.")
    max_cost_usd: float = Field(3.0, gt=0, description="US dollars one story may spend on the model.")
    max_wall_seconds: int = Field(1800, ge=1, description="Wall-clock seconds one story may run.")
    tool_timeout_seconds: int = Field(
        120, ge=1, description="Seconds before a tool call's process is killed."
    )
    output_limit_chars: int = Field(20_000, ge=1, description="Characters of tool output shown to the model.")


class AgentConfig(_Section):
    """Which coding agents implement stories, and their limits."""

    default: str = Field("builtin", description="Agent used when no phase or story type names one.")
    phases: AgentPhases = Field(
        default_factory=AgentPhases, description="Fallback chains of agents per phase."
    )
    story_types: dict[StoryType, list[str]] = Field({}, description="Agent chains per story type.")
    commands: dict[str, NonEmpty] = Field({}, description="Named command agents: name -> command template.")
    limits: AgentLimits = Field(
        default_factory=AgentLimits, description="Limits of one agent run on one story."
    )
    sandbox: Literal["auto", "required", "none"] = Field(
        "auto",
        description=(
            "auto = the operator's PLAN_CASCADE_SANDBOX; required = never run agents or gates unconfined; "
            "none = no opinion (it never loosens the operator's setting)."
        ),
    )
    egress: AgentEgress = None
    mcp_servers: dict[str, McpServer] = Field(
        {},
        max_length=20,
        description="MCP servers whose allowed tools agents get (see agent.mcp_servers.<name>).",
    )
    author_name: str | None = Field(None, min_length=1, description="Git author name (null = the App's bot).")
    author_email: str | None = Field(None, min_length=3, description="Git author email (null = the bot's).")

    @model_validator(mode="after")
    def _check_names(self) -> AgentConfig:
        problems = agent_problems(self, phases=PHASES) + mcp_problems(self.mcp_servers)
        if problems:
            raise problems_error(problems)
        return self


class CustomGate(_Section):
    """A project-specific quality gate."""

    name: GateName = Field(description="Gate name shown in check runs.")
    command: NonEmpty = Field(description="Shell command run in the worktree; exit status 0 passes.")


class GatesConfig(_Section):
    """Commands every story must pass before its pull request opens."""

    typecheck: str | None = Field(None, description="Type-check command (null = detect it, or skip).")
    test: str | None = Field(None, description="Test command (null = detect it, or skip).")
    lint: str | None = Field(None, description="Lint command (null = detect it, or skip).")
    custom: list[CustomGate] = Field([], description="More gates, run after the three above.")
    detect: bool = Field(
        True, description="Detect unset gates from pyproject, package.json, Cargo, go.mod, Makefile."
    )
    timeout_seconds: int = Field(900, ge=1, description="Seconds one gate command may run.")
    max_retries: int = Field(
        2, ge=0, description="Retries of a story, with the gate output, after a failure."
    )
    integration: bool = Field(True, description="Run the gates again on the integrated result of each batch.")
    strict: bool = Field(
        False,
        description="Configured gates must pass outright (not judged against the base like detected ones).",
    )

    @model_validator(mode="after")
    def _check_unique_names(self) -> GatesConfig:
        seen: set[str] = set()
        problems = []
        for index, gate in enumerate(self.custom):
            if gate.name in seen or gate.name in RESERVED_GATES:
                loc = ("gates", "custom", index, "name")
                problems.append(f'{format_key(loc)}: the gate name "{gate.name}" is already used — rename it')
            seen.add(gate.name)
        if problems:
            raise problems_error(problems)
        return self


class ExecutionConfig(_Section):
    """How approved plans run."""

    max_parallel: int = Field(3, ge=1, le=32, description="Stories of one batch that run at the same time.")
    stacking: Literal["stacked", "sequential"] = Field(
        "stacked", description="stacked = PRs build on the previous batch; sequential = wait for merges."
    )
    base_branch: str | None = Field(
        None, description="Branch work starts from and PRs target (null = default)."
    )
    backend: Literal["local", "actions"] = Field(
        "local", description="Run agents on the server or in Actions."
    )
    workflow: str = Field(
        "plan-cascade.yml", min_length=1, description="Workflow file run by backend actions."
    )
    runner_timeout_minutes: int = Field(60, ge=1, description="Minutes one Actions run may take.")
    auto_rebase: bool = Field(
        False, description="Rebuild batch PRs on the base branch when it moves and they stop merging cleanly."
    )


class LimitsConfig(_Section):
    """Budgets of one issue, planning and implementation together."""

    max_stories: int = Field(
        20, ge=1, le=500, description="Largest plan accepted; bigger ones must be split."
    )
    max_cost_usd: float = Field(25.0, gt=0, description="US dollars one issue may spend on models.")
    max_tokens: int = Field(5_000_000, ge=1, description="Tokens one issue may use.")


class PathsConfig(_Section):
    """Paths agents may not change, and known fixtures the secret scan skips."""

    deny: list[str] = Field(
        [".github/workflows/**"], description="Globs agents may not change (** crosses dirs)."
    )
    secret_scan_ignore: list[NonEmpty] = Field(
        [],
        description="Globs of known test fixtures the secret scan before each push skips "
        "(the server's own secrets are looked for everywhere).",
    )

    def denies(self, path: str) -> bool:
        """Whether `path` (relative to the repository root) matches a deny glob."""
        return is_denied(path, self.deny)


class DependenciesConfig(_Section):
    """Packages a story adds or upgrades, looked up in the GitHub Advisory Database."""

    check: bool = Field(True, description="Look up added and upgraded packages (check run, PR body table).")
    fail_on: Literal["low", "medium", "high", "critical", "never"] = Field(
        "high",
        description="Lowest advisory severity that fails the story (malware always does); never = report.",
    )


class PublishingConfig(_Section):
    """How pull requests are opened."""

    reviewers: list[Login] = Field([], description="Users asked to review each pull request.")
    team_reviewers: list[TeamSlug] = Field([], description="Team slugs asked to review each pull request.")
    labels: list[NonEmpty] = Field(["plan-cascade"], description="Labels added to each pull request.")
    draft_on_failure: bool = Field(True, description="Open the PR as a draft when its gates still fail.")
    acceptance_review: bool = Field(
        True, description="Review each batch's diff against its stories' acceptance criteria (read-only)."
    )
    acceptance_retries: int = Field(
        1,
        ge=0,
        le=3,
        description="Times a story with a criterion reviewed as not met goes back to its agent.",
    )
    commits: Literal["auto", "api", "git"] = Field("auto", description="api = GitHub makes the commits.")


class CIConfig(_Section):
    """The repository's own CI on each batch pull request."""

    watch: bool = Field(True, description="Follow the batch PRs' checks: re-run flaky jobs, fix failures.")
    checks: list[NonEmpty] = Field(
        [], description="Checks that count, by name or glob; [] = every one that ran."
    )
    max_fix_attempts: int = Field(2, ge=0, le=5, description="Fix commits per batch PR for CI failures.")
    pending_minutes: int = Field(
        60, ge=1, le=1440, description="Minutes after which pending checks are reported."
    )


class RepoConfig(_Section):
    """Plan Cascade's configuration of one repository, `.github/plan-cascade.yml` on the default branch."""

    trigger_label: str = Field(
        "plan-cascade", min_length=1, max_length=50, description="Label asking for a plan."
    )
    approvers: list[Login] = Field(
        [], description="If set, only these logins may approve (plus write access)."
    )
    required_approvals: int = Field(
        1, ge=1, description="Approvals a plan needs before implementation starts."
    )
    plan_pr: bool = Field(False, description="Also open a draft PR with .plan-cascade/<issue>/prd.yaml.")
    setup: list[SetupCommand] | None = Field(
        None,
        max_length=30,
        description="Shell commands that prepare each story's environment; null = detect, [] = none.",
    )
    setup_timeout_seconds: int = Field(
        900, ge=10, le=7200, description="Time limit of all setup commands of one worktree."
    )
    llm: LLMConfig = Field(default_factory=LLMConfig, description="Which language model plans, and how.")
    agent: AgentConfig = Field(default_factory=AgentConfig, description="Coding agents and their limits.")
    gates: GatesConfig = Field(default_factory=GatesConfig, description="Commands every story must pass.")
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig, description="How approved plans run.")
    limits: LimitsConfig = Field(default_factory=LimitsConfig, description="Budgets of one issue.")
    paths: PathsConfig = Field(default_factory=PathsConfig, description="Paths agents may not change.")
    dependencies: DependenciesConfig = Field(
        default_factory=DependenciesConfig, description="New dependencies checked against advisories."
    )
    publishing: PublishingConfig = Field(
        default_factory=PublishingConfig, description="How pull requests are opened."
    )
    ci: CIConfig = Field(default_factory=CIConfig, description="The repository's own CI on batch PRs.")
    epics: EpicsConfig = Field(
        default_factory=EpicsConfig, description="Epics whose features live in other repositories."
    )
    schedules: list[Schedule] = Field(
        [],
        max_length=50,
        description="Recurring work: an issue opened and planned on time (docs/schedules.md).",
    )

    @model_validator(mode="after")
    def _check_approvals(self) -> RepoConfig:
        if self.approvers and self.required_approvals > len(self.approvers):
            raise problems_error(
                [
                    f"required_approvals: is {self.required_approvals} but approvers lists only "
                    f"{len(self.approvers)} — lower it or add approvers"
                ]
            )
        return self

    @model_validator(mode="after")
    def _check_schedules(self) -> RepoConfig:
        problems = schedule_problems(self.schedules)
        if problems:
            raise problems_error(problems)
        return self

    def known_agents(self) -> tuple[str, ...]:
        """Agent names valid here: the built-in ones and the keys of agent.commands."""
        return BUILTIN_AGENTS + tuple(name for name in self.agent.commands if name not in BUILTIN_AGENTS)

    def agent_chain(
        self, phase: str, *, story_type: str | None = None, story_override: str | None = None
    ) -> list[str]:
        """Agents to try in order: story override, story type's chain, phase's chain, default, builtin."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; phases are {', '.join(PHASES)}")
        chain = [story_override] if story_override else []
        if story_type is not None:
            chain += self.agent.story_types.get(story_type, [])  # type: ignore[call-overload]
        chain += [*getattr(self.agent.phases, phase), self.agent.default, "builtin"]
        return list(dict.fromkeys(chain))
