"""Strict JSON: the walk for lone surrogates is skipped only where none can be (ASCII input without a surrogate
escape), and every way a surrogate can arrive is still refused."""

from __future__ import annotations

import pytest

from schema_registry.jsontext import _may_hold_surrogates, strict_loads


@pytest.mark.parametrize("data", [
    '"\\ud800"', b'"\\ud800"', b'{"a": ["x", "\\uDFFF"]}', '{"\\udc00": 1}',  # escapes, in values and keys
    '"\ud800"', b'"\xed\xa0\x80"',  # a raw surrogate in text, its UTF-8-style encoding in bytes
    '"\\ud800"'.encode("utf-16"), '"\\ud800"'.encode("utf-32-le"),  # escapes in UTF-16/32 (NUL bytes)
])
def test_every_lone_surrogate_is_refused(data: str | bytes) -> None:
    with pytest.raises(ValueError, match="surrogate"):
        strict_loads(data)


@pytest.mark.parametrize(("data", "walked"), [
    ('{"schema": "\\"string\\""}', False), (b'{"a": [1, 2.5, "\\u0041"]}', False),
    ('"\\\\ud800"', True),  # an escaped backslash: no surrogate, but the cheap test cannot tell, so it walks
    ('"é"', True), ('"é"'.encode(), True), ('"x"'.encode("utf-16"), True),
])
def test_the_walk_is_skipped_only_for_ascii_without_surrogate_escapes(data: str | bytes, walked: bool) -> None:
    assert _may_hold_surrogates(data) is walked
    strict_loads(data)  # all of these are fine


def test_pairs_and_escaped_backslashes_decode() -> None:
    assert strict_loads('"\\ud83d\\ude00"') == "\U0001F600"  # a surrogate pair is one character
    assert strict_loads('"\\\\ud800"') == "\\ud800"
