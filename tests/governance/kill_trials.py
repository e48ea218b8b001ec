"""The kill loop of the pipeline crash trials: a pipeline process (``tests.governance.crash_pipeline``) started,
SIGKILLed with its process group (the JVM and the Python workers die with it) at a random moment after it reported
READY, the window of that moment adapted to the time a batch takes on this machine.

The next trial's process is started as soon as the current one is READY: it brings its JVM up and waits (WARM) for
the word to run, so a trial does not wait for a JVM to start. It touches no table before that word."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.processes import short_lived_spark_env

ROOT = Path(__file__).resolve().parents[2]


def _watch(stream: Any, batch_times: list[float]) -> None:
    """Record when the pipeline process reports each published batch."""
    for line in stream:
        if line.startswith("BATCH"):
            batch_times.append(time.monotonic())


class KillTrials:
    """Runs ``crash_pipeline`` on a pipeline file and kills it; :meth:`once` is one trial. A context manager: leaving
    it stops the process started for the next trial.

    Args:
        spec_path: the pipeline file.
        max_batches: batches a process runs before it ends on its own.
        rng: the seeded random source of the kill moments.
        window: the first window (seconds after READY) in which the kill falls.
        slack: the window becomes ``slack`` times a process's first batch (its slowest) once one was seen.
        patience: kills in a row before any batch after which the window grows by half.
    """

    def __init__(self, spec_path: Path, max_batches: int, rng: random.Random, *, window: float = 10.0,
                 slack: float = 1.2, patience: int = 3, longest: float = 60.0) -> None:
        self.spec_path, self.max_batches, self.rng = spec_path, max_batches, rng
        self.window, self.slack, self.patience, self.longest = window, slack, patience, longest
        self.kills = 0
        self._stalled = 0
        self._env = short_lived_spark_env()
        self._next: subprocess.Popen[str] | None = None
        self._logs = spec_path.parent / "trial-logs"
        """Each process's standard error (its log), for the message when a process does not start or open its
        tables."""
        self._log_of: dict[subprocess.Popen[str], Path] = {}  # each started process's log
        self.history: list[dict[str, Any]] = []
        """Per trial, where its time went (also a line of ``trial-logs/trials.jsonl``): the kills so far, the seconds
        spent waiting for the process's JVM (WARM), from GO to READY, the kill window, from READY to the kill (or the
        end) and to each batch, and the clock at its end (the gaps between trials are the test's own checks)."""

    def __enter__(self) -> KillTrials:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop the process started for the next trial (it has not touched any table)."""
        if self._next is not None:
            _stop(self._next)
            self._next = None

    def _start(self) -> subprocess.Popen[str]:
        self._logs.mkdir(exist_ok=True)
        path = self._logs / f"process-{len(self._log_of) + 1}.log"
        with path.open("wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "tests.governance.crash_pipeline", str(self.spec_path),
                                     str(self.max_batches)], cwd=ROOT, env=self._env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
        self._log_of[proc] = path
        return proc

    def _failed(self, proc: subprocess.Popen[str], what: str, line: str) -> AssertionError:
        """Stop ``proc`` and say why it failed, with the end of its log."""
        _stop(proc)
        log = self._log_of[proc]
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        return AssertionError(f"kill {self.kills}: the pipeline process did not {what} ({line!r}); the end of its "
                              f"log ({log}):\n{tail}")

    def once(self) -> bool:
        """Run a process (the one started at the last trial, if any), kill it at a random moment of the window
        (unless it ends first); returns whether it was killed."""
        proc, self._next = self._next or self._start(), None
        assert proc.stdout is not None and proc.stdin is not None
        began = time.monotonic()
        line = proc.stdout.readline()
        if line.strip() != "WARM":
            raise self._failed(proc, "start", line)
        warm = time.monotonic()
        proc.stdin.write("GO\n")
        proc.stdin.close()
        line = proc.stdout.readline()
        if line.strip() != "READY":
            raise self._failed(proc, "open its tables", line)
        self._next = self._start()  # the next trial's JVM comes up while this process runs
        ready = time.monotonic()
        batch_times: list[float] = []
        reader = threading.Thread(target=_watch, args=(proc.stdout, batch_times), daemon=True)
        reader.start()
        killed = False
        window = self.window
        try:
            proc.wait(timeout=self.rng.uniform(0.0, self.window))  # returns only if the process ended on its own
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            self.kills += 1
            killed = True
        ended = time.monotonic() - ready
        proc.wait(timeout=60)
        reader.join(timeout=10)
        record = {"kill": self.kills, "waited_warm": round(warm - began, 1), "go_to_ready": round(ready - warm, 1),
                  "window": round(window, 1), "ready_to_end": round(ended, 1),
                  "batches": [round(t - ready, 1) for t in batch_times], "at": round(time.time(), 1)}
        self.history.append(record)
        with (self._logs / "trials.jsonl").open("a") as out:
            out.write(json.dumps(record) + "\n")
        # the kill falls anywhere in the first batch of a process (its slowest) or just after it
        if batch_times:
            self.window = min(self.longest, max(3.0, self.slack * (batch_times[0] - ready)))
            self._stalled = 0
        else:
            self._stalled += 1
            if self._stalled >= self.patience:  # kills in a row before any batch: the window is too short here
                self.window, self._stalled = min(self.longest * 1.5, self.window * 1.5), 0
        return killed


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc``'s process group (its JVM included) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
