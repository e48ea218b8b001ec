"""The kill loop of the pipeline crash trials: a pipeline process (``tests.governance.crash_pipeline``) started,
SIGKILLed with its process group (the JVM and the Python workers die with it) at a random moment after it reported
READY, the window of that moment adapted to the time a batch takes on this machine."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _watch(stream: Any, batch_times: list[float]) -> None:
    """Record when the pipeline process reports each published batch."""
    for line in stream:
        if line.startswith("BATCH"):
            batch_times.append(time.monotonic())


class KillTrials:
    """Runs ``crash_pipeline`` on a pipeline file and kills it; :meth:`once` is one trial.

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
        self._env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def once(self) -> bool:
        """Start the process, kill it at a random moment of the window (unless it ends first); returns whether it
        was killed."""
        proc = subprocess.Popen([sys.executable, "-m", "tests.governance.crash_pipeline", str(self.spec_path),
                                 str(self.max_batches)], cwd=ROOT, env=self._env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "READY", f"kill {self.kills}: the pipeline process did not start ({line!r})"
        ready = time.monotonic()
        batch_times: list[float] = []
        reader = threading.Thread(target=_watch, args=(proc.stdout, batch_times), daemon=True)
        reader.start()
        killed = False
        try:
            proc.wait(timeout=self.rng.uniform(0.0, self.window))  # returns only if the process ended on its own
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            self.kills += 1
            killed = True
        proc.wait(timeout=60)
        reader.join(timeout=10)
        # the kill falls anywhere in the first batch of a process (its slowest) or just after it
        if batch_times:
            self.window = min(self.longest, max(3.0, self.slack * (batch_times[0] - ready)))
            self._stalled = 0
        else:
            self._stalled += 1
            if self._stalled >= self.patience:  # kills in a row before any batch: the window is too short here
                self.window, self._stalled = min(self.longest * 1.5, self.window * 1.5), 0
        return killed
