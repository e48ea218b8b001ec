"""Acceptance 3: a writer SIGKILLed at several points of a commit leaves the last completed state visible to our
reader and to hudi-rs, and the next write succeeds (rolling the failed instant back).

Each case starts a writer process with a JVM of its own (about half a minute a case, ten minutes in all), so the
matrix runs with the other SIGKILL trials in ``make crash-trials``, which CI runs after ``make test``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tablecore import Table, TableConfig, metadata_table
from tablecore.format.file_view import list_table_files
from tablecore.format.log_format import read_blocks
from tests.processes import short_lived_spark_env
from tests.tablecore.oracle import hudi_completed, hudi_snapshot, spark_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.crash_trials]

ROOT = Path(__file__).resolve().parents[2]
DDL = "id int, part string, ts long, val string"


def run_writer(path: str, point: str, first: int, op: str = "upsert") -> subprocess.CompletedProcess[str]:
    env = short_lived_spark_env()
    return subprocess.run([sys.executable, "-m", "tests.tablecore.crash_writer", path, point, str(first), op],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def assert_no_orphans(t: Table) -> None:
    """Every base file, CDC log file and log block belongs to an instant of the timeline (nothing of a killed
    write), and every CDC log file is the one its commit's write stats name."""
    live = {i.instant for i in t.timeline()}
    files = list_table_files(t.io)
    assert {f.instant for f in files.bases} <= live, "base files of the killed instant were left behind"
    named = {p for i in t.timeline() if i.state == "completed" and i.action in ("commit", "deltacommit")
             for s in t.commit_metadata(i.instant).write_stats for p in (s.cdc_stats or {})}
    assert {f.relative_path for f in files.cdc} == named, "CDC log files of a killed write were left behind"
    for lg in files.logs:
        blocks = read_blocks(t.io.read_bytes(lg.path))
        assert {b.instant for b in blocks} <= live, f"log blocks of the killed instant were left in {lg.name}"


POINTS = ["requested", "inflight", "data_written", "before_complete", "after_complete"]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("point", POINTS)
def test_sigkill_during_commit_leaves_last_completed_state(point: str, table_type: str, table_path: str,
                                                           spark) -> None:
    kill_and_recover(table_path, point, table_type, spark)


@pytest.mark.parametrize(("point", "table_type"), [("inflight", "COPY_ON_WRITE"), ("data_written", "MERGE_ON_READ"),
                                                   ("before_complete", "COPY_ON_WRITE"),
                                                   ("after_complete", "MERGE_ON_READ")])
def test_sigkill_of_a_writer_on_s3_leaves_the_table_readable_and_the_next_writer_recovers(
        point: str, table_type: str, s3, spark) -> None:
    kill_and_recover(s3.table_uri(), point, table_type, spark)


@pytest.mark.parametrize(("point", "table_type"), [("inflight", "COPY_ON_WRITE"), ("data_written", "MERGE_ON_READ"),
                                                   ("metadata_committed", "COPY_ON_WRITE"),
                                                   ("after_complete", "MERGE_ON_READ")])
def test_sigkill_of_an_arrow_bulk_insert_leaves_the_table_and_its_metadata_table_consistent(
        point: str, table_type: str, table_path: str, spark) -> None:
    """A bulk insert from Arrow (no Spark in the writer) killed at each point: the table reads as before (or as
    after, past the publish), the metadata table agrees with storage, the next write recovers."""
    t = Table.create(table_path, TableConfig(name="c", record_key=["id"], ordering_field="ts",
                                             partition_fields=["part"], table_type=table_type, table_version=8,
                                             metadata_partitions=("files",)), spark=spark)
    t.upsert(spark.createDataFrame([(i, f"p{i % 3}", i, f"v{i}") for i in range(10)], DDL))
    before = spark_rows(t.read())
    proc = run_writer(table_path, point, 20, "arrow")
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert t.read().count() == (20 if point == "after_complete" else 10)
    if point != "after_complete":
        assert spark_rows(t.read()) == before
    assert spark_rows(t.read()) == hudi_snapshot(t.uri)
    r = t.upsert(spark.createDataFrame([(100, "p1", 5, "after")], DDL))
    assert r.inserted == 1
    assert all(i.state == "completed" for i in t.timeline())
    assert_no_orphans(t)
    assert metadata_table.verify(t.uri) == []
    assert spark_rows(t.read()) == hudi_snapshot(t.uri)


@pytest.mark.parametrize(("point", "table_type"), [("inflight", "COPY_ON_WRITE"), ("data_written", "MERGE_ON_READ"),
                                                   ("metadata_committed", "MERGE_ON_READ"),
                                                   ("after_complete", "COPY_ON_WRITE")])
def test_sigkill_of_an_arrow_upsert_leaves_the_table_and_its_record_index_consistent(
        point: str, table_type: str, table_path: str, spark) -> None:
    """An upsert from Arrow (no Spark in the writer) into a record-index table killed at each point: the table reads
    as before (or as after, past the publish), the metadata table agrees with storage, and the next upsert finds
    in the index exactly the keys of completed writes (a new key of the killed write is new again)."""
    t = Table.create(table_path, TableConfig(name="c", record_key=["id"], ordering_field="ts",
                                             partition_fields=["part"], table_type=table_type, table_version=8,
                                             index_type="RECORD_INDEX"), spark=spark)
    t.upsert(spark.createDataFrame([(i, f"p{i % 3}", i, f"v{i}") for i in range(10)], DDL))
    before = spark_rows(t.read())
    proc = run_writer(table_path, point, 8, "arrow_upsert")  # keys 3-12: 7 updates, 3 new keys
    assert proc.returncode == -9, proc.stderr[-2000:]
    done = point == "after_complete"
    assert t.read().count() == (13 if done else 10)
    if not done:
        assert spark_rows(t.read()) == before
    assert spark_rows(t.read()) == hudi_snapshot(t.uri)
    r = t.upsert(spark.createDataFrame([(11, "p2", 5000, "after"), (100, "p1", 5, "after")], DDL))
    assert (r.updated, r.inserted) == ((1, 1) if done else (0, 2))
    assert all(i.state == "completed" for i in t.timeline())
    assert_no_orphans(t)
    assert metadata_table.verify(t.uri) == []
    assert spark_rows(t.read()) == hudi_snapshot(t.uri)


def kill_and_recover(table_path: str, point: str, table_type: str, spark) -> None:
    """Kill a writer of ``table_path`` at ``point``; the table reads as before (or as after, for a kill after the
    publish), through hudi-rs too, and the next write rolls the dead one back and leaves no orphan file (the table
    writes CDC log files: a copy-on-write merge leaves one per file group)."""
    t = Table.create(table_path, TableConfig(name="c", record_key=["id"], ordering_field="ts",
                                             partition_fields=["part"], table_type=table_type, cdc_enabled=True),
                     spark=spark)
    t.upsert(spark.createDataFrame([(i, f"p{i % 3}", i, f"v{i}") for i in range(10)], DDL))
    before = spark_rows(t.read())
    completed_before = [i.instant for i in t.timeline() if i.state == "completed"]

    proc = run_writer(table_path, point, 8)
    assert proc.returncode == -9, proc.stderr[-2000:]

    if point == "after_complete":
        # the kill came after the atomic publish: the commit is visible, in full
        assert len(hudi_completed(t.uri)) == 2
        assert spark_rows(t.read()) == hudi_snapshot(t.uri)
        assert t.read().count() == 13
    else:
        assert hudi_completed(t.uri) == completed_before
        assert spark_rows(t.read()) == before == hudi_snapshot(t.uri)
        pending = [i for i in t.timeline() if i.state != "completed"]
        assert len(pending) == 1

    # the next write succeeds and cleans up after the dead writer
    r = t.upsert(spark.createDataFrame([(100, "p1", 5, "after")], DDL))
    assert r.inserted == 1
    assert all(i.state == "completed" for i in t.timeline())
    assert_no_orphans(t)
    assert spark_rows(t.read()) == hudi_snapshot(t.uri)
    # the change feed replays to the table: the killed write left no change behind
    replayed: dict[str, str] = {}
    for c in t.read_cdc().collect():
        if c["op"] == "d":
            del replayed[c["record_key"]]
        else:
            replayed[c["record_key"]] = c["after"]["val"]
    assert replayed == {str(r["id"]): r["val"] for r in t.read().collect()}


@pytest.mark.parametrize(("point", "table_type"), [("metadata_committed", "COPY_ON_WRITE"),
                                                   ("metadata_committed", "MERGE_ON_READ")])
def test_sigkill_of_a_writer_keeps_the_metadata_table_and_the_table_consistent(point: str, table_type: str,
                                                                              table_path: str, spark) -> None:
    """Version 8 with the metadata table's files partition (docs/metadata-table.md): a writer killed after the
    metadata table's delta commit and before its own completed file leaves a delta commit no reader applies; the
    next writer rolls the instant back and removes it."""
    t = Table.create(table_path, TableConfig(name="c", record_key=["id"], ordering_field="ts",
                                             partition_fields=["part"], table_type=table_type, table_version=8,
                                             metadata_partitions=("files",)), spark=spark)
    t.upsert(spark.createDataFrame([(i, f"p{i % 3}", i, f"v{i}") for i in range(10)], DDL))
    before = spark_rows(t.read())
    proc = run_writer(table_path, point, 8)
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert metadata_table.verify(table_path) == []
    assert spark_rows(t.read()) == hudi_snapshot(t.uri)
    if point == "after_complete":  # killed after the publish: the commit is visible, in full
        assert t.read().count() == 13
    else:
        assert spark_rows(t.read()) == before
    killed = [i.instant for i in t.timeline() if i.state != "completed"]
    mdt_timeline = Path(table_path, ".hoodie", "metadata", ".hoodie", "timeline")
    assert len(killed) == 1 and any(p.name.startswith(f"{killed[0]}_") for p in mdt_timeline.iterdir()), \
        "the writer did not die between the two completions"
    r = t.upsert(spark.createDataFrame([(100, "p1", 5, "after")], DDL))
    assert r.inserted == 1 and all(i.state == "completed" for i in t.timeline())
    assert metadata_table.verify(table_path) == [] and spark_rows(t.read()) == hudi_snapshot(t.uri)
    listed = {p.name for p in mdt_timeline.iterdir()}
    assert not [n for n in listed for k in killed if n.startswith(k)], "the killed instant's delta commit is left"


SERVICE_KILLS = [("compact", p) for p in POINTS] + [("cluster", p)
                                                     for p in ("inflight", "data_written", "after_complete")]


@pytest.mark.parametrize(("service", "point"), SERVICE_KILLS)
def test_sigkill_during_table_service_leaves_last_completed_state(service: str, point: str, table_path: str,
                                                                  spark) -> None:
    # small_file_limit=0: the two inserts make two small file groups per partition, for clustering
    t = Table.create(table_path, TableConfig(name="c", record_key=["id"], ordering_field="ts", small_file_limit=0,
                                             partition_fields=["part"], table_type="MERGE_ON_READ"), spark=spark)
    t.insert(spark.createDataFrame([(i, f"p{i % 3}", i, f"v{i}") for i in range(6)], DDL))
    t.insert(spark.createDataFrame([(i, f"p{i % 3}", i, f"v{i}") for i in range(6, 10)], DDL))
    t.upsert(spark.createDataFrame([(i, f"p{i % 3}", 50 + i, f"w{i}") for i in range(0, 10, 2)], DDL))
    t.delete(spark.createDataFrame([(1, "p1")], "id int, part string"))
    before = spark_rows(t.read())
    assert before == hudi_snapshot(t.uri)

    proc = run_writer(table_path, point, 0, service)
    assert proc.returncode == -9, proc.stderr[-2000:]
    # a table service never changes the snapshot, whether or not it completed
    assert spark_rows(t.read()) == before == hudi_snapshot(t.uri)
    operation = "COMPACT" if service == "compact" else "CLUSTER"
    done = any(i.operation == operation and i.state == "completed" for i in t.timeline())
    assert done == (point == "after_complete")

    # the next write rolls a dead service back, and the next compaction succeeds
    t.upsert(spark.createDataFrame([(0, "p0", 99, "after"), (100, "p1", 5, "new")], DDL))
    assert all(i.state == "completed" for i in t.timeline())
    assert_no_orphans(t)
    latest = spark_rows(t.read())
    assert {r["id"]: r["val"] for r in latest} == {**{r["id"]: r["val"] for r in before}, 0: "after", 100: "new"}
    r = t.compact()
    assert r is not None and r.files_written >= 1
    assert spark_rows(t.read()) == latest == hudi_snapshot(t.uri)


@pytest.mark.parametrize(("point", "table_type"), [("data_written", "COPY_ON_WRITE"),
                                                   ("metadata_committed", "MERGE_ON_READ")])
def test_sigkill_of_a_writer_keeps_the_record_index_consistent(point: str, table_type: str, table_path: str,
                                                                spark, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record index (docs/metadata-table.md): a writer killed after writing the index's log files of its
    instant (data_written), or after the metadata table's delta commit that merged them into new base files
    (metadata_committed), leaves index files no lookup applies; the next writer removes them, finds every key (no
    duplicate) and the index agrees with the rows."""
    from tablecore.services.record_index_build import verify_record_index

    t = Table.create(table_path, TableConfig(name="c", record_key=["id"], ordering_field="ts",
                                             partition_fields=["part"], table_type=table_type, table_version=8,
                                             index_type="RECORD_INDEX", record_index_file_groups=2), spark=spark)
    t.upsert(spark.createDataFrame([(i, f"p{i % 3}", i, f"v{i}") for i in range(10)], DDL))
    before = spark_rows(t.read())
    index_dir = Path(table_path, ".hoodie", "metadata", "record_index")
    monkeypatch.setenv("LAKEGATE_RECORD_INDEX_MAX_LOGS", "1")  # the killed write merges its groups into base files
    proc = run_writer(table_path, point, 8)
    assert proc.returncode == -9, proc.stderr[-2000:]
    killed = [i.instant for i in t.timeline() if i.state != "completed"]
    assert len(killed) == 1
    theirs = [p.name for p in index_dir.iterdir() if killed[0] in p.name]
    assert theirs, "the writer died before writing the record index's files"
    if point == "metadata_committed":
        assert any(n.endswith(".hfile") for n in theirs), theirs
    assert spark_rows(t.read()) == before == hudi_snapshot(t.uri)
    assert verify_record_index(table_path) == [] and metadata_table.verify(table_path) == []
    r = t.upsert(spark.createDataFrame([(i, f"p{i % 3}", 50 + i, f"after{i}") for i in (3, 12, 100)], DDL))
    assert (r.inserted, r.updated) == (2, 1)  # key 3 is found through the index; 12 and 100 are new
    assert not [p.name for p in index_dir.iterdir() if killed[0] in p.name], "the killed instant's index files"
    assert verify_record_index(table_path) == [] and metadata_table.verify(table_path) == []
    assert spark_rows(t.read()) == hudi_snapshot(t.uri) and t.read().count() == 12
