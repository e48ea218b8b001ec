"""PBKDF2 password hashes: making them, checking them in constant time, and checking them off the event loop.

A check costs what the hash's iteration count says (600,000 iterations of HMAC-SHA256: ~0.3 s of one core), so the
server runs checks in a small pool of worker threads of their own (:class:`VerificationPool`; ``hashlib`` releases
the GIL while it hashes), never on the event loop that serves every other request; the pool's threads run at the
lowest CPU priority (``nice`` 19, on Linux), so that hashing only gets the CPU that serving requests leaves; and what
would queue beyond a bound is refused at once (429) instead of letting a flood build an ever longer queue.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import logging
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from schema_registry.errors import ThrottledError

logger = logging.getLogger(__name__)

PBKDF2_HASH = re.compile(r"^pbkdf2_sha256\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$")
"""The form of a ``password_hash``: ``pbkdf2_sha256$<iterations>$<salt, base64>$<digest, base64>``."""

DEFAULT_ITERATIONS = 600_000
"""PBKDF2-HMAC-SHA256 iterations of new hashes (OWASP's recommendation for this hash)."""

Verify = Callable[[str, str], bool]
"""A password check: (password, stored hash) -> whether they match."""


def hash_password(password: str, *, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None) -> str:
    """A ``password_hash`` value for the auth config (PBKDF2-HMAC-SHA256, a random 16-byte salt)."""
    salt = salt if salt is not None else os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return f"pbkdf2_sha256${iterations}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches the ``password_hash`` ``stored``, compared in constant time.

    Always runs the full PBKDF2 of ``stored`` (a malformed hash matches nothing, after the same work with one
    iteration count of the default).
    """
    parsed = _parse(stored)
    if parsed is None:
        iterations, salt, digest = DEFAULT_ITERATIONS, b"\0" * 16, b""
    else:
        iterations, salt, digest = parsed
    computed = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return hmac.compare_digest(computed, digest) and parsed is not None


def hash_iterations(stored: str) -> int | None:
    """The iteration count of a ``password_hash`` (None when it is malformed)."""
    parsed = _parse(stored)
    return parsed[0] if parsed else None


def dummy_hash(iterations: int) -> str:
    """A well-formed hash that no password matches (a random digest), checked for user names that do not exist so
    that they cost the same time as existing ones."""
    return (f"pbkdf2_sha256${iterations}${base64.b64encode(os.urandom(16)).decode()}$"
            f"{base64.b64encode(os.urandom(32)).decode()}")


def _parse(stored: str) -> tuple[int, bytes, bytes] | None:
    m = PBKDF2_HASH.match(stored)
    if m is None:
        return None
    try:
        return int(m.group(1)), base64.b64decode(m.group(2)), base64.b64decode(m.group(3))
    except ValueError:
        return None


def _lowest_priority() -> None:
    """Give the calling thread the lowest CPU priority (Linux schedules threads by their own nice value)."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


class VerificationPool:
    """Password checks in ``threads`` worker threads of their own, at the lowest CPU priority, with at most
    ``queue`` more waiting.

    Used from the event loop only (the counts are not locked). A check beyond the bound is refused at once with
    :class:`ThrottledError` (429, ``Retry-After: 1``): under a flood, queued checks would only add latency for the
    legitimate logins among them.
    """

    def __init__(self, *, threads: int = 1, queue: int = 32, verify: Verify = verify_password) -> None:
        self.threads = threads
        self.queue = queue
        self.verify = verify
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="lakegate-password-check",
                                            initializer=_lowest_priority)
        self._pending = 0

    @property
    def pending(self) -> int:
        """Checks running or waiting."""
        return self._pending

    async def check(self, password: str, stored: str) -> bool:
        """Whether ``password`` matches ``stored``, checked in a worker thread.

        Raises:
            ThrottledError: ``threads + queue`` checks are already running or waiting.
        """
        if self._pending >= self.threads + self.queue:
            raise ThrottledError("Too many logins in progress: retry later", retry_after=1)
        future = asyncio.get_running_loop().run_in_executor(self._executor, self.verify, password, stored)
        self._pending += 1
        future.add_done_callback(self._done)  # counted until the check ends, even if its request goes away
        return await future

    def _done(self, _: object) -> None:
        self._pending -= 1
