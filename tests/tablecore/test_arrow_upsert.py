"""Upserts of Arrow tables without Spark (tablecore.arrow_upsert): the same rows and counts as the same batch
upserted through Spark into a twin table, read alike by hudi-rs, Spark and our reader; refused with a
clear error, nothing written, where they cannot run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tablecore import InvalidInputError, Table, TableConfig, read_arrow
from tablecore.engine import MetadataOnlyEngine
from tablecore.metadata_table import verify as verify_metadata
from tests.tablecore.oracle import hudi_snapshot, rows, spark_rows

pytestmark = [pytest.mark.spark]

SCHEMA = "id int, part string, ts long, val string"
DATA = ["id", "part", "ts", "val"]


def batch(ids: list[int], *, ts: int, val: str = "v", part: dict[int, str] | None = None) -> pa.Table:
    part = part or {}
    return pa.table({"id": pa.array(ids, pa.int32()), "part": [part.get(i, f"p{i % 3}") for i in ids],
                     "ts": pa.array([ts] * len(ids), pa.int64()), "val": [f"{val}{i}" for i in ids]})


def config(table_type: str, version: int, index: str, **kw: Any) -> TableConfig:
    # a small target file size: several file groups a partition, and small files that take inserts
    return TableConfig(name="trips", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                       table_type=table_type, table_version=version, index_type=index,
                       target_file_size=40 * 1024, small_file_limit=20 * 1024, **kw)


def data_rows(uri: str) -> list[dict[str, Any]]:
    return sorted(read_arrow(uri, columns=DATA).to_pylist(), key=lambda r: (r["id"], r["val"], r["ts"], r["part"]))


def where(uri: str, *ids: int) -> list[str]:
    """The partition paths of the records of ``ids``."""
    found = {r["id"]: r["_hoodie_partition_path"] for r in read_arrow(uri, columns=["id", "_hoodie_partition_path"])
             .to_pylist()}
    return [found[i] for i in ids]


def twins(spark: Any, tmp_path: Path, cfg: TableConfig) -> tuple[Table, Table]:
    """Two tables of ``cfg`` loaded alike: one takes Arrow upserts, the other the same batches from Spark."""
    out = []
    for name in ("arrow", "spark"):
        t = Table.create(str(tmp_path / name), cfg, spark=spark)
        t.bulk_insert(batch(list(range(400)), ts=1))
        out.append(t)
    return out[0], out[1]


def upsert_both(spark: Any, a: Table, s: Table, data: pa.Table) -> None:
    ra = a.upsert(data)
    rs = s.upsert(spark.createDataFrame(data.to_pylist(), SCHEMA))
    assert (ra.operation, ra.input_rows) == ("UPSERT", data.num_rows)
    assert (ra.updated, ra.inserted, ra.deleted) == (rs.updated, rs.inserted, rs.deleted)
    # the files written may differ: the Arrow plan counts the inserts exactly, Spark's may bound them by the batch's
    # rows (spark/writer.py: _plan_untagged), so the two can pack new file groups differently
    assert data_rows(a.path) == data_rows(s.path)


# each engine path once: the simple index of both table types (merge-on-read also in the event-time test below),
# the bloom lookup, the record index (its lookup and entries are the same code on both table types)
@pytest.mark.parametrize(("table_type", "version", "index"), [
    ("COPY_ON_WRITE", 6, "SIMPLE"), ("MERGE_ON_READ", 8, "SIMPLE"), ("MERGE_ON_READ", 6, "BLOOM"),
    ("MERGE_ON_READ", 8, "RECORD_INDEX")])
def test_an_arrow_upsert_writes_what_the_same_spark_upsert_writes(spark: Any, tmp_path: Path, table_type: str,
                                                                  version: int, index: str) -> None:
    a, s = twins(spark, tmp_path, config(table_type, version, index))
    # updates in every partition, new keys, and keys given twice in the batch: the higher ordering value wins
    first = pa.concat_tables([batch([*range(0, 400, 9), *range(400, 430)], ts=5, val="a"),
                              batch([18, 401], ts=7, val="b"), batch([27], ts=0, val="old")])
    upsert_both(spark, a, s, first)
    got = {r["id"]: r for r in data_rows(a.path)}
    assert (got[18]["val"], got[401]["val"], got[27]["val"], got[9]["val"]) == ("b18", "b401", "a27", "a9")
    assert len(got) == 430
    # a second batch over the first: logs on logs (merge-on-read), the files the first batch wrote (copy-on-write)
    upsert_both(spark, a, s, batch([*range(3, 430, 11), *range(430, 440)], ts=9, val="c"))
    assert rows(read_arrow(a.path)) == hudi_snapshot(a.path) == spark_rows(a.read())
    if a.config.metadata_partitions:  # the record index's tables keep a metadata table
        assert verify_metadata(a.path) == []


def test_a_key_an_insert_wrote_twice_is_updated_in_both_file_groups(spark: Any, tmp_path: Path) -> None:
    """An insert never looks at what the table holds: a key it writes again is in two file groups. The simple
    lookup finds both, and an upsert updates both, from Arrow as from Spark (and as Apache Hudi's join does; the
    lookup is the same code on both table types)."""
    a, s = twins(spark, tmp_path, config("MERGE_ON_READ", 8, "SIMPLE").model_copy(update={"small_file_limit": 0}))
    for t in (a, s):  # no small file takes the inserts: a new file group
        t.insert(spark.createDataFrame(batch([5, 7], ts=2, val="dup").to_pylist(), SCHEMA))
    assert [r["id"] for r in data_rows(a.path)].count(5) == 2
    upsert_both(spark, a, s, batch([5, 6], ts=3, val="new"))
    assert [(r["id"], r["val"]) for r in data_rows(a.path) if r["id"] in (5, 6, 7)] == [
        (5, "new5"), (5, "new5"), (6, "new6"), (7, "dup7"), (7, "v7")]
    assert rows(read_arrow(a.path)) == hudi_snapshot(a.path) == spark_rows(a.read())


def test_the_record_index_keeps_an_update_in_its_records_partition(spark: Any, tmp_path: Path) -> None:
    """A global index: a key upserted with another partition value is updated where it is, as a Spark upsert does;
    the new keys of the batch get index entries (a later upsert finds them)."""
    a, s = twins(spark, tmp_path, config("MERGE_ON_READ", 8, "RECORD_INDEX"))
    upsert_both(spark, a, s, batch([4, 5, 500], ts=3, val="m", part={4: "p0", 5: "elsewhere", 500: "p2"}))
    assert where(a.path, 4, 5, 500) == ["part=p1", "part=p2", "part=p2"]  # the data column says p0, elsewhere, p2
    r = a.upsert(batch([500], ts=4, val="again", part={500: "p0"}))
    assert (r.updated, r.inserted) == (1, 0)
    assert where(a.path, 500) == ["part=p2"]
    assert rows(read_arrow(a.path)) == hudi_snapshot(a.path)


def test_event_time_ordering_keeps_the_stored_record_over_a_stale_update(spark: Any, tmp_path: Path) -> None:
    a, s = twins(spark, tmp_path, config("MERGE_ON_READ", 6, "SIMPLE", merge_mode="EVENT_TIME_ORDERING"))
    upsert_both(spark, a, s, batch([1, 2, 3], ts=5, val="new"))
    upsert_both(spark, a, s, pa.concat_tables([batch([1], ts=2, val="stale"), batch([2], ts=6, val="newer")]))
    got = {r["id"]: r["val"] for r in data_rows(a.path)}
    assert (got[1], got[2], got[3]) == ("new1", "newer2", "new3")
    assert rows(read_arrow(a.path)) == hudi_snapshot(a.path) == spark_rows(a.read())


def test_bad_input_is_refused_and_nothing_is_written(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, config("MERGE_ON_READ", 8, "SIMPLE"), spark=spark)
    t.bulk_insert(batch(list(range(30)), ts=1))
    before = sorted(p.relative_to(uri) for p in Path(uri).rglob("*") if p.is_file())
    null_key = batch([1, 2, 3], ts=2).set_column(0, "id", pa.array([1, None, 3], pa.int32()))
    with pytest.raises(InvalidInputError, match="1 input rows have a null or empty record key"):
        t.upsert(null_key)
    with pytest.raises(InvalidInputError, match="no ordering column 'ts'"):
        t.upsert(batch([1], ts=2).drop_columns(["ts"]))
    with pytest.raises(InvalidInputError, match="an Arrow upsert takes no row observer"):
        t.upsert(batch([1], ts=2), observer=lambda df, cols: df)
    with pytest.raises(InvalidInputError, match="holds that one write, not 2"):
        t.transaction().upsert(batch([1], ts=2)).upsert(batch([2], ts=2)).commit()
    with pytest.raises(InvalidInputError, match="written by bulk_insert or upsert; use a Spark DataFrame for insert"):
        t.insert(batch([1], ts=2))
    assert sorted(p.relative_to(uri) for p in Path(uri).rglob("*") if p.is_file()) == before
    bucket = Table.create(str(tmp_path / "b"), TableConfig(name="b", record_key=["id"], ordering_field="ts",
                                                          index_type="BUCKET", bucket_count=2), spark=spark)
    with pytest.raises(InvalidInputError, match="an Arrow upsert does not write bucket-index tables"):
        bucket.upsert(batch([1], ts=1))
    assert bucket.latest_instant() is None


def test_without_spark_and_on_s3(s3: Any) -> None:
    """On the S3 test server, with no compute engine: Arrow loads and upserts, read by hudi-rs as by our reader."""
    uri = s3.table_uri("arrow-upsert")
    t = Table.create(uri, config("MERGE_ON_READ", 8, "RECORD_INDEX"),
                     engine=MetadataOnlyEngine())
    t.bulk_insert(batch(list(range(90)), ts=1))
    r = t.upsert(batch([*range(0, 90, 4), 90, 91], ts=2, val="u"))
    assert (r.updated, r.inserted) == (23, 2)
    assert {x["id"]: x["val"] for x in read_arrow(uri, columns=DATA).to_pylist()}[8] == "u8"
    assert rows(read_arrow(uri)) == hudi_snapshot(uri)
    assert verify_metadata(uri, storage_options=None) == []


@pytest.mark.parametrize("version", [6, 8])
def test_logs_encoded_together_are_the_bytes_of_logs_encoded_one_group_at_a_time(version: int) -> None:
    """``append_logs`` (one columnar encoding, cut per group) writes the files ``append_log`` writes group by group;
    it declines a batch with a key given twice in a group, or with a delete."""
    from tablecore.io.memory import InMemoryFileIO
    from tablecore.tasks import log_write
    from tablecore.tasks import write as ex
    from tablecore.write_planning import target_schema, write_job

    data = batch(list(range(40)), ts=3)
    avro, target = target_schema(data.schema, None, "trips")
    plans = {f"fid-{g}": ex.GroupPlan(f"part=p{g}", f"/t/part=p{g}/fid-{g}_0-0-0_001.parquet", "001", log_version=g + 1)
             for g in range(3)}
    rows = data.append_column(ex.KEY, data.column("id").cast(pa.string())).append_column(ex.ORD, data.column("ts"))
    groups = [("fid-0", 0, 10), ("fid-1", 10, 25), ("fid-2", 35, 5)]
    tokens, tasks = ["1-0-0", "2-0-0", "4-0-0"], [1, 2, 4]

    def files(io: InMemoryFileIO) -> dict[str, bytes]:
        return {f.path.rsplit("/", 1)[-1]: io.read_bytes(f.path) for f in io.list("/", recursive=True)
                if ".log." in f.name}

    cfg = config("MERGE_ON_READ", version, "SIMPLE")
    one, many = InMemoryFileIO(f"memory://one{version}/t"), InMemoryFileIO(f"memory://many{version}/t")
    for io in (one, many):
        job = write_job(io, cfg, "002", avro, target, plans, sort_inserts=False)
        if io is many:
            stats = log_write.append_logs(rows, groups, job, tokens, tasks)
            assert stats is not None and [s["num_update_writes"] for s in stats] == [10, 25, 5]
            continue
        for (fid, offset, n), token, task in zip(groups, tokens, tasks, strict=True):
            g = rows.slice(offset, n)
            g = g.append_column(ex.PART, ex.constant(plans[fid].partition, n)) \
                .append_column(ex.OP, ex.constant("U", n)).append_column(ex.FID, ex.constant(fid, n))
            log_write.append_log(g, job, token, task)
    assert len(files(one)) == 3 and files(one) == files(many)
    twice = rows.set_column(0, "id", pa.array([1, 1, *range(2, 40)], pa.int32()))
    twice = twice.set_column(twice.schema.get_field_index(ex.KEY), ex.KEY, twice.column("id").cast(pa.string()))
    assert log_write.append_logs(twice, groups, job, tokens, tasks) is None
    deleted = rows.append_column(ex.IS_DELETED, pa.array([False] * 39 + [True]))
    assert log_write.append_logs(deleted, groups, job, tokens, tasks) is None
