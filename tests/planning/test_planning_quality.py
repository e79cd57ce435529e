"""Deterministic quality warnings, review fixes and epic validation (pure functions)."""

from __future__ import annotations

from bot.plan import PRD
from bot.planning import Epic, EpicFeature, StoryFix, apply_fixes, quality_warnings, validate_epic
from tests.planning.planning_builders import CRITERION, prd_dict, story


def build(*stories: dict[str, object], **fields: object) -> PRD:
    return PRD.model_validate(prd_dict(*stories, **fields))


def test_a_good_plan_has_no_warnings() -> None:
    prd = build(story(1, files=["app/a.py"]), story(2, 1, files=["app/a.py"]))

    assert quality_warnings(prd) == []


def test_too_many_criteria_and_empty_description_are_flagged() -> None:
    criteria = [f"{CRITERION} for client {n}" for n in range(9)]
    prd = build(story(1, acceptance_criteria=criteria), story(2, description=""))

    assert quality_warnings(prd) == [
        "STORY-001 has 9 acceptance criteria (more than 8): consider splitting it",
        "STORY-002 has no description: say what to do and why",
    ]


def test_parallel_stories_changing_the_same_file_are_flagged() -> None:
    prd = build(
        story(1, files=["app/api.py", "app/x.py"]),
        story(2, files=["app/api.py"]),
        story(3, 1, files=["app/x.py"]),
    )

    assert quality_warnings(prd) == [
        "STORY-001, STORY-002 run in parallel (batch 1) but all change app/api.py: "
        "expect merge conflicts, or add a dependency"
    ]


def test_many_stories_for_a_low_complexity_issue_are_flagged() -> None:
    prd = build(*(story(n) for n in range(1, 14)), complexity="low")

    assert quality_warnings(prd) == [
        "13 stories for a low-complexity issue (more than 12): the plan may be too fine-grained"
    ]
    assert quality_warnings(build(*(story(n) for n in range(1, 13)), complexity="low")) == []


def test_apply_fixes_keeps_valid_fixes_and_drops_the_rest() -> None:
    prd = build(story(1), story(2, 1))
    fixes = [
        StoryFix(story_id="STORY-001", field="title", new_value="Add the token bucket"),
        StoryFix(story_id="STORY-002", field="acceptance_criteria", new_value=["works"]),
        StoryFix(story_id="STORY-009", field="title", new_value="Ghost"),
        StoryFix(story_id="STORY-002", field="title", new_value=["not", "a string"]),
        StoryFix(story_id="STORY-002", field="acceptance_criteria", new_value="one string"),
        StoryFix(story_id="STORY-002", field="description", new_value="Wire the limiter into app/api.py."),
    ]

    fixed, warnings = apply_fixes(prd, fixes, max_stories=10)

    assert fixed.story("STORY-001").title == "Add the token bucket"
    assert fixed.story("STORY-002").description == "Wire the limiter into app/api.py."
    assert fixed.story("STORY-002").acceptance_criteria == [CRITERION]
    assert prd.story("STORY-001").title == "Story 1"  # the input is not changed
    assert len(warnings) == 4
    assert warnings[0].startswith("review fix to STORY-002 acceptance_criteria dropped: STORY-002 acceptance")
    assert "vague" in warnings[0]
    assert warnings[1] == "review fix to STORY-009 title dropped: there is no story STORY-009"
    assert warnings[2] == "review fix to STORY-002 title dropped: title needs a string"
    assert warnings[3] == (
        "review fix to STORY-002 acceptance_criteria dropped: acceptance_criteria needs a list of criteria"
    )


def test_validate_epic_reports_ids_unknown_stories_and_cycles() -> None:
    prd = build(story(1), story(2))
    epic = Epic(
        features=[
            EpicFeature(id="FEAT-001", title="Core", depends_on=["FEAT-002"], stories=["STORY-001"]),
            EpicFeature(id="FEAT-002", title="UI", depends_on=["FEAT-001"], stories=["STORY-007"]),
            EpicFeature(id="F3", title="Docs"),
        ]
    )

    assert validate_epic(epic, prd) == [
        "FEAT-002 covers unknown story STORY-007",
        'features[2].id: "F3" does not match ^FEAT-\\d{3}$',
        "dependency cycle: FEAT-001 → FEAT-002 → FEAT-001",
    ]
    assert validate_epic(Epic(features=[]), prd) == ["the epic has no features"]


def test_files_that_exist_nowhere_and_that_no_story_creates_are_flagged() -> None:
    from bot.planning.quality import missing_files

    prd = PRD.model_validate(
        prd_dict(
            story(
                1, files=["app/api.py", "app/limiter.py"], description="Create app/limiter.py with a bucket."
            ),
            story(2, 1, files=["app/limiter.py", "app/middleware/"]),
            story(3, files=["app/routes.py", "tests/"]),
        )
    )
    tree = ["README.md", "app/api.py", "app/middleware/base.py", "tests/test_api.py"]
    assert missing_files(prd, tree) == [
        "STORY-003 lists `app/routes.py` in files, but it is not in the repository and no story says it "
        "creates it: check the path, or say in the story that it creates the file"
    ]
    assert missing_files(prd, []) == [], "an unread tree flags nothing"
