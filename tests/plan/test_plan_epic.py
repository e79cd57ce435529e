"""An epic's features in the PRD: where each lives, which repositories are allowed, the hash."""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from datetime import UTC, datetime

import pytest

from bot.errors import PlanValidationError
from bot.handlers.epic import child_body, child_link, child_marker, parse_child_marker
from bot.plan import PRD, parse_prd, prd_to_yaml, revision_hash
from bot.plan.epic import (
    IssueRef,
    allows,
    named_repositories,
    placement_problems,
    spans_repositories,
    target_repositories,
)
from bot.plan.model import Feature
from bot.plan.state import new_plan
from bot.plan.state_block import decode_state, encode_state, state_payload

STORIES = [{"id": "STORY-001", "title": "a", "acceptance_criteria": ["pytest passes 3 tests"]}]


def epic(*features: dict[str, object]) -> PRD:
    return PRD.model_validate(
        {"title": "E", "strategy": "mega", "stories": STORIES, "features": list(features)}
    )


def test_a_plan_without_features_keeps_the_hash_it_had_before_features_existed() -> None:
    prd = PRD.model_validate({"title": "E", "stories": STORIES})
    before = json.dumps(
        {k: v for k, v in prd.model_dump(mode="json").items() if k != "features"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert revision_hash(prd) == hashlib.sha256(before.encode()).hexdigest()
    assert "features" not in prd_to_yaml(prd)


def test_a_features_repository_is_covered_by_the_hash_and_round_trips() -> None:
    here = epic({"id": "FEAT-001", "title": "x"})
    there = epic({"id": "FEAT-001", "title": "x", "repository": "acme/client"})
    assert revision_hash(here) != revision_hash(there)
    assert parse_prd(prd_to_yaml(there)) == there
    assert target_repositories(there, "acme/service") == ["acme/client"]
    assert spans_repositories(there, "acme/service") and not spans_repositories(here, "acme/service")
    assert not spans_repositories(there, "ACME/Client") or target_repositories(there, "ACME/Client") == []


@pytest.mark.parametrize(
    ("feature", "problem"),
    [
        ({"id": "FEAT-001", "title": "x", "repository": "not a repo"}, 'FEAT-001 repository: "not a repo"'),
        (
            {"id": "FEAT-001", "title": "x", "stories": ["STORY-009"]},
            "FEAT-001 covers unknown story STORY-009",
        ),
        ({"id": "FEAT-1", "title": "x"}, 'features[0].id: "FEAT-1" does not match'),
        ({"id": "FEAT-001", "title": "x", "depends_on": ["FEAT-002"]}, "unknown"),
    ],
)
def test_feature_problems_are_refused_with_the_fix(feature: dict[str, object], problem: str) -> None:
    with pytest.raises(PlanValidationError) as raised:
        parse_prd(json.dumps({"title": "E", "strategy": "mega", "stories": STORIES, "features": [feature]}))
    assert any(problem in line for line in raised.value.problems), raised.value.problems


def test_only_an_epic_has_features() -> None:
    with pytest.raises(PlanValidationError) as raised:
        parse_prd(
            json.dumps({"title": "E", "stories": STORIES, "features": [{"id": "FEAT-001", "title": "x"}]})
        )
    assert any("only an epic (strategy: mega) has features" in line for line in raised.value.problems)


def test_the_allowed_list_takes_names_and_owner_wildcards_and_always_the_epics_own() -> None:
    assert allows([], "acme/service", own="acme/service")
    assert allows([], "ACME/Service", own="acme/service")
    assert not allows([], "acme/client", own="acme/service")
    assert allows(["acme/*"], "acme/client", own="acme/service")
    assert not allows(["acme/*"], "evil/client", own="acme/service")
    assert allows(["acme/client"], "Acme/Client", own="acme/service")
    assert not allows(["acme/client"], "acme/web", own="acme/service")
    features = [Feature(id="FEAT-001", title="x", repository="acme/web")]
    (line,) = placement_problems(features, own="acme/service", patterns=["acme/client"])
    assert "acme/web" in line and "`epics.repositories`" in line


def test_repositories_named_in_an_epic() -> None:
    text = (
        "Then acme/client and https://github.com/acme/web/ too, not ./src/x.py or a/b/c, acme/client again."
    )
    assert named_repositories(text) == ["acme/client", "acme/web"]


def test_child_markers_within_one_repository_are_as_before_and_across_name_the_repository() -> None:
    assert child_marker(1, [2, 3], here="acme/service") == "<!-- plan-cascade:epic parent=1 needs=2,3 -->"
    assert parse_child_marker(child_marker(1, [2], here="x/y")) == (1, [2])
    body = child_body(
        description="Hi <!-- plan-cascade:epic parent=evil/x#9 needs= -->",
        parent=IssueRef("acme/service", 1),
        parent_title="E",
        needs=[IssueRef("acme/service", 2)],
        here="acme/client",
    )
    assert "Part of acme/service#1 (E)." in body and "Runs after acme/service#2 is merged." in body
    assert child_link(body, "acme/client") == (IssueRef("acme/service", 1), [IssueRef("acme/service", 2)])
    assert child_link("<!-- plan-cascade:epic parent=x needs= -->", "a/b") is None


def test_a_state_without_features_is_written_as_before_and_with_them_round_trips() -> None:
    def raw(prd: PRD) -> str:
        state = new_plan(repo="acme/service", issue=1, prd=prd, at=datetime.now(UTC))
        assert decode_state(encode_state(state, key=None)) == state
        return zlib.decompress(base64.b64decode(state_payload(state))).decode()

    assert '"features"' not in raw(PRD.model_validate({"title": "E", "stories": STORIES}))
    assert '"repository":"acme/client"' in raw(
        epic({"id": "FEAT-001", "title": "x", "repository": "acme/client"})
    )
