from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.plan import Changelog, canonical_json, changelog_lines, diff_prds
from tests.plan.plan_builders import build_prd, build_story


def test_identical_plans_have_an_empty_changelog() -> None:
    prd = build_prd(build_story(1), build_story(2, 1))
    changelog = diff_prds(prd, prd.model_copy(deep=True))
    assert changelog.empty
    assert changelog_lines(changelog) == []
    assert Changelog().empty


def test_added_removed_changed() -> None:
    old = build_prd(build_story(1), build_story(2), build_story(3))
    new = build_prd(
        build_story(1, 3, acceptance_criteria=["count() returns 3 after three calls"]),
        build_story(3),
        build_story(4, title="Add a limiter"),
        build_story(5),
    )
    changelog = diff_prds(old, new)
    assert changelog.added == ["STORY-004", "STORY-005"]
    assert changelog.removed == ["STORY-002"]
    assert changelog.changed == {"STORY-001": ["depends_on", "acceptance_criteria"]}
    assert changelog.plan_fields_changed == []
    assert not changelog.reordered
    assert not changelog.empty
    assert changelog_lines(changelog) == [
        "added STORY-004: Add a limiter",
        "added STORY-005: Story 5",
        "removed STORY-002",
        "changed STORY-001 (depends_on, acceptance_criteria)",
    ]


def test_plan_fields_and_order() -> None:
    old = build_prd(build_story(1), build_story(2))
    new = build_prd(build_story(2), build_story(1), title="New title", strategy="mega")
    changelog = diff_prds(old, new)
    assert changelog.plan_fields_changed == ["title", "strategy"]
    assert changelog.reordered
    assert changelog_lines(changelog) == ["changed the plan's title, strategy", "reordered the stories"]


def test_changelog_serialises() -> None:
    changelog = diff_prds(build_prd(build_story(1)), build_prd(build_story(2)))
    assert Changelog.model_validate_json(changelog.model_dump_json()) == changelog


_edits = st.fixed_dictionaries(
    {},
    optional={
        "title": st.sampled_from(["Story", "Other"]),
        "priority": st.sampled_from(["high", "low"]),
        "files": st.lists(st.sampled_from(["a.py", "b.py"]), max_size=2),
    },
)


@given(
    st.lists(st.tuples(st.integers(1, 6), _edits), max_size=5, unique_by=lambda t: t[0]),
    st.lists(st.tuples(st.integers(1, 6), _edits), max_size=5, unique_by=lambda t: t[0]),
    st.sampled_from(["t", "u"]),
)
def test_empty_exactly_when_the_canonical_plans_match(old_spec, new_spec, title) -> None:
    old = build_prd(*(build_story(n, **edits) for n, edits in old_spec))
    new = build_prd(*(build_story(n, **edits) for n, edits in new_spec), title=title)
    assert diff_prds(old, new).empty == (canonical_json(old) == canonical_json(new))
