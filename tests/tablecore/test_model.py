"""Acceptance 2: random sequences of upsert / delete / insert_overwrite against a reference model (a dict by key;
the latest ordering value wins); the snapshot equals the model after every step, and hudi-rs agrees at the end."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tablecore import InvalidInputError, Table, TableConfig
from tests.tablecore.oracle import hudi_snapshot, spark_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

KEYS = st.integers(min_value=0, max_value=11)
DDL = "id int, part string, ts long, val string"

upsert = st.tuples(st.just("upsert"), st.lists(st.tuples(KEYS, st.integers(0, 50)), min_size=1, max_size=8))
delete = st.tuples(st.just("delete"), st.lists(KEYS, min_size=1, max_size=4))
overwrite = st.tuples(st.just("insert_overwrite"),
                      st.lists(st.tuples(st.sampled_from([0, 3, 6, 9]), st.integers(0, 50)), min_size=1, max_size=3))
OPS = st.lists(st.one_of(upsert, delete, overwrite), min_size=1, max_size=5)


def part_of(key: int) -> str:
    return f"p{key % 3}"


def model_snapshot(model: dict[int, tuple[int, str]]) -> list[tuple[int, int, str]]:
    return sorted((k, ts, v) for k, (ts, v) in model.items())


_counter = itertools.count()


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS, event_time=st.booleans())
@example(ops=[("upsert", [(0, 0)]), ("delete", [0])], event_time=True)  # deletes carry no ordering value
def test_snapshot_equals_reference_model_after_every_step(spark: Any, ops: list[Any], event_time: bool) -> None:
    root = tempfile.mkdtemp(prefix="model-")
    try:
        mode = "EVENT_TIME_ORDERING" if event_time else "COMMIT_TIME_ORDERING"
        t = Table.create(f"{root}/t", TableConfig(name="m", record_key=["id"], ordering_field="ts",
                                                  partition_fields=["part"], merge_mode=mode), spark=spark)
        model: dict[int, tuple[int, str]] = {}
        for step, (kind, payload) in enumerate(ops):
            n = next(_counter)
            if kind == "upsert":
                # distinct ordering values within a batch (ties inside one batch have no defined winner)
                rows = [(k, part_of(k), ts * 100 + i, f"s{n}-{i}") for i, (k, ts) in enumerate(payload)]
                batch_best: dict[int, tuple[int, str]] = {}
                for k, _p, ts, v in rows:
                    if k not in batch_best or ts > batch_best[k][0]:
                        batch_best[k] = (ts, v)
                for k, (ts, v) in batch_best.items():
                    if not event_time or k not in model or ts >= model[k][0]:
                        model[k] = (ts, v)
                t.upsert(spark.createDataFrame(rows, DDL))
            elif kind == "delete":
                keys = spark.createDataFrame([(k, part_of(k)) for k in payload], "id int, part string")
                if t.latest_instant() is None:
                    with pytest.raises(InvalidInputError, match="no data yet"):
                        t.delete(keys)
                    continue
                t.delete(keys)
                for k in payload:
                    model.pop(k, None)
            else:
                rows = [(k, part_of(k), ts * 100 + i, f"o{n}-{i}") for i, (k, ts) in enumerate(payload)]
                t.insert_overwrite(spark.createDataFrame(rows, DDL))
                for k in [k for k in model if part_of(k) == "p0"]:
                    del model[k]
                for k, _p, ts, v in sorted(rows, key=lambda r: r[2]):
                    model[k] = (ts, v)
            got = sorted((r.id, r.ts, r.val) for r in t.read().select("id", "ts", "val").collect())
            assert got == model_snapshot(model), f"step {step}: {kind}"
        if t.latest_instant() is not None:
            assert spark_rows(t.read()) == hudi_snapshot(t.uri)
    finally:
        shutil.rmtree(root, ignore_errors=True)
