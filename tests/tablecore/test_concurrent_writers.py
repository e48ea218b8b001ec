"""Acceptance 3 (issue 17): two writer processes upsert into one table at the same time, 20 rounds mixing disjoint
partitions, the same new keys and the same existing keys — on a local disk and on the S3 test server.

Every round ends with one or both commits published (a loser gets ``CommitConflictError`` and leaves nothing behind),
no key is ever in the table twice, and the table equals a model that applies the published batches in instant order;
hudi-rs reads the same. Two JVMs and 20 rounds take a few minutes: the trial runs under ``make crash-trials``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tablecore import Table, TableConfig
from tablecore.locks import LOCK_URL_ENV
from tests.processes import short_lived_spark_env
from tests.s3proxy import UnconditionalS3Proxy
from tests.s3server import S3Server
from tests.schema_registry.conftest import PG_ENV
from tests.tablecore.oracle import hudi_snapshot, spark_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.crash_trials]

ROOT = Path(__file__).resolve().parents[2]
DDL = "id int, part string, ts long, val string"
ROUNDS = 20
KEYS = 200


class Writer:
    """A writer process of :mod:`tests.tablecore.concurrent_writer`."""

    def __init__(self, uri: str, env: dict[str, str] | None = None) -> None:
        env = short_lived_spark_env(**(env or {}))
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.tablecore.concurrent_writer", uri], cwd=ROOT,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"writer exited with {self.proc.poll()}"
        return dict(json.loads(line))

    def send(self, rows: list[tuple[int, str, int, str]], at: float) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"rows": rows, "at": at}) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def round_batches(r: int) -> tuple[str, list[tuple[int, str, int, str]], list[tuple[int, str, int, str]]]:
    """The kind of round ``r`` and the batches of writers A and B."""
    kind = ("disjoint", "same_new_keys", "same_existing_keys")[r % 3]
    if kind == "disjoint":  # other partitions, other keys: both commit
        return kind, [(i, f"a{r}", r, f"A{r}") for i in range(KEYS)], [(i, f"b{r}", r, f"B{r}") for i in range(KEYS)]
    if kind == "same_new_keys":  # the same new keys in a new partition: each writer starts file groups of its own
        return kind, [(i, f"n{r}", r, f"A{r}") for i in range(KEYS)], [(i, f"n{r}", r, f"B{r}") for i in range(KEYS)]
    # the keys the previous round inserted, both updating them
    return kind, [(i, f"n{r - 1}", r, f"A{r}") for i in range(KEYS)], [(i, f"n{r - 1}", r, f"B{r}")
                                                                     for i in range(KEYS)]


@pytest.mark.trial_seconds(120)  # 90 s on a local disk, 150 s on S3
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_two_writers_twenty_rounds_never_duplicate_or_corrupt(lake_path: str, table_type: str, spark) -> None:
    t = Table.create(lake_path, TableConfig(name="cw", record_key=["id"], ordering_field="ts",
                                            partition_fields=["part"], table_type=table_type), spark=spark)
    trial(t, spark, [Writer(t.uri), Writer(t.uri)])


@pytest.mark.trial_seconds(150)
def test_two_writers_on_a_store_without_conditional_writes_lock_in_postgresql(s3: S3Server, spark) -> None:
    """An S3-compatible store that ignores If-None-Match (a proxy in front of the test server drops the header): the
    writers are refused without a lock (see test_locks.py); with ``LAKEGATE_LOCK_URL`` the PostgreSQL advisory lock
    serializes their publishes and the same 20 rounds hold."""
    pg = os.environ.get(PG_ENV)
    if not pg:
        pytest.skip(f"the PostgreSQL lock needs {PG_ENV} (make test / CI set it)")
    proxy = UnconditionalS3Proxy(s3.endpoint)
    try:
        t = Table.create(s3.table_uri("cw-pg"), TableConfig(name="cw", record_key=["id"], ordering_field="ts",
                                                            partition_fields=["part"]), spark=spark)
        env = {"AWS_ENDPOINT_URL": proxy.endpoint, LOCK_URL_ENV: pg}
        trial(t, spark, [Writer(t.uri, env), Writer(t.uri, env)])
    finally:
        proxy.stop()


def trial(t: Table, spark: Any, writers: list[Writer]) -> None:
    """20 rounds of the two ``writers`` against a model (see the module docstring)."""
    t.upsert(spark.createDataFrame([(0, "seed", 0, "seed")], DDL))
    model: dict[tuple[str, int], str] = {("seed", 0): "seed"}
    outcomes: dict[str, int] = {}
    try:
        for w in writers:
            assert w.answer()["status"] == "ready"
        for r in range(ROUNDS):
            kind, a, b = round_batches(r)
            at = time.time() + 1.0
            writers[0].send(a, at)
            writers[1].send(b, at)
            answers = [writers[0].answer(), writers[1].answer()]
            committed = sorted((ans["instant"], batch) for ans, batch in zip(answers, (a, b), strict=True)
                               if ans["status"] == "committed")
            assert committed, f"round {r} ({kind}): neither commit was published: {answers}"
            if kind == "disjoint":
                assert len(committed) == 2, f"round {r}: disjoint writes must both commit: {answers}"
            for _, batch in committed:  # published batches in instant order: the later one wins a key
                model.update({(part, i): val for i, part, _, val in batch})
            key = f"{kind}:{len(committed)}"
            outcomes[key] = outcomes.get(key, 0) + 1

            rows = spark_rows(t.read())
            keys = [(x["_hoodie_partition_path"], x["id"]) for x in rows]
            assert len(keys) == len(set(keys)), f"round {r} ({kind}): a key is in the table twice"
            assert {(x["part"], x["id"]): x["val"] for x in rows} == model, f"round {r} ({kind}): table != model"
            assert all(i.state == "completed" for i in t.timeline()), f"round {r}: an instant was left pending"
        assert rows == hudi_snapshot(t.uri)
    finally:
        for w in writers:
            w.close()
    # the trial saw real contention: same-key rounds that ended in a conflict
    conflicts = outcomes.get("same_new_keys:1", 0) + outcomes.get("same_existing_keys:1", 0)
    print(f"outcomes: {outcomes}")
    assert conflicts >= 4, f"too few rounds overlapped to test anything: {outcomes}"
