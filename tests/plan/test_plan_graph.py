"""Batches, cycles, dependents and chain length of the story graph."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.errors import PlanValidationError
from bot.plan import (
    PRD,
    batch_of,
    compute_batches,
    find_cycle,
    find_cycles,
    longest_chain,
    transitive_dependents,
)
from tests.plan.plan_builders import build_prd, build_story


def test_batches_are_levels_in_prd_order() -> None:
    prd = build_prd(
        build_story(5, 2),
        build_story(1),
        build_story(3, 1),
        build_story(2),
        build_story(4, 3, 2),
    )
    assert compute_batches(prd) == [["STORY-001", "STORY-002"], ["STORY-005", "STORY-003"], ["STORY-004"]]
    assert batch_of(prd) == {"STORY-001": 1, "STORY-002": 1, "STORY-005": 2, "STORY-003": 2, "STORY-004": 3}
    assert longest_chain(prd) == 3


def test_no_stories_means_no_batches() -> None:
    assert compute_batches(build_prd()) == []
    assert longest_chain(build_prd()) == 0


def test_compute_batches_refuses_a_cycle() -> None:
    prd = build_prd(build_story(1, 3), build_story(2, 1), build_story(3, 2))
    with pytest.raises(PlanValidationError) as caught:
        compute_batches(prd)
    assert caught.value.problems == ["dependency cycle: STORY-001 → STORY-003 → STORY-002 → STORY-001"]


def test_compute_batches_refuses_an_unknown_dependency() -> None:
    with pytest.raises(PlanValidationError) as caught:
        compute_batches(build_prd(build_story(1, 7)))
    assert caught.value.problems == ["STORY-001 depends on unknown story STORY-007"]


def test_longest_chain_refuses_a_cycle() -> None:
    with pytest.raises(PlanValidationError):
        longest_chain(build_prd(build_story(1, 1)))


def test_find_cycle() -> None:
    assert find_cycle(build_prd(build_story(1), build_story(2, 1)).stories) is None
    assert find_cycle([build_story(1, 1)]) == ["STORY-001", "STORY-001"]
    assert find_cycle([build_story(1), build_story(2, 1, 3), build_story(3, 2)]) == [
        "STORY-002",
        "STORY-003",
        "STORY-002",
    ]


def test_find_cycle_takes_the_shortest_loop_through_the_first_story() -> None:
    stories = [build_story(1, 2), build_story(2, 3, 1), build_story(3, 1)]
    assert find_cycle(stories) == ["STORY-001", "STORY-002", "STORY-001"]
    assert find_cycles(stories) == [["STORY-001", "STORY-002", "STORY-001"]]


def test_find_cycle_ignores_unknown_dependencies() -> None:
    assert find_cycle([build_story(1, 9), build_story(2, 1)]) is None


def test_transitive_dependents() -> None:
    prd = build_prd(
        build_story(1), build_story(2, 1), build_story(3, 2), build_story(4), build_story(5, 4, 3)
    )
    assert transitive_dependents(prd, "STORY-001") == {"STORY-002", "STORY-003", "STORY-005"}
    assert transitive_dependents(prd, "STORY-004") == {"STORY-005"}
    assert transitive_dependents(prd, "STORY-005") == set()
    with pytest.raises(KeyError):
        transitive_dependents(prd, "STORY-009")


@st.composite
def dags(draw: st.DrawFn) -> PRD:
    """A random DAG: story k may depend only on stories created before it, listed shuffled."""
    count = draw(st.integers(min_value=0, max_value=25))
    stories = []
    for number in range(1, count + 1):
        deps = (
            draw(st.lists(st.integers(min_value=1, max_value=number - 1), max_size=4)) if number > 1 else []
        )
        stories.append(build_story(number, *deps))
    return build_prd(*draw(st.permutations(stories)))


@given(dags())
def test_every_story_comes_after_all_its_dependencies(prd: PRD) -> None:
    batches = compute_batches(prd)
    number = batch_of(prd)
    assert sorted(sid for batch in batches for sid in batch) == sorted(s.id for s in prd.stories)
    order = [s.id for s in prd.stories]
    for batch in batches:
        assert batch and batch == sorted(batch, key=order.index)
    for story in prd.stories:
        for dep in story.depends_on:
            assert number[story.id] > number[dep]
        if story.depends_on:  # levels: as early as possible
            assert number[story.id] == 1 + max(number[dep] for dep in story.depends_on)
        else:
            assert number[story.id] == 1
    assert len(batches) == longest_chain(prd)


@given(dags())
def test_dependents_are_exactly_the_stories_that_reach_the_target(prd: PRD) -> None:
    def needs(story_id: str) -> set[str]:
        found: set[str] = set()
        todo = list(prd.story(story_id).depends_on)
        while todo:
            dep = todo.pop()
            if dep not in found:
                found.add(dep)
                todo.extend(prd.story(dep).depends_on)
        return found

    for story in prd.stories:
        expected = {other.id for other in prd.stories if story.id in needs(other.id)}
        assert transitive_dependents(prd, story.id) == expected


@given(dags(), st.data())
def test_adding_a_back_edge_makes_a_named_cycle(prd: PRD, data: st.DataObject) -> None:
    with_deps = [s for s in prd.stories if s.depends_on]
    if not with_deps:
        return
    story = data.draw(st.sampled_from(with_deps))
    dep = prd.story(story.depends_on[0])
    dep.depends_on = [*dep.depends_on, story.id]
    cycle = find_cycle(prd.stories)
    assert cycle is not None and cycle[0] == cycle[-1] and len(cycle) >= 3
    for before, after in itertools.pairwise(cycle):
        assert after in prd.story(before).depends_on
    with pytest.raises(PlanValidationError):
        compute_batches(prd)
