"""Longest trials first, one to each pytest-xdist worker (a plugin of ``tests/conftest.py``).

``make crash-trials`` runs 48 trials on two workers, and two of them take a third and a sixth of the run's
worker-time (the Kafka changelog trial 1097 s and the pipeline trial 506 s of 3919 s on 2026-12-03). In collection
order, xdist's default scheduler sent both of them, and the two backfill trials, to the same worker: that worker ran
for 2200 s while the other had finished its 1719 s. A test marked ``trial_seconds(N)`` (its measured seconds on the
CI machine) is a long trial; when a run under xdist selects any, the run's items are ranked by those seconds (the
unmarked ones after them, in their collection order) and dealt round-robin into one hand per worker, the hands one
after the other. With ``--dist worksteal`` (the ``crash-trials`` target) each worker starts on a hand of its own,
longest first, and a worker that runs out takes the tail of the other's: the longest trials run at the same time, and
the short ones fill in at the end.
"""

from __future__ import annotations

import itertools
import os

import pytest


def cost(item: pytest.Item) -> float:
    """The measured seconds of ``item``'s trial (0 for a test not marked ``trial_seconds``)."""
    marker = item.get_closest_marker("trial_seconds")
    return float(marker.args[0]) if marker is not None else 0.0


def deal(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` ranked by :func:`cost` (stable), dealt into ``workers`` hands, the hands concatenated."""
    ranked = sorted(items, key=cost, reverse=True)
    return [item for hand in range(workers) for item in ranked[hand::workers]]


def worksteal(argv: list[str]) -> bool:
    """Whether the pytest command line ``argv`` asks for ``--dist worksteal`` (an xdist worker's own options say
    ``dist=no``; its ``workerinput`` holds the main process's command line)."""
    return "--dist=worksteal" in argv or ("--dist", "worksteal") in itertools.pairwise(argv)


@pytest.hookimpl(trylast=True)  # after ``-m`` has deselected: the hands are made of what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deal the run's items (see the module docstring) in an xdist worker of a ``--dist worksteal`` run of two or
    more workers that selects a long trial. Every worker collects the same items and deals them the same way, as
    xdist requires. (xdist's default scheduler sends each worker a run of consecutive items first: the first hand
    would go to the first worker's start and the next worker's.)"""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    workerinput = getattr(config, "workerinput", None)
    argv = list(workerinput.get("mainargv", [])) if workerinput is not None else []
    if workers >= 2 and worksteal(argv) and any(cost(item) for item in items):
        items[:] = deal(items, workers)
