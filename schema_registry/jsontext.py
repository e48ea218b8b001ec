"""Strict JSON decoding of what clients send: standard JSON whose every value can be stored and rendered again.

``json.loads`` accepts more than JSON, and some of what it accepts cannot make the round trip through a store and
back into a response (``JSONResponse`` renders with ``allow_nan=False`` and encodes UTF-8):

- ``NaN``, ``Infinity``, ``-Infinity`` and numbers that overflow a double (``1e999`` becomes ``inf``);
- integers longer than Python's 4300-digit conversion limit (a ``ValueError`` that is not a ``JSONDecodeError``);
- strings holding a lone surrogate (``"\\ud800"``), which no UTF-8 encoder accepts;
- nesting deep enough to exhaust the interpreter's recursion limit.

:func:`strict_loads` refuses all of them with a ``ValueError`` naming the problem, so callers answer a 4xx instead
of failing later with a 5xx, or worse, after storing the value.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["strict_loads"]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    try:
        return int(text)
    except ValueError as e:
        raise ValueError(f"the integer of {len(text)} digits is too long") from e


def _check_strings(value: Any) -> None:
    """Refuse strings (keys included) that cannot be encoded as UTF-8: lone surrogates. Iterative: any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise ValueError(f"a string holds a lone surrogate ({item[e.start]!r})") from e
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def _may_hold_surrogates(data: str | bytes | bytearray) -> bool:
    """False when no decoded string can hold a surrogate, so the walk over the value can be skipped.

    In ASCII input a surrogate can only come from a ``\\uD800``-``\\uDFFF`` escape (and ASCII bytes without NUL
    are decoded as UTF-8); anything else (non-ASCII input, NUL bytes that may mean UTF-16/32) is walked.
    """
    if isinstance(data, str):
        return not data.isascii() or _SURROGATE_ESCAPE.search(data) is not None
    raw = bytes(data)
    return not raw.isascii() or b"\x00" in raw or _SURROGATE_ESCAPE_BYTES.search(raw) is not None


def strict_loads(data: str | bytes | bytearray) -> Any:
    """Decode standard JSON that can be stored and rendered again.

    Args:
        data: JSON text, or bytes in UTF-8 (UTF-16/32 are detected as ``json.loads`` does).

    Returns:
        The decoded value.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``, ``UnicodeDecodeError``), or JSON this module refuses.
    """
    try:
        value = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except RecursionError as e:
        raise ValueError("the document is nested too deeply") from e
    if _may_hold_surrogates(data):
        _check_strings(value)
    return value
