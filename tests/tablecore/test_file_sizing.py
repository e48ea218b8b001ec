"""File sizing: small files are filled before new file groups open; no tiny-file explosion."""

from __future__ import annotations

import pytest

from tablecore import Table, TableConfig

pytestmark = pytest.mark.spark

DDL = "id int, part string, ts long, payload string"


def groups(t: Table) -> set[str]:
    return {r[0] for r in t.read().select("_hoodie_file_name").distinct().collect()}


def test_repeated_small_batches_fill_the_same_file_group(table_path: str, spark) -> None:
    t = Table.create(table_path, TableConfig(name="f", record_key=["id"], ordering_field="ts",
                                             partition_fields=["part"]), spark=spark)
    for b in range(4):
        t.upsert(spark.createDataFrame([(b * 100 + i, "p", b, "x" * 20) for i in range(20)], DDL))
    assert len(groups(t)) == 1
    assert t.read().count() == 80


def test_inserts_beyond_target_size_open_new_file_groups(table_path: str, spark) -> None:
    cfg = TableConfig(name="f", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                      target_file_size=64 * 1024, small_file_limit=32 * 1024)
    t = Table.create(table_path, cfg, spark=spark)
    t.upsert(spark.createDataFrame([(i, "p", 0, f"{i:08d}" * 8) for i in range(200)], DDL))
    # a record size estimate now exists; 20,000 rows of ~100 bytes do not fit one 64 KB file
    r = t.insert(spark.createDataFrame([(10_000 + i, "p", 1, f"{i:08d}" * 8) for i in range(20_000)], DDL))
    assert r.files_written > 3
    sizes = [f.stat().st_size for f in __import__("pathlib").Path(table_path).rglob("*.parquet")]
    assert max(sizes) < 10 * 64 * 1024
