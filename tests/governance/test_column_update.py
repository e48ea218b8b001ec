"""Targeted column updates (issue 21): a pipeline with ``operation: update_columns`` writes the named columns of rows
the target holds and leaves every other column, and every other row, as it was; keys the target does not hold are
not inserted. Copy-on-write and merge-on-read; hudi-rs reads the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from governance.errors import PipelineConfigError
from governance.pipeline import PipelineRunner, load_pipeline
from tablecore import Table, TableConfig
from tests.tablecore.oracle import hudi_snapshot

pytestmark = pytest.mark.spark

DDL = "id string, name string, tier string, score int, dt string, ts bigint"
ROWS = [(f"d{i}", f"name-{i}", "silver", 10 * i, f"2026-11-0{1 + i % 2}", 100 + i) for i in range(6)]
PIPELINE = """
name: tiers
source: {kind: files, path: landing, format: json}
transform: {sql: "SELECT id, dt, tier FROM {source}"}
target: {path: tables/drivers, name: drivers, record_key: [id], ordering_field: ts, partition_fields: [dt],
         table_type: TYPE, operation: update_columns, update_columns: [tier]}
"""


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_update_columns_writes_only_the_named_columns(spark: SparkSession, tmp_path: Path, table_type: str) -> None:
    table = Table.create(str(tmp_path / "tables" / "drivers"), TableConfig(
        name="drivers", record_key=["id"], ordering_field="ts", partition_fields=["dt"], table_type=table_type),
        spark=spark)
    table.upsert(spark.createDataFrame(ROWS, DDL))
    landing = tmp_path / "landing"
    landing.mkdir()
    changes = [{"id": "d0", "dt": "2026-11-01", "tier": "gold"}, {"id": "d3", "dt": "2026-11-02", "tier": "gold"},
               {"id": "d4", "dt": "2026-11-01", "tier": "bronze"}, {"id": "nobody", "dt": "2026-11-01", "tier": "x"}]
    (landing / "b-000.json").write_text("\n".join(json.dumps(c) for c in changes))
    path = tmp_path / "tiers.yaml"
    path.write_text(PIPELINE.replace("TYPE", table_type))

    [record] = PipelineRunner(load_pipeline(path), spark).run_once()
    assert record.decision.value == "published"
    c = record.conservation
    assert (c.rows_in, c.published, c.deduplicated) == (4, 3, 1)
    assert record.writes is not None and (record.writes.inserted, record.writes.updated) == (0, 3)

    tiers = {"d0": "gold", "d3": "gold", "d4": "bronze"}
    want = {r[0]: (r[1], tiers.get(r[0], r[2]), r[3], r[4], r[5]) for r in ROWS}
    for rows in ([r.asDict() for r in table.read().collect()], hudi_snapshot(table.uri)):
        assert {r["id"]: (r["name"], r["tier"], r["score"], r["dt"], r["ts"]) for r in rows} == want


def test_update_columns_is_checked_at_load(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    for edit, message in [("update_columns: [tier]", "update_columns: [dt]"),
                          ("update_columns: [tier]", "update_columns: []"),
                          ("operation: update_columns, ", "")]:
        path.write_text(PIPELINE.replace("TYPE", "COPY_ON_WRITE").replace(edit, message))
        expected = {"update_columns: [dt]": "'dt' is a record-key or partition field",
                    "update_columns: []": "names no column", "": "update_columns is for operation update_columns"}
        with pytest.raises(PipelineConfigError, match=expected[message]):
            load_pipeline(path)
