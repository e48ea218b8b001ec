"""Failure throttling of password logins: after too many failures, a client is refused without hashing for a while.

Counted per key, where a key is a client address (IPv6 addresses by their /64 network, which one host usually
holds whole) or a (client address, user name) pair::

    failure ─► count the key's failures in the last ``window_seconds``
                   │ fewer than the limit                      │ the limit reached
                   ▼                                           ▼
                 nothing                   locked for lockout_seconds x 2^(lockouts so far), at most
                                           max_lockout_seconds: refused (429 + Retry-After) without hashing

A success (a verified password) clears the (address, user) key; the address key only expires. The table of keys is
bounded (the least recently touched key goes first), and keys with nothing left to remember are dropped as they are
met. The clock is injectable for tests.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ThrottleLimits:
    """How many failed logins a client may have before it is locked out, and for how long.

    Attributes:
        failures_per_user: failures for one user name from one client address within the window.
        failures_per_client: failures for any user names from one client address within the window.
        window_seconds: how far back failures count.
        lockout_seconds: the first lockout of a key; each further one doubles it.
        max_lockout_seconds: the longest lockout.
        max_keys: keys remembered at most (the least recently touched is forgotten first).
    """

    failures_per_user: int = 5
    failures_per_client: int = 20
    window_seconds: float = 60.0
    lockout_seconds: float = 60.0
    max_lockout_seconds: float = 900.0
    max_keys: int = 100_000


@dataclass
class _Entry:
    failures: deque[float] = field(default_factory=deque)
    locked_until: float = 0.0
    lockouts: int = 0


class FailureThrottle:
    """Counts failures per key and says how long a key is still locked out. Thread-safe."""

    def __init__(self, limits: ThrottleLimits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def locked_for(self, key: Hashable) -> float:
        """Seconds ``key`` stays locked out (0: not locked)."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return 0.0
            left = entry.locked_until - now
            if left <= 0 and self._idle(entry, now):
                del self._entries[key]
            return max(0.0, left)

    def fail(self, key: Hashable, limit: int) -> float:
        """Record a failure of ``key``; returns the lockout it starts (0: none, below ``limit``)."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
                if len(self._entries) > self.limits.max_keys:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
            self._expire(entry, now)
            entry.failures.append(now)
            if len(entry.failures) < limit:
                return 0.0
            duration = min(self.limits.lockout_seconds * 2 ** min(entry.lockouts, 30), self.limits.max_lockout_seconds)
            entry.lockouts += 1
            entry.locked_until = now + duration
            entry.failures.clear()
        logger.warning("login failures: %s locked out for %.0f s (lockout %d)", _describe(key), duration,
                       entry.lockouts)
        return duration

    def succeed(self, key: Hashable) -> None:
        """Forget ``key``'s failures and lockouts (a verified login)."""
        with self._lock:
            self._entries.pop(key, None)

    def _expire(self, entry: _Entry, now: float) -> None:
        horizon = now - self.limits.window_seconds
        while entry.failures and entry.failures[0] <= horizon:
            entry.failures.popleft()

    def _idle(self, entry: _Entry, now: float) -> bool:
        """Nothing left to remember: no failure in the window and the lockout back-off has run out."""
        self._expire(entry, now)
        return not entry.failures and now - entry.locked_until > self.limits.max_lockout_seconds

    def __len__(self) -> int:
        return len(self._entries)


def client_key(host: str | None) -> str:
    """The throttling key of a client address: IPv4 as is, IPv6 by its /64 network, anything else verbatim."""
    if not host:
        return "unknown"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def retry_after(seconds: float) -> int:
    """A ``Retry-After`` value: whole seconds, at least 1."""
    return max(1, math.ceil(seconds))


def _describe(key: Hashable) -> str:
    if isinstance(key, tuple) and len(key) == 2:
        return f"client {key[0]} as user {key[1]!r}"
    return f"client {key}"
