"""Staged commits (DESIGN §2.4): invisible until published, publishable from another process, conflict-checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tablecore import CommitConflictError, StagedCommitError, Table, TableConfig
from tests.processes import short_lived_spark_env
from tests.tablecore.oracle import hudi_completed, hudi_snapshot, spark_rows

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
DDL = "id int, part string, ts long, val string"


def _six_rows_table(path: str, table_type: str, spark) -> Table:
    """A new table at ``path`` holding rows 0-5 (``v1``) in two partitions."""
    t = Table.create(path, TableConfig(name="s", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                                       table_type=table_type), spark=spark)
    t.upsert(spark.createDataFrame([(i, f"p{i % 2}", 1, "v1") for i in range(6)], DDL))
    return t


@pytest.fixture(params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def table(request: pytest.FixtureRequest, lake_path: str, spark) -> Table:
    return _six_rows_table(lake_path, request.param, spark)


def test_staged_commit_is_invisible_then_published(table: Table, spark) -> None:
    before = spark_rows(table.read())
    s = table.upsert(spark.createDataFrame([(1, "p1", 2, "v2"), (10, "p0", 2, "new")], DDL), stage=True)
    assert s.result.updated == 1 and s.result.inserted == 1
    # nobody sees it
    assert spark_rows(table.read()) == before == hudi_snapshot(table.uri)
    assert s.instant not in hudi_completed(table.uri)
    assert [x.instant for x in table.timeline() if x.staged] == [s.instant]
    # the audit views
    assert sorted((r.id, r.val) for r in s.changes().collect()) == [(1, "v2"), (10, "new")]
    assert sorted((r.id, r.val) for r in s.snapshot().collect()) == sorted(
        [(i, "v1") for i in range(6) if i != 1] + [(1, "v2"), (10, "new")])
    assert spark_rows(s.before()) == before
    r = s.publish(extra_metadata={"audit.verdict": "pass"})
    assert r.instant == s.instant
    assert table.commit_metadata(s.instant).extra_metadata["audit.verdict"] == "pass"
    assert spark_rows(table.read()) == hudi_snapshot(table.uri)
    assert table.read().count() == 7
    assert table.staged() == []
    with pytest.raises(StagedCommitError):
        s.publish()


def test_abort_removes_every_file(table: Table, spark) -> None:
    files = sorted(p.name for p in Path(table.path).rglob("*.parquet"))
    s = table.upsert(spark.createDataFrame([(1, "p1", 2, "v2")], DDL), stage=True)
    s.abort()
    assert sorted(p.name for p in Path(table.path).rglob("*.parquet")) == files
    assert all(i.state == "completed" for i in table.timeline())


def test_staged_commit_survives_other_writers_and_rollback_failed(table: Table, spark) -> None:
    s = table.upsert(spark.createDataFrame([(1, "p1", 2, "staged")], DDL), stage=True)
    table.upsert(spark.createDataFrame([(0, "p0", 3, "other")], DDL))  # another partition: no conflict
    assert table.rollback_failed() == []
    s.publish()
    vals = {r.id: r.val for r in table.read().collect()}
    assert vals[1] == "staged" and vals[0] == "other"
    assert spark_rows(table.read()) == hudi_snapshot(table.uri)


def test_publish_conflicts_when_same_file_group_committed_meanwhile(table: Table, spark) -> None:
    s = table.upsert(spark.createDataFrame([(1, "p1", 2, "staged")], DDL), stage=True)
    table.upsert(spark.createDataFrame([(3, "p1", 3, "winner")], DDL))  # same partition, same file group
    with pytest.raises(CommitConflictError, match="conflicts with"):
        s.publish()
    s.abort()
    assert {r.id: r.val for r in table.read().collect()}[1] == "v1"


def test_staged_commits_are_listed_and_published_by_another_process(lake_path: str, spark) -> None:
    """A copy-on-write and a merge-on-read table each hold a staged commit; one other process (a JVM of its own,
    started once for both tables) lists and publishes them."""
    tables, staged = [], []
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        t = _six_rows_table(f"{lake_path}-{table_type.lower()}", table_type, spark)
        tables.append(t)
        staged.append(t.upsert(spark.createDataFrame([(2, "p0", 2, "from-afar")], DDL), stage=True))
    code = (
        "import sys\n"
        "from tablecore import Table\n"
        "from tablecore.spark.session import local_session\n"
        "spark = local_session('publisher', cores=1)\n"
        "for path, instant in zip(sys.argv[1::2], sys.argv[2::2], strict=True):\n"
        "    t = Table.open(path, spark=spark)\n"
        "    staged = t.staged()\n"
        "    assert [x.instant for x in staged] == [instant], staged\n"
        "    staged[0].publish(extra_metadata={'by': 'other-process'})\n"
    )
    env = short_lived_spark_env()
    args = [x for t, s in zip(tables, staged, strict=True) for x in (t.path, s.instant)]
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for t, s in zip(tables, staged, strict=True):
        assert t.commit_metadata(s.instant).extra_metadata["by"] == "other-process", t.config.table_type
        assert {r.id: r.val for r in t.read().collect()}[2] == "from-afar", t.config.table_type


def test_before_of_a_first_commit_has_the_staged_columns(table_path: str, spark) -> None:
    t = Table.create(table_path, TableConfig(name="f", record_key=["id"], ordering_field="ts",
                                             partition_fields=["part"]), spark=spark)
    s = t.upsert(spark.createDataFrame([(1, "p0", 1, "v")], DDL), stage=True)
    before = s.before()
    assert before.count() == 0
    assert [c for c in before.columns if not c.startswith("_hoodie_")] == ["id", "part", "ts", "val"]
    assert before.where("val = 'v'").count() == 0  # a query naming a data column resolves
    s.abort()


def test_a_row_observer_sees_the_written_rows_in_the_write_job(table: Table, spark) -> None:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    seen: dict[str, object] = {}
    obs = Observation("written_rows")

    def observer(df, data_columns):  # type: ignore[no-untyped-def]
        seen["columns"] = list(data_columns)
        return df.observe(obs, F.count(F.lit(1)).alias("n"), F.max("ts").alias("ts"), F.sum("id").alias("ids"))

    batch = spark.createDataFrame([(1, "p1", 5, "v2"), (10, "p0", 5, "new"), (11, "p1", 7, "new")], DDL)
    s = table.upsert(batch, stage=True, observer=observer)
    assert seen["columns"] == ["id", "part", "ts", "val"]
    assert obs.get == {"n": 3, "ts": 7, "ids": 22}
    s.publish()
    assert sorted(r.id for r in table.read().collect()) == [0, 1, 2, 3, 4, 5, 10, 11]
    assert spark_rows(table.read()) == hudi_snapshot(table.uri)  # an observed write reads the same through hudi-rs


def test_an_observer_that_changes_the_rows_fails_the_write_and_leaves_nothing(table: Table, spark) -> None:
    from tablecore import InvalidInputError

    before = spark_rows(table.read())
    files = sorted(p.name for p in Path(table.path).rglob("*") if p.is_file() and ".hoodie" not in p.parts)
    with pytest.raises(InvalidInputError, match="row observer changed the written columns"):
        table.upsert(spark.createDataFrame([(1, "p1", 5, "v2")], DDL), stage=True,
                     observer=lambda df, cols: df.drop("val"))
    assert spark_rows(table.read()) == before == hudi_snapshot(table.uri)
    assert sorted(p.name for p in Path(table.path).rglob("*") if p.is_file() and ".hoodie" not in p.parts) == files
    assert table.staged() == []
