"""The intake's routing keys, read from the raw body without decoding the rest: the same keys
as from the decoded payload, and the same refusals."""

from __future__ import annotations

import orjson
import pytest

from bot.runtime.keys import REUSE_BYTES, KeyReader, NotAnObject
from bot.runtime.routing import DeliveryKeys
from bot.testing.deliveries import encode, load_fixture


@pytest.mark.parametrize(
    "payload",
    [
        load_fixture("issues.labeled.1"),
        {
            "action": "created",
            "issue": {"number": 7},
            "repository": {"full_name": "o/r"},
            "installation": {"id": 3},
        },
        {"action": "opened", "pull_request": {"number": 9}, "repository": {"full_name": "o/r"}},
        {"zen": "Design for failure.", "hook_id": 1},  # ping: no action, no repository
        {"action": ["x"], "issue": {"number": "7"}, "repository": {"full_name": {"a": 1}}, "installation": 5},
        {"action": "x", "issue": "not an object", "pull_request": {"number": 2}, "installation": {"id": 1.5}},
        {"action": "x", "issue": {"number": 1, "nested": {"number": 2}}, "sender": {"action": "y"}},
    ],
)
def test_the_keys_are_those_of_the_decoded_payload(payload: dict) -> None:
    reader = KeyReader()
    body = encode(payload)
    assert reader.keys(body) == DeliveryKeys.of(orjson.loads(body))
    assert reader.keys(body) == DeliveryKeys.of(payload)  # read again: the parser is reused


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b'{"action": "x"} trailing', b'{"a": NaN}', b'{"a": "\xff"}', b'{"n": 1e400}', b"{'a': 1}"],
)
def test_what_is_not_json_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError) as refused:
        KeyReader().keys(body)
    assert not isinstance(refused.value, NotAnObject)


def test_json_that_is_not_an_object_is_refused_as_such() -> None:
    reader = KeyReader()
    for body in (b"[1, 2]", b'"text"', b"42", b"null"):
        with pytest.raises(NotAnObject):
            reader.keys(body)
    assert reader.keys(b'{"action": "ok"}').action == "ok"  # and the parser still works


def test_an_integer_over_64_bits_is_refused_not_a_crash() -> None:
    with pytest.raises(ValueError):
        KeyReader().keys(b'{"action": "x", "id": 123456789012345678901234567890}')


def test_a_large_body_is_read_by_a_parser_of_its_own() -> None:
    reader = KeyReader()
    big = encode({"action": "labeled", "issue": {"number": 4}, "filler": "x" * (REUSE_BYTES + 1)})
    assert reader.keys(big).number == 4
    assert reader.keys(b'{"action": "small"}').action == "small"
