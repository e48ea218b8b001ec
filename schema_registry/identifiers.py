"""Subject names and version path segments, parsed the way Confluent parses them."""

from __future__ import annotations

import re

from schema_registry.errors import InvalidSubjectError, InvalidVersionError

MAX_VERSION = 2**31 - 1
GLOBAL_SCOPE = "__GLOBAL"
_RESERVED_SUBJECTS = {GLOBAL_SCOPE, "__EMPTY"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_version(value: str) -> int | None:
    """A version path segment: a positive 32-bit int, ``latest`` (any case) or ``-1``; None means latest.

    Raises:
        InvalidVersionError: anything else (42202).
    """
    text = value.strip()
    if text.lower() == "latest" or text == "-1":
        return None
    if re.fullmatch(r"[0-9]{1,10}", text) and 1 <= int(text) <= MAX_VERSION:
        return int(text)
    raise InvalidVersionError(
        f"The specified version '{value}' is not a valid version id. Allowed values are between [1, 2^31-1] "
        'and the string "latest"')


def validate_subject(subject: str) -> None:
    """Reject subject names Confluent rejects (42208): empty, control characters, reserved names."""
    if not subject.strip() or _CONTROL.search(subject) or subject in _RESERVED_SUBJECTS:
        raise InvalidSubjectError(f"The specified subject '{subject}' is not a valid subject name")
