"""The deterministic strategy hint."""

from __future__ import annotations

from bot.plan import Strategy
from bot.planning import analyse_strategy
from tests.planning.planning_builders import make_issue, make_repo


def test_short_single_concern_issue_is_direct() -> None:
    hint = analyse_strategy(make_issue(body="The login button is misaligned on mobile."), make_repo())

    assert hint.strategy is Strategy.DIRECT
    assert not hint.multi_perspective
    assert hint.reasons and "short single-concern" in hint.reasons[0]


def test_six_task_list_items_make_a_mega_plan() -> None:
    body = "Ship the dashboard:\n" + "".join(f"- [ ] widget {n}\n" for n in range(6))

    hint = analyse_strategy(make_issue(body=body), make_repo())

    assert hint.strategy is Strategy.MEGA
    assert hint.multi_perspective
    assert "6 task-list items" in hint.reasons


def test_five_task_list_items_are_not_mega() -> None:
    body = "Ship the dashboard:\n" + "".join(f"- [ ] widget {n}\n" for n in range(5))

    assert analyse_strategy(make_issue(body=body), make_repo()).strategy is Strategy.HYBRID


def test_epic_word_or_label_makes_a_mega_plan() -> None:
    by_word = analyse_strategy(make_issue(body="Epic: billing."), make_repo())
    by_label = analyse_strategy(make_issue(labels=["roadmap"]), make_repo())

    assert by_word.strategy is Strategy.MEGA
    assert by_label.strategy is Strategy.MEGA
    assert "mentions roadmap" in by_label.reasons


def test_several_h2_sections_make_a_mega_plan() -> None:
    body = "## Search\nfind things\n## Export\nCSV files\n## Sharing\nlinks\n### not counted\n"

    hint = analyse_strategy(make_issue(body=body), make_repo())

    assert hint.strategy is Strategy.MEGA
    assert "3 level-2 sections" in hint.reasons


def test_medium_issue_is_hybrid_without_perspectives() -> None:
    body = "Add rate limiting to the public endpoints. " * 20

    hint = analyse_strategy(make_issue(body=body), make_repo())

    assert hint.strategy is Strategy.HYBRID
    assert not hint.multi_perspective


def test_mixing_code_and_operations_asks_for_perspectives() -> None:
    body = "Add a `sessions` table with a database migration and refactor the login handler."

    hint = analyse_strategy(make_issue(body=body), make_repo())

    assert hint.multi_perspective
    assert any("mixes code and operations (database, migration)" in r for r in hint.reasons)


def test_long_issue_in_a_large_repository_asks_for_perspectives() -> None:
    body = "Improve the search results page. " * 100
    repo = make_repo(file_tree=[f"src/f{n}.py" for n in range(2500)])

    hint = analyse_strategy(make_issue(body=body), repo)

    assert hint.strategy is Strategy.HYBRID
    assert hint.multi_perspective
    assert "large repository (2500 files)" in hint.reasons
