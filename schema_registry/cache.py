"""A small thread-safe LRU map bounded by the total weight of its values, for what never changes once committed.

The registry's caches hold the content of a global id and what is derived from it (parsed schemas, record shapes,
resolved semantic bindings, rendered response bodies): content rows are never updated or deleted, so an entry can
never be stale, in this process or any other sharing the store.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    """A thread-safe LRU map bounded by the total weight of its values (by default: their number)."""

    def __init__(self, budget: int, weigh: Callable[[V], int] | None = None) -> None:
        """Args:
            budget: the most total weight kept.
            weigh: the weight of a value (default: 1 per value); a value heavier than the budget is not kept.
        """
        self._budget = budget
        self._weigh = weigh or (lambda _value: 1)
        self._map: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or None."""
        with self._lock:
            hit = self._map.get(key)
            if hit is None:
                return None
            self._map.move_to_end(key)
            return hit[0]

    def put(self, key: K, value: V) -> None:
        """Store ``value``, evicting the least recently used entries over the budget."""
        weight = self._weigh(value)
        if weight > self._budget:
            return
        with self._lock:
            old = self._map.pop(key, None)
            if old is not None:
                self._total -= old[1]
            self._map[key] = (value, weight)
            self._total += weight
            while self._total > self._budget:
                _, (_, w) = self._map.popitem(last=False)
                self._total -= w

    def __len__(self) -> int:
        """The number of entries."""
        with self._lock:
            return len(self._map)
