"""One test per rule of validate_prd, each asserting the exact line."""

from __future__ import annotations

import pytest

from bot.plan import PRD, Story, Strategy, is_vague, vague_criteria, validate_prd
from tests.plan.plan_builders import GOOD_CRITERION, build_prd, build_story


def test_a_good_plan_has_no_problems() -> None:
    assert validate_prd(build_prd(build_story(1), build_story(2, 1), build_story(3, 1, 2))) == []


def test_no_stories() -> None:
    assert validate_prd(build_prd()) == ["no stories"]


def test_too_many_stories() -> None:
    prd = build_prd(*(build_story(n) for n in range(1, 61)))
    assert validate_prd(prd) == [
        "the plan has 60 stories; limits.max_stories is 50 (split the issue or raise limits.max_stories)"
    ]
    assert validate_prd(prd, max_stories=60) == []


def test_empty_plan_title() -> None:
    assert validate_prd(build_prd(build_story(1), title="  ")) == [
        "title: empty (give the plan a one-line title)"
    ]


@pytest.mark.parametrize(
    ("bad", "suggestion"),
    [
        ("story-3", "STORY-003"),
        ("STORY-7", "STORY-007"),
        ("STORY-1", "STORY-003"),
        ("S_12", "S-012"),
        ("1-001", "STORY-003"),
        ("", "STORY-003"),
    ],
)
def test_id_pattern(bad: str, suggestion: str) -> None:
    prd = build_prd(build_story(1), build_story(2), build_story(3, id=bad))
    assert validate_prd(prd)[0] == (
        f'stories[2].id: "{bad}" does not match ^[A-Z][A-Z0-9]*-\\d{{3}}$ (use e.g. {suggestion})'
    )


def test_id_suggestion_avoids_a_taken_id() -> None:
    prd = build_prd(build_story(1), build_story(2, id="story-1"))
    assert validate_prd(prd) == [
        'stories[1].id: "story-1" does not match ^[A-Z][A-Z0-9]*-\\d{3}$ (use e.g. STORY-002)'
    ]


def test_id_suggestion_skips_taken_fallbacks() -> None:
    prd = build_prd(build_story(2), build_story(3), build_story(9, id="x"))
    assert validate_prd(prd) == [
        'stories[2].id: "x" does not match ^[A-Z][A-Z0-9]*-\\d{3}$ (use e.g. STORY-004)'
    ]


def test_good_ids_pass() -> None:
    prd = build_prd(build_story(1, id="API-001"), build_story(2, id="A1B2-999", depends_on=["API-001"]))
    assert validate_prd(prd) == []


def test_duplicate_ids() -> None:
    prd = build_prd(
        build_story(1), build_story(2), build_story(3), build_story(4), build_story(2, title="again")
    )
    assert validate_prd(prd) == ["duplicate story id STORY-002 (stories[1] and stories[4])"]


def test_three_times_the_same_id() -> None:
    prd = build_prd(build_story(1), build_story(1), build_story(1))
    assert validate_prd(prd) == ["duplicate story id STORY-001 (stories[0], stories[1] and stories[2])"]


def test_unknown_dependency() -> None:
    prd = build_prd(build_story(1), build_story(2), build_story(3), build_story(4, 9))
    assert validate_prd(prd) == ["STORY-004 depends on unknown story STORY-009"]


def test_dependency_listed_twice() -> None:
    prd = build_prd(build_story(1), build_story(2, 1, 1))
    assert validate_prd(prd) == ["STORY-002 lists STORY-001 more than once in depends_on"]


def test_dependency_cycle_is_named_in_full() -> None:
    prd = build_prd(build_story(1), build_story(2, 1, 3), build_story(3, 2))
    assert validate_prd(prd) == ["dependency cycle: STORY-002 → STORY-003 → STORY-002"]


def test_self_dependency_is_a_cycle() -> None:
    prd = build_prd(build_story(1, 1))
    assert validate_prd(prd) == ["dependency cycle: STORY-001 → STORY-001"]


def test_separate_cycles_are_each_reported() -> None:
    prd = build_prd(
        build_story(1, 2), build_story(2, 1), build_story(3, 4), build_story(4, 5), build_story(5, 3)
    )
    assert validate_prd(prd) == [
        "dependency cycle: STORY-001 → STORY-002 → STORY-001",
        "dependency cycle: STORY-003 → STORY-004 → STORY-005 → STORY-003",
    ]


def test_no_acceptance_criteria() -> None:
    assert validate_prd(build_prd(build_story(1, acceptance_criteria=[]))) == [
        "STORY-001 has no acceptance criteria"
    ]


def test_empty_acceptance_criterion() -> None:
    prd = build_prd(build_story(1, acceptance_criteria=[GOOD_CRITERION, " "]))
    assert validate_prd(prd) == ["STORY-001 acceptance criterion 2 is empty"]


@pytest.mark.parametrize(
    "criterion",
    [
        "works correctly",
        "Works as expected.",
        "It works properly",
        "The feature works correctly",
        "good performance",
        "The API is fast",
        "Everything is properly implemented",
        "correctly implemented",
        "User-friendly",
        "as needed",
        "tests pass",
        "done",
    ],
)
def test_vague_acceptance_criterion(criterion: str) -> None:
    prd = build_prd(build_story(1, acceptance_criteria=[criterion]))
    assert validate_prd(prd) == [
        f'STORY-001 acceptance criterion "{criterion}" is vague: say what is measured and the expected value'
    ]


@pytest.mark.parametrize(
    "criterion",
    [
        GOOD_CRITERION,
        "GET /api/items returns 429 after 100 requests in one minute",
        "pytest tests/test_limiter.py passes",
        "works correctly when the bucket is empty: allow() returns False",
        "README lists the three new settings",
        "pytest passes",
        "calc/helpers.py exists",
        "ruff clean",
    ],
)
def test_concrete_criteria_are_not_vague(criterion: str) -> None:
    assert not is_vague(criterion)


def test_long_vague_criterion_is_quoted_on_one_line() -> None:
    criterion = "it works correctly\nand " + "is fast and " * 10 + "works as expected"
    [line] = validate_prd(build_prd(build_story(1, acceptance_criteria=[criterion])))
    assert "\n" not in line
    assert line.startswith('STORY-001 acceptance criterion "it works correctly and is fast and is fast')
    assert '…" is vague: say what is measured and the expected value' in line


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../outside.py", "src/../../x", "C:\\repo\\x.py", "~/x", "\\x"]
)
def test_file_must_be_repository_relative(path: str) -> None:
    prd = build_prd(build_story(1, files=["src/limiter.py", path]))
    assert validate_prd(prd) == [
        f'STORY-001 file "{path}" must be repository-relative (no leading / and no ..)'
    ]


def test_relative_files_pass() -> None:
    prd = build_prd(build_story(1, files=["src/limiter.py", "./docs/a..b.md", ".github/workflows/ci.yml"]))
    assert validate_prd(prd) == []


def test_empty_file_entry() -> None:
    assert validate_prd(build_prd(build_story(1, files=[""]))) == ["STORY-001 has an empty entry in files"]


def test_empty_story_title() -> None:
    assert validate_prd(build_prd(build_story(1, title=""))) == ["STORY-001 has an empty title"]


def test_blank_verification_and_agent() -> None:
    assert validate_prd(build_prd(build_story(1, verification=" ", agent=""))) == [
        "STORY-001 verification is blank (remove it or give a command)",
        "STORY-001 agent is blank (remove it or name an agent)",
    ]


def test_every_problem_is_reported_at_once() -> None:
    prd = PRD(
        title="t",
        stories=[
            Story(id="story-1", title="a", acceptance_criteria=["works"]),
            Story(id="STORY-002", title="b", depends_on=["STORY-009"], files=["/x"]),
        ],
    )
    assert validate_prd(prd) == [
        'stories[0].id: "story-1" does not match ^[A-Z][A-Z0-9]*-\\d{3}$ (use e.g. STORY-001)',
        'story-1 acceptance criterion "works" is vague: say what is measured and the expected value',
        "STORY-002 has no acceptance criteria",
        'STORY-002 file "/x" must be repository-relative (no leading / and no ..)',
        "STORY-002 depends on unknown story STORY-009",
    ]


def test_vague_criteria_can_be_warnings_instead_of_problems() -> None:
    prd = build_prd(build_story(1, acceptance_criteria=["works correctly", "pytest passes"]))
    assert validate_prd(prd, vague=False) == []
    assert vague_criteria(prd) == [
        'STORY-001 acceptance criterion "works correctly" is vague: '
        "say what is measured and the expected value"
    ]


def test_a_direct_plan_is_one_story() -> None:
    one = build_prd(build_story(1), strategy=Strategy.DIRECT)
    assert validate_prd(one) == []
    two = build_prd(build_story(1), build_story(2), strategy=Strategy.DIRECT)
    assert validate_prd(two) == [
        "strategy: direct is one story and one pull request, but the plan has 2 stories "
        "(use hybrid for dependency batches, or mega for an epic)"
    ]
