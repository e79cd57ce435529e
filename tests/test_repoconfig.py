"""Tests of bot.config.repo: loading, merging, validation messages, agent chains, deny globs, docs."""

from __future__ import annotations

import inspect
import json
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from bot.config.load import deep_merge, load_repo_config, repo_config_json_schema
from bot.config.repo import STORY_TYPES, RepoConfig, format_config_problems_markdown, is_denied
from bot.errors import RepoConfigError
from bot.plan.model import StoryType

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "templates" / "plan-cascade.example.yml"
DOCS = ROOT / "docs" / "configuration.md"
CLOSING = "Fix the file on the default branch and comment `/plan-cascade plan` again. Nothing was run."


def problems_of(text: str) -> list[str]:
    with pytest.raises(RepoConfigError) as caught:
        load_repo_config(text)
    return caught.value.problems


# --- defaults and merging ---------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "", "  \n", "# everything commented out\n# trigger_label: x\n"])
def test_missing_or_empty_file_gives_defaults(text: str | None) -> None:
    assert load_repo_config(text) == RepoConfig()


def test_default_values_match_the_public_contract() -> None:
    config = RepoConfig()
    assert config.trigger_label == "plan-cascade"
    assert (config.approvers, config.required_approvals, config.plan_pr) == ([], 1, False)
    assert (config.llm.provider, config.llm.model, config.llm.multi_perspective) == (None, None, "auto")
    assert config.llm.quality_review is True
    assert config.agent.default == "builtin"
    assert config.agent.limits.model_dump() == {
        "max_iterations": 40,
        "max_tokens": 400_000,
        "max_cost_usd": 3.0,
        "max_wall_seconds": 1800,
        "tool_timeout_seconds": 120,
        "output_limit_chars": 20_000,
    }
    # The App's own bot unless the repository names another author (learned from GitHub).
    assert (config.agent.author_name, config.agent.author_email) == (None, None)
    assert (config.gates.timeout_seconds, config.gates.max_retries, config.gates.detect) == (900, 2, True)
    assert config.execution.model_dump() == {
        "max_parallel": 3,
        "stacking": "stacked",
        "base_branch": None,
        "backend": "local",
        "workflow": "plan-cascade.yml",
        "runner_timeout_minutes": 60,
        "auto_rebase": False,
    }
    assert config.limits.model_dump() == {"max_stories": 20, "max_cost_usd": 25.0, "max_tokens": 5_000_000}
    assert config.paths.deny == [".github/workflows/**"]
    assert config.publishing.labels == ["plan-cascade"]
    assert config.publishing.draft_on_failure is True
    assert config.publishing.commits == "auto"


def test_story_types_match_the_plan_model() -> None:
    assert STORY_TYPES == tuple(member.value for member in StoryType)


def test_mutable_defaults_are_not_shared() -> None:
    assert RepoConfig().paths.deny is not RepoConfig().paths.deny
    assert RepoConfig().agent.phases.review is not RepoConfig().agent.phases.review


def test_nested_section_merges_and_keeps_sibling_defaults() -> None:
    config = load_repo_config("execution:\n  max_parallel: 5\nagent:\n  limits:\n    max_iterations: 7\n")
    assert config.execution.max_parallel == 5
    assert config.execution.stacking == "stacked"
    assert config.execution.workflow == "plan-cascade.yml"
    assert config.agent.limits.max_iterations == 7
    assert config.agent.limits.max_tokens == 400_000
    assert config.agent.default == "builtin"
    assert config.gates == RepoConfig().gates


def test_lists_replace_the_default_instead_of_extending_it() -> None:
    config = load_repo_config("paths:\n  deny: ['secrets/**']\npublishing:\n  labels: []\n")
    assert config.paths.deny == ["secrets/**"]
    assert config.publishing.labels == []


def test_an_empty_section_keeps_its_defaults() -> None:
    config = load_repo_config("llm:\nagent:\n  limits:\n")
    assert config == RepoConfig()


def test_deep_merge_merges_mappings_and_replaces_everything_else() -> None:
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 2, "c": {"z": 3}}
    merged = deep_merge(base, {"a": {"y": [9]}, "b": {"new": 1}, "c": None, "d": 4})
    assert merged == {"a": {"x": 1, "y": [9]}, "b": {"new": 1}, "c": {"z": 3}, "d": 4}
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": 2, "c": {"z": 3}}


def test_values_of_every_section_are_read() -> None:
    text = """
trigger_label: plan-me
approvers: [alice, bob]
required_approvals: 2
llm: {provider: openai-compatible, model: m, prices: {m: {input_per_mtok: 1, output_per_mtok: 2.5}}}
agent:
  default: aider
  commands: {fast: "run {prompt_file} {story_id} {worktree} {{literal}}"}
  phases: {implementation: [fast, claude-code]}
  story_types: {docs: [codex]}
gates: {test: pytest -q, custom: [{name: docs-build, command: make docs}]}
execution: {backend: actions, base_branch: develop}
publishing: {team_reviewers: [backend], reviewers: [carol]}
"""
    config = load_repo_config(text)
    assert config.trigger_label == "plan-me"
    assert config.required_approvals == 2
    assert config.llm.prices["m"].output_per_mtok == 2.5
    assert config.agent.commands["fast"].startswith("run {prompt_file}")
    assert config.gates.custom[0].name == "docs-build"
    assert config.execution.base_branch == "develop"
    assert config.known_agents() == ("builtin", "claude-code", "aider", "codex", "command", "fast")


# --- problems ---------------------------------------------------------------------------


def test_typo_at_top_level_suggests_the_key() -> None:
    assert problems_of("trigger_lable: x\n") == ['trigger_lable: unknown key — did you mean "trigger_label"?']


def test_nested_typo_suggests_the_key_and_message_counts_problems() -> None:
    with pytest.raises(RepoConfigError) as caught:
        load_repo_config("execution:\n  max_paralel: 4\ngates:\n  max_retries: two\n")
    assert caught.value.message == ".github/plan-cascade.yml has 2 problems"
    assert caught.value.problems == [
        'gates.max_retries: must be an integer ≥ 0 (got "two")',
        'execution.max_paralel: unknown key — did you mean "max_parallel"?',
    ]


def test_unknown_key_with_nothing_close_lists_the_valid_keys_without_a_guess() -> None:
    assert problems_of("limits:\n  zzz: 1\n") == [
        "limits.zzz: unknown key — valid keys are max_stories, max_cost_usd, max_tokens"
    ]


def test_one_problem_is_singular() -> None:
    with pytest.raises(RepoConfigError) as caught:
        load_repo_config("plan_pr: maybe\n")
    assert caught.value.message == ".github/plan-cascade.yml has 1 problem"
    assert caught.value.problems == ['plan_pr: must be true or false (got "maybe")']


def test_wrong_types_and_ranges() -> None:
    text = (
        "approvers: alice\nllm: [1]\nexecution:\n  max_parallel: 50\n"
        "limits:\n  max_cost_usd: -1\n  max_tokens: 1.5\ngates:\n  test: 5\n"
    )
    assert problems_of(text) == [
        'approvers: must be a list of strings (got "alice")',
        "llm: must be a mapping of keys to values (got a list)",
        "gates.test: must be a string, or null (got 5)",
        "execution.max_parallel: must be an integer between 1 and 32 (got 50)",
        "limits.max_cost_usd: must be a number > 0 (got -1)",
        "limits.max_tokens: must be an integer ≥ 1 (got 1.5)",
    ]


def test_wrong_enum_values() -> None:
    assert problems_of("execution:\n  stacking: stackd\nllm:\n  provider: claude\n") == [
        "llm.provider: must be one of anthropic, openai, deepseek, ollama, openai-compatible, or null"
        ' (got "claude")',
        'execution.stacking: must be one of stacked, sequential (got "stackd")',
    ]


def test_unknown_story_type_suggests_the_closest() -> None:
    assert problems_of("agent:\n  story_types:\n    featur: [aider]\n") == [
        'agent.story_types.featur: unknown key — did you mean "feature"?'
    ]


def test_entries_of_lists_and_mappings_are_named_by_index_and_key() -> None:
    text = """
approvers: ['@alice']
gates:
  custom:
    - {name: Lint Docs, command: x}
    - {name: test, command: y}
    - {name: a}
llm:
  prices:
    gpt-4.1: {input_per_mtok: 1}
"""
    assert problems_of(text) == [
        'approvers[0]: must be a GitHub login (letters, digits and "-", no "@") (got "@alice")',
        'llm.prices["gpt-4.1"].output_per_mtok: required key is missing (must be a number ≥ 0)',
        'gates.custom[0].name: must be a name of lowercase letters, digits, "-" and "_", '
        'starting with a letter or digit (got "Lint Docs")',
        "gates.custom[2].command: required key is missing (must be a non-empty string)",
    ]


def test_custom_gate_names_must_be_unique() -> None:
    text = "gates:\n  custom:\n    - {name: docs, command: a}\n    - {name: docs, command: b}\n"
    assert problems_of(text) == ['gates.custom[1].name: the gate name "docs" is already used — rename it']


def test_more_required_approvals_than_approvers() -> None:
    assert problems_of("approvers: [alice]\nrequired_approvals: 2\n") == [
        "required_approvals: is 2 but approvers lists only 1 — lower it or add approvers"
    ]


def test_yaml_syntax_error_names_line_and_column() -> None:
    assert problems_of("trigger_label: x\nexecution:\n  max_parallel: 3\n  stacking: [stacked\n") == [
        "(file): line 5, column 1: YAML syntax error: expected ',' or ']', but got '<stream end>'"
        " (while parsing a flow sequence)"
    ]


def test_repeated_key_is_an_error_not_silently_dropped() -> None:
    assert problems_of("gates:\n  test: a\n\ngates:\n  lint: b\n") == [
        '(file): line 4, column 1: duplicate key "gates" — keep one and merge what is under them'
    ]


def test_yaml_merge_keys_are_not_duplicates() -> None:
    text = "execution:\n  <<: {max_parallel: 2, stacking: sequential}\n  max_parallel: 4\n"
    loaded = load_repo_config(text)
    assert (loaded.execution.max_parallel, loaded.execution.stacking) == (4, "sequential")


@pytest.mark.parametrize(
    ("text", "kind"), [("- a\n- b\n", "a list"), ("hello\n", "a string"), ("42\n", "a number")]
)
def test_file_must_be_a_mapping(text: str, kind: str) -> None:
    assert problems_of(text) == [f"(file): must be a mapping of keys to values, got {kind}"]


def test_unknown_agent_names_are_listed_with_the_valid_ones() -> None:
    text = "agent:\n  default: claud-code\n  phases:\n    implementation: [aider, zzz]\n"
    assert problems_of(text) == [
        'agent.default: unknown agent "claud-code" — did you mean "claude-code"? Valid agents: builtin, '
        "claude-code, aider, codex, command, or a name you define under agent.commands",
        'agent.phases.implementation[1]: unknown agent "zzz" — valid agents are builtin, claude-code, '
        "aider, codex, command, or a name you define under agent.commands",
    ]


def test_agent_names_in_story_types_may_be_command_agents() -> None:
    text = "agent:\n  commands: {mine: 'go {prompt_file}'}\n  story_types:\n    docs: [mine, mien]\n"
    assert problems_of(text) == [
        'agent.story_types.docs[1]: unknown agent "mien" — did you mean "mine"? Valid agents: builtin, '
        "claude-code, aider, codex, command, mine (from agent.commands)"
    ]


def test_command_templates_only_use_the_known_placeholders() -> None:
    text = (
        "agent:\n  commands:\n"
        "    mine: 'run {prompt_file} ${HOME} {worktree!r}'\n"
        "    aider: 'x'\n"
        "    open: 'x {'\n"
    )
    fix = "use {prompt_file}, {story_id}, {worktree} or {mcp_config}, and write {{ and }} for literal braces"
    assert problems_of(text) == [
        f"agent.commands.mine: unknown placeholder {{HOME}} — {fix}",
        f"agent.commands.mine: unknown placeholder {{worktree!r}} — {fix}",
        'agent.commands.aider: "aider" is a built-in agent — pick another name',
        f"agent.commands.open: Single '{{' encountered in format string — {fix}",
    ]


def test_model_checks_agent_names_when_built_in_code_too() -> None:
    with pytest.raises(ValidationError, match='unknown agent "nope"'):
        RepoConfig.model_validate({"agent": {"default": "nope"}})


def test_problems_in_different_sections_are_reported_together() -> None:
    problems = problems_of("agent:\n  default: nope\nexecution:\n  backend: cloud\n")
    assert [line.split(":")[0] for line in problems] == ["agent.default", "execution.backend"]


# --- markdown ---------------------------------------------------------------------------


def test_markdown_lists_problems_with_keys_in_backticks() -> None:
    with pytest.raises(RepoConfigError) as caught:
        load_repo_config("execution:\n  max_paralel: 4\n  stacking: stackd\n")
    body = format_config_problems_markdown(caught.value)
    assert body.splitlines() == [
        "### `.github/plan-cascade.yml` has 2 problems",
        "",
        '- `execution.stacking`: must be one of stacked, sequential (got "stackd")',
        '- `execution.max_paralel`: unknown key — did you mean "max\\_parallel"?',
        "",
        CLOSING,
    ]


def test_markdown_of_file_problem_and_hostile_values() -> None:
    err = RepoConfigError(
        ".github/plan-cascade.yml has 2 problems",
        [
            "(file): line 2, column 1: YAML syntax error: found '<stream end>'",
            'approvers[0]: bad (got "<!-- x --> @bob")',
        ],
    )
    lines = format_config_problems_markdown(err).splitlines()
    assert lines[2] == "- (file): line 2, column 1: YAML syntax error: found '\\<stream end\\>'"
    assert lines[3] == '- `approvers[0]`: bad (got "\\<!-- x --\\> @\u200bbob")'
    assert (
        lines[-1]
        == "Fix the file on the default branch and comment `/plan-cascade plan` again. Nothing was run."
    )


# --- agent chains -----------------------------------------------------------------------


def chain_config() -> RepoConfig:
    return load_repo_config(
        """
agent:
  default: aider
  commands: {mine: 'go {prompt_file}'}
  phases: {implementation: [claude-code, mine], retry: [codex]}
  story_types: {docs: [mine, codex]}
"""
    )


def test_agent_chain_orders_override_story_type_phase_default_builtin() -> None:
    config = chain_config()
    chain = config.agent_chain("implementation", story_type="docs", story_override="command")
    assert chain == ["command", "mine", "codex", "claude-code", "aider", "builtin"]


def test_agent_chain_without_story_details_uses_phase_then_default() -> None:
    assert chain_config().agent_chain("retry") == ["codex", "aider", "builtin"]
    assert chain_config().agent_chain("review", story_type="feature") == ["aider", "builtin"]


def test_agent_chain_defaults_end_with_builtin_once() -> None:
    assert RepoConfig().agent_chain("planning") == ["builtin"]
    assert RepoConfig().agent_chain("implementation", story_override="builtin") == ["builtin"]


def test_agent_chain_rejects_an_unknown_phase() -> None:
    with pytest.raises(ValueError, match="unknown phase 'deploy'"):
        RepoConfig().agent_chain("deploy")


# --- deny globs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "globs", "denied"),
    [
        (".github/workflows/ci.yml", [".github/workflows/**"], True),
        (".github/workflows/sub/deep.yml", [".github/workflows/**"], True),
        ("./.github/workflows/ci.yml", [".github/workflows/**"], True),
        ("/.github/workflows/ci.yml", [".github/workflows/**"], True),
        ("docs/../.github/workflows/ci.yml", [".github/workflows/**"], True),
        (".github/dependabot.yml", [".github/workflows/**"], False),
        (".github/workflows-old/ci.yml", [".github/workflows/**"], False),
        ("key.pem", ["*.pem"], True),
        ("certs/key.pem", ["*.pem"], True),
        ("certs/key.pem", ["/*.pem"], False),
        ("key.pem", ["/*.pem"], True),
        ("certs/key.pem", ["**/*.pem"], True),
        ("key.pem", ["**/*.pem"], True),
        ("a/b/c/secret.txt", ["a/**/secret.txt"], True),
        ("a/secret.txt", ["a/**/secret.txt"], True),
        ("b/a/secret.txt", ["a/**/secret.txt"], False),
        ("src/x.py", ["src/*.py"], True),
        ("src/sub/x.py", ["src/*.py"], False),
        ("src/a1.py", ["src/a?.py"], True),
        ("src/a/.py", ["src/a?.py"], False),
        ("v1.lock", ["v[0-9].lock"], True),
        ("va.lock", ["v[!0-9].lock"], True),
        ("v1.lock", ["v[!0-9].lock"], False),
        ("v].lock", ["v[]].lock"], True),
        ("v[.lock", ["v[[].lock"], True),
        ("v[.lock", ["v[.lock"], True),
        ("vendor/lib/x.c", ["vendor/"], True),
        ("vendor/lib/x.c", ["vendor"], True),
        ("lib/vendor/x.c", ["vendor"], True),
        ("lib/vendor/x.c", ["/vendor"], False),
        ("vendors/x.c", ["vendor"], False),
        ("secrets/prod/db.env", ["./secrets"], True),
        ("a+b(c).txt", ["a+b(c).txt"], True),
        ("x", ["", "  "], False),
        ("anything", [], False),
    ],
)
def test_is_denied(path: str, globs: list[str], denied: bool) -> None:
    assert is_denied(path, globs) is denied


def test_paths_config_denies_workflows_by_default() -> None:
    assert RepoConfig().paths.denies(".github/workflows/release.yml")
    assert not RepoConfig().paths.denies("src/app.py")


# --- example, docs, schema --------------------------------------------------------------


def test_example_file_loads_and_every_value_is_the_default() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    assert load_repo_config(text) == RepoConfig()
    assert yaml.safe_load(text) == RepoConfig().model_dump(mode="json")


def _strip_optional(annotation: Any) -> Any:
    if get_origin(annotation) not in (Union, types.UnionType):
        return annotation
    args = [arg for arg in get_args(annotation) if arg is not type(None)]
    return args[0] if len(args) == 1 else annotation


def _is_model(annotation: Any) -> bool:
    return inspect.isclass(annotation) and issubclass(annotation, BaseModel)


def model_keys(model: type[BaseModel], section: str = "") -> Iterator[tuple[str, str, Any]]:
    """(section, key, default or "required") for every leaf field, walking nested models."""
    for name, field in model.model_fields.items():
        path = f"{section}.{name}" if section else name
        annotation = _strip_optional(field.annotation)
        if _is_model(annotation):
            yield from model_keys(annotation, path)
            continue
        default = "required" if field.is_required() else field.get_default(call_default_factory=True)
        yield section, name, default
        inner = get_args(annotation)[-1] if get_args(annotation) else None
        if get_origin(annotation) is list and _is_model(inner):
            yield from model_keys(inner, f"{path}[]")
        elif get_origin(annotation) is dict and _is_model(inner):
            yield from model_keys(inner, f"{path}.<name>")


def docs_tables() -> dict[tuple[str, str], str]:
    """(section, key) -> the Default cell, from docs/configuration.md."""
    rows: dict[tuple[str, str], str] = {}
    section = None
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        heading = re.fullmatch(r"## (?:`(.+)`|Top level)", line)
        if heading:
            section = heading[1] or ""
        row = re.fullmatch(r"\| `([a-z_]+)` \| .+? \| (.+?) \| .+ \|", line)
        if row and section is not None:
            rows[(section, row[1])] = row[2]
    return rows


def test_model_walk_finds_nested_entry_models() -> None:
    sections = {section for section, _, _ in model_keys(RepoConfig)}
    assert {"", "agent.limits", "agent.phases", "llm.prices.<name>", "gates.custom[]"} <= sections


def test_docs_document_every_key_with_its_default() -> None:
    documented = docs_tables()
    keys = list(model_keys(RepoConfig))
    for section, name, default in keys:
        cell = documented.get((section, name))
        assert cell is not None, f"docs/configuration.md has no row for {section or 'top level'}.{name}"
        if default == "required":
            assert cell == "required", (section, name)
        else:
            assert json.loads(cell.strip("`")) == default, (section, name)
    assert set(documented) == {(section, name) for section, name, _ in keys}


def test_every_schema_property_has_a_description_and_no_extras() -> None:
    schema = repo_config_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    objects = [schema, *schema["$defs"].values()]
    assert len(objects) == 17  # RepoConfig and its 16 nested models
    for obj in objects:
        assert obj["additionalProperties"] is False, obj["title"]
        for name, prop in obj["properties"].items():
            # pydantic leaves out a $ref's description when it repeats the model's own.
            referenced = schema["$defs"][prop["$ref"].rsplit("/", 1)[1]] if "$ref" in prop else {}
            description = prop.get("description") or referenced.get("description")
            assert description, f"{obj['title']}.{name} has no description"
            assert "\n" not in description
