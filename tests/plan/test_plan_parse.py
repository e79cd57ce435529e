"""parse_prd: YAML or JSON in, a valid PRD or a PlanValidationError with exact lines out."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import PlanValidationError
from bot.plan import parse_prd, prd_to_json, prd_to_yaml
from tests.plan.plan_builders import build_prd, build_story

VALID = """\
title: Add rate limiting
stories:
  - id: STORY-001
    title: Limiter
    acceptance_criteria: ["limiter.allow() returns False after 10 calls within 1 s"]
"""


def problems_of(text: str, **kwargs: int) -> list[str]:
    with pytest.raises(PlanValidationError) as caught:
        parse_prd(text, **kwargs)
    error = caught.value
    count = len(error.problems)
    assert error.message == f"the PRD has {count} problem{'' if count == 1 else 's'}"
    return error.problems


def test_minimal_yaml_and_its_json_form_parse_to_the_same_plan() -> None:
    prd = parse_prd(VALID)
    assert parse_prd(json.dumps(prd.model_dump(mode="json"))) == prd
    assert prd.stories[0].id == "STORY-001"


def test_enum_value_not_allowed() -> None:
    text = VALID + "    type: feture\n"
    assert problems_of(text) == [
        'stories[0].type: "feture" is not one of feature, bugfix, refactor, test, docs, infra'
    ]


def test_plan_level_enums() -> None:
    text = VALID + "strategy: big\nrisk: 3\n"
    assert problems_of(text) == [
        'strategy: "big" is not one of direct, hybrid, mega',
        "risk: 3 is not one of low, medium, high",
    ]


def test_unknown_key_with_suggestion() -> None:
    assert problems_of(VALID + "    dependson: []\n") == [
        'stories[0]: unknown key "dependson" (did you mean depends_on?)'
    ]


def test_unknown_top_level_key() -> None:
    assert problems_of(VALID + "colour: red\n") == ['top level: unknown key "colour"']


def test_missing_fields() -> None:
    assert problems_of("stories:\n  - acceptance_criteria: [x y z]\n") == [
        "title: missing",
        "stories[0].id: missing",
        "stories[0].title: missing",
    ]


def test_unsupported_version() -> None:
    assert problems_of(VALID + "version: 2\n") == ["version: 2 is not supported (only version 1 is)"]


def test_unquoted_colon_in_a_criterion_and_empty_lists() -> None:
    text = """\
title: t
stories:
  - id: STORY-001
    title: x
    acceptance_criteria:
      - GET /health: returns 200
    depends_on:
    files:
"""
    assert problems_of(text) == [
        "stories[0].depends_on: expected a list, got null (write [] for none)",
        "stories[0].acceptance_criteria[0]: expected a string, got a mapping "
        '(put text that contains ": " in quotes)',
        "stories[0].files: expected a list, got null (write [] for none)",
    ]


def test_wrong_scalar_types() -> None:
    text = VALID.replace("title: Limiter", "title: 42") + "    depends_on: STORY-000\n    agent: no\n"
    assert problems_of(text) == [
        "stories[0].title: expected a string, got a number (put it in quotes)",
        "stories[0].depends_on: expected a list, got a string",
        "stories[0].agent: expected a string, got a boolean (put it in quotes)",
    ]


def test_story_must_be_a_mapping() -> None:
    assert problems_of("title: t\nstories: [STORY-001]\n") == ["stories[0]: expected a mapping, got a string"]


def test_dates_stay_text() -> None:
    assert parse_prd(VALID.replace("title: Add rate limiting", "title: 2024-01-01")).title == "2024-01-01"


def test_yaml_syntax_error_names_the_line() -> None:
    text = VALID + "  - id: STORY-002\n    title: [unclosed\n"
    [problem] = problems_of(text)
    assert problem.startswith("YAML syntax error at line 8, column 1: ")


def test_bad_indentation_names_the_line() -> None:
    [problem] = problems_of("title: t\nstories:\n  - id: A-001\n   title: x\n")
    assert problem.startswith("YAML syntax error at line 4, column ")


def test_duplicate_yaml_key() -> None:
    assert problems_of(VALID + "title: again\n") == [
        "YAML error at line 6, column 1: found duplicate key 'title' "
        "(while constructing a mapping started at line 1)"
    ]


def test_json_syntax_error_names_the_line() -> None:
    assert problems_of('{\n  "title": "x"\n  "stories": []\n}') == [
        "JSON syntax error at line 3, column 3: Expecting ',' delimiter"
    ]


def test_json_that_yaml_can_read_is_accepted() -> None:
    assert problems_of('{"title": "x", }') == ["no stories"]


def test_duplicate_json_key() -> None:
    assert problems_of('{"title": "x", "title": "y"}') == ["JSON object has the key 'title' twice"]


def test_yaml_flow_mapping_is_not_mistaken_for_json() -> None:
    text = "{title: t, stories: [{id: A-001, title: x, acceptance_criteria: [count() returns 3]}]}"
    assert parse_prd(text).stories[0].id == "A-001"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "the PRD is empty"),
        ("# only a comment\n", "the PRD is empty"),
        ("- a\n- b\n", "the PRD must be a mapping with keys version, title, stories... (got a list)"),
        ("just words", "the PRD must be a mapping with keys version, title, stories... (got a string)"),
        ("title: a\x00", "YAML syntax error at line 1: character #x0000 is not allowed"),
        ("title: !!int abc\n", "YAML value could not be read: invalid literal for int() with base 10: 'abc'"),
    ],
)
def test_unreadable_documents(text: str, problem: str) -> None:
    assert problems_of(text) == [problem]


def test_unsafe_tags_are_refused() -> None:
    [problem] = problems_of("title: !!python/object/apply:os.system [echo hi]\n")
    assert "could not determine a constructor" in problem


def test_semantic_rules_run_after_parsing() -> None:
    text = VALID + "    depends_on: [STORY-001]\n"
    assert problems_of(text) == ["dependency cycle: STORY-001 → STORY-001"]


def test_max_stories_is_passed_on() -> None:
    text = prd_to_yaml(build_prd(build_story(1), build_story(2)))
    assert problems_of(text, max_stories=1) == [
        "the plan has 2 stories; limits.max_stories is 1 (split the issue or raise limits.max_stories)"
    ]
    assert len(parse_prd(text, max_stories=2).stories) == 2


def test_json_output_parses_back() -> None:
    prd = build_prd(build_story(1), build_story(2, 1))
    assert parse_prd(prd_to_json(prd)) == prd


def _only_plan_errors(text: str) -> None:
    try:
        parse_prd(text)
    except PlanValidationError as error:
        assert error.problems
        assert all(problem and "\n" not in problem for problem in error.problems)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_raises_only_plan_validation_errors(text: str) -> None:
    _only_plan_errors(text)


_YAMLISH = st.text(alphabet=string.printable + "[]{}:-#&*!|>'\"%@`→é\x85\u2028", max_size=200)


@settings(max_examples=300, deadline=None)
@given(_YAMLISH)
def test_yaml_punctuation_raises_only_plan_validation_errors(text: str) -> None:
    _only_plan_errors(text)


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["title", "stories", "id", "depends_on", "acceptance_criteria", "version", "x"])
            | st.text(),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_JSONISH)
def test_any_json_structure_raises_only_plan_validation_errors(data: object) -> None:
    _only_plan_errors(json.dumps(data))
    _only_plan_errors(json.dumps({"title": "t", "stories": [data]}))


def test_yaml_alias_bomb_is_refused_quickly() -> None:
    import pytest as _pytest

    from bot.errors import PlanValidationError as _PVE
    from bot.plan import parse_prd as _parse

    bomb = "a: &a ['x','x','x','x','x','x','x','x','x']\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n"
        for i in range(9)
    )
    with _pytest.raises(_PVE) as info:
        _parse(bomb)
    assert any("aliases" in p for p in info.value.problems)
