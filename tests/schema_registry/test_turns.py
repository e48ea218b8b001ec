"""The SQLite writers' lock hands the turn over in arrival order, is reentrant, and refuses foreign releases."""

from __future__ import annotations

import threading
import time

import pytest

from schema_registry.store.turns import FifoLock


def test_fifo_lock_serves_waiters_in_arrival_order() -> None:
    lock = FifoLock()
    order: list[int] = []
    lock.acquire()
    threads = []
    for i in range(8):
        t = threading.Thread(target=lambda i=i: (lock.acquire(), order.append(i), lock.release()))
        t.start()
        threads.append(t)
        deadline = time.monotonic() + 5
        while len(lock._waiters) < i + 1:  # thread i has queued: start the next one
            assert time.monotonic() < deadline
            time.sleep(0.001)
    lock.release()
    for t in threads:
        t.join(timeout=5)
    assert order == list(range(8))


def test_fifo_lock_is_reentrant_and_exclusive() -> None:
    lock = FifoLock()
    inside = 0
    peak = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, peak
        for _ in range(200):
            with lock, lock:  # reentrant
                with guard:
                    inside += 1
                    peak = max(peak, inside)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert peak == 1


def test_fifo_lock_release_by_another_thread_fails() -> None:
    lock = FifoLock()
    with pytest.raises(RuntimeError):
        lock.release()
    lock.acquire()
    errors: list[BaseException] = []

    def other() -> None:
        try:
            lock.release()
        except RuntimeError as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert errors
    lock.release()
