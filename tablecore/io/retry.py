"""Bounded retries of object-store requests: which failures are transient, and how long to keep trying.

Object stores fail a small fraction of requests as a matter of course: throttling (503 ``SlowDown``), 500
``InternalError``, connection resets, timeouts. :func:`call_with_retries` makes one call again while it fails
transiently, with exponential back-off and full jitter, bounded by a number of retries and by seconds
(:class:`RetryPolicy`), and then raises :class:`~tablecore.exceptions.StorageUnavailableError`. Errors that retrying
cannot cure (access denied, a bad request) become :class:`~tablecore.exceptions.StorageError` at once; a missing
object stays ``FileNotFoundError``.

``obstore``'s client retries are turned off (:meth:`RetryPolicy.obstore_config`) so that this is the one retry
layer: its retries of a conditional put would hide whether an earlier attempt had written the object (a 412 after
them is either our own write or another writer's), and two layers would multiply the attempts. Retrying is safe for
idempotent requests; the one request that is not — a conditional create — is made safe by its caller
(:meth:`tablecore.io.object_store.S3FileIO.put` recognises its own object by a token).
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from tablecore.exceptions import StorageError, StorageUnavailableError

logger = logging.getLogger(__name__)

T = TypeVar("T")

_STATUS = re.compile(r"status code: (\d{3})")
_CODE = re.compile(r"<Code>([^<]+)</Code>")
_TRANSIENT_WORDS = ("http error", "error sending request", "connection", "timed out", "timeout", "body error",
                    "interrupted", "reset", "broken pipe", "incomplete", "internalerror", "slowdown")


class Retry(Exception):
    """Raised by a request function to be called again under the retry budget (e.g. an object that vanished
    between two requests that belong together)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long transient failures are retried: at most ``max_retries`` retries of a call and no retry started
    ``timeout_s`` after its first attempt; the delay before retry *n* is uniform in ``[0, min(max_delay_s,
    base_delay_s * 2**n)]`` (exponential back-off with full jitter)."""

    max_retries: int = 10
    timeout_s: float = 10.0
    base_delay_s: float = 0.05
    max_delay_s: float = 2.0

    def delay(self, retry: int) -> float:
        """The back-off before retry number ``retry`` (0 for the first)."""
        return random.uniform(0.0, min(self.max_delay_s, self.base_delay_s * 2.0 ** retry))

    @staticmethod
    def obstore_config() -> dict[str, Any]:
        """``obstore``'s ``retry_config``: no retries of its own (see the module's docstring)."""
        return {"max_retries": 0, "retry_timeout": timedelta(seconds=0)}


def describe(exc: BaseException) -> str:
    """A one-line account of a store error: the HTTP status and S3 error code when there are some, else the first
    line of the message."""
    text = str(exc)
    status = _STATUS.search(text)
    code = _CODE.search(text)
    if status:
        return f"HTTP {status.group(1)}" + (f" {code.group(1)}" if code else "")
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first.rsplit(" - ", 1)[-1].strip()[:300]  # obstore: "Error performing GET <url> in 2ms - <reason>"


def is_transient(exc: BaseException) -> bool:
    """True for failures that a later attempt may not meet: 5xx, 408 and 429 answers, dropped or refused
    connections, timeouts (and :class:`Retry`)."""
    if isinstance(exc, Retry):
        return True
    if isinstance(exc, (FileNotFoundError, PermissionError)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    from obstore.exceptions import GenericError

    if not isinstance(exc, GenericError):
        return False
    text = str(exc)
    status = _STATUS.search(text)
    if status:
        code = int(status.group(1))
        return code >= 500 or code in (408, 429)
    lowered = text.lower()
    return any(word in lowered for word in _TRANSIENT_WORDS)


def _is_refusal(exc: BaseException) -> bool:
    """An error of the store that retrying cannot cure: access denied, bad credentials, a bad request."""
    from obstore.exceptions import (
        GenericError,
        InvalidPathError,
        NotSupportedError,
        PermissionDeniedError,
        UnauthenticatedError,
    )

    return isinstance(exc, (PermissionDeniedError, UnauthenticatedError, InvalidPathError, NotSupportedError,
                            GenericError))


def call_with_retries(policy: RetryPolicy, what: str, fn: Callable[[], T]) -> T:
    """``fn()``, retried while it fails transiently, within ``policy``.

    Args:
        policy: the bounds.
        what: the request, for messages (``GET s3://bucket/key``).
        fn: one attempt; it must be safe to repeat.

    Raises:
        StorageUnavailableError: still failing when the retries or the time ran out.
        StorageError: the store refused the request (access denied, a bad request).
        FileNotFoundError: no such object.
    """
    start = time.monotonic()
    retry = 0
    while True:
        try:
            return fn()
        except Exception as e:
            elapsed = time.monotonic() - start
            if not is_transient(e):
                if _is_refusal(e):
                    raise StorageError(f"{what} refused by the store: {describe(e)}") from e
                raise
            if retry >= policy.max_retries or elapsed >= policy.timeout_s:
                raise StorageUnavailableError(
                    f"{what} failed after {retry + 1} attempts in {elapsed:.1f}s ({describe(e)}); the store is "
                    f"unreachable or failing (retry budget: {policy.max_retries} retries, {policy.timeout_s:g}s; "
                    "storage options lakegate_max_retries, lakegate_retry_timeout)") from e
            pause = min(policy.delay(retry), max(0.0, policy.timeout_s - elapsed))
            retry += 1
            logger.info("%s: %s; retry %d in %.2fs", what, describe(e), retry, pause)
            time.sleep(pause)
