"""A first-come, first-served reentrant lock: the SQLite writers of one process take turns in arrival order.

``threading.RLock`` wakes an arbitrary waiter (and a thread that releases and at once asks again may win again), so
under 8 concurrent registrations an unlucky writer lost round after round: the registration p99 was several times
its p50. Here each waiter blocks on its own lock and the holder hands the turn to the longest waiting one, so a
writer waits at most for the writers that arrived before it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from types import TracebackType

logger = logging.getLogger(__name__)


class FifoLock:
    """A reentrant lock granted in arrival order (a context manager)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._owner: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        """Wait for the turn (at once when free or already held by this thread)."""
        me = threading.get_ident()
        with self._guard:
            if self._owner == me:
                self._depth += 1
                return
            if self._owner is None:
                self._owner, self._depth = me, 1
                return
            gate = threading.Lock()
            gate.acquire()
            self._waiters.append(gate)
        gate.acquire()  # released by the holder that hands the turn over, with _owner already set to us
        with self._guard:
            self._owner, self._depth = me, 1

    def release(self) -> None:
        """End this thread's turn (the outermost release hands it to the longest waiting thread).

        Raises:
            RuntimeError: the calling thread does not hold the lock.
        """
        with self._guard:
            if self._owner != threading.get_ident():
                raise RuntimeError("release of a FifoLock not held by this thread")
            self._depth -= 1
            if self._depth:
                return
            if self._waiters:
                self._owner = -1  # taken: the woken waiter sets itself as owner; nobody else may enter meanwhile
                self._waiters.popleft().release()
            else:
                self._owner = None

    def __enter__(self) -> FifoLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
