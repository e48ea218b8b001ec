"""The environment of the short-lived Spark processes the tests start (a writer killed at a commit point, a pipeline
process killed at a random moment, a publisher in another process): this repository on ``PYTHONPATH`` and their
driver JVM compiling with C1 only.

Such a process lives for one operation or a batch or two: HotSpot's C2 compiler spends its CPU on code the process
never runs long enough to repay, on two cores that the other test worker needs. Measured on ten ``test_crash`` cases
(two workers, 2026-12-04): 171 and 181 s with the default JIT, 128 and 131 s with C1 only (the C1 code of Spark's
hot paths is what a cold process runs anyway). The JIT changes no result; the tests' own long-lived sessions, the
Spark Connect server and the cluster keep the default (a whole suite on C1 only was slower: its workers' JVMs live
for the whole run)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def short_lived_spark_env(**extra: str) -> dict[str, str]:
    """``os.environ`` for a child process that starts a short-lived Spark driver: the repository on ``PYTHONPATH``,
    :data:`SHORT_LIVED_JVM_OPTIONS` added to ``SPARK_SUBMIT_OPTS`` (what ``spark-submit`` gives the driver's JVM), and
    ``extra``."""
    submit = " ".join(x for x in (os.environ.get("SPARK_SUBMIT_OPTS", ""), SHORT_LIVED_JVM_OPTIONS) if x)
    return {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_SUBMIT_OPTS": submit, **extra}
