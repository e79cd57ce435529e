from __future__ import annotations

import hashlib

from bot.plan import (
    PRD,
    Story,
    canonical_json,
    parse_prd,
    prd_to_json,
    prd_to_yaml,
    revision_hash,
    short_hash,
)
from tests.plan.plan_builders import build_prd, build_story


def test_canonical_json_is_sorted_and_compact() -> None:
    prd = PRD(title="Grüße", stories=[Story(id="A-001", title="x", acceptance_criteria=["n() == 1"])])
    assert canonical_json(prd) == (
        '{"complexity":"medium","risk":"medium","stories":[{"acceptance_criteria":["n() == 1"],'
        '"agent":null,"depends_on":[],"description":"","files":[],"id":"A-001","priority":"medium",'
        '"title":"x","type":"feature","verification":null}],"strategy":"hybrid","summary":"",'
        '"title":"Grüße","version":1}'
    )


def test_hash_is_sha256_of_the_canonical_json() -> None:
    prd = build_prd(build_story(1))
    expected = hashlib.sha256(canonical_json(prd).encode()).hexdigest()
    assert revision_hash(prd) == expected
    assert len(expected) == 64
    assert short_hash(expected) == expected[:12]


def test_hash_does_not_depend_on_key_order_or_format() -> None:
    prd = build_prd(build_story(1), build_story(2, 1), summary="s")
    data = prd.model_dump(mode="json")
    shuffled = {key: data[key] for key in reversed(list(data))}
    shuffled["stories"] = [{k: story[k] for k in sorted(story, reverse=True)} for story in data["stories"]]
    assert revision_hash(PRD.model_validate(shuffled)) == revision_hash(prd)
    assert revision_hash(parse_prd(prd_to_yaml(prd))) == revision_hash(prd)
    assert revision_hash(parse_prd(prd_to_json(prd))) == revision_hash(prd)


def test_defaults_written_or_omitted_hash_the_same() -> None:
    short = parse_prd("title: t\nstories: [{id: A-001, title: x, acceptance_criteria: [count() returns 3]}]")
    full = parse_prd(prd_to_yaml(short))
    assert revision_hash(short) == revision_hash(full)


def test_hash_changes_with_content() -> None:
    prd = build_prd(build_story(1), build_story(2))
    hashes = {
        revision_hash(prd),
        revision_hash(build_prd(build_story(1), build_story(2), title="Other")),
        revision_hash(build_prd(build_story(2), build_story(1))),
        revision_hash(build_prd(build_story(1), build_story(2, 1))),
        revision_hash(build_prd(build_story(1), build_story(2, priority="high"))),
    }
    assert len(hashes) == 5
