"""governance.sources: files (JSON, Parquet, Avro, Confluent wire format) and incremental table sources."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel, ValidationError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from governance.errors import SourceError
from governance.sources import (
    Batch,
    FilesSource,
    FilesSourceConfig,
    Source,
    SourceConfig,
    TableSource,
    TableSourceConfig,
)
from schema_registry import RegistryClient
from tablecore import Table, TableConfig
from tests.governance.conftest import TRIP_COLUMNS, TRIPS_SCHEMA, trip, trips
from tests.governance.wire import frame, message, write_confluent_file

FIELDS = ["uuid", "driver", "dt", "ts", "rider_age", "fare", "tip", "currency"]


def record(i: int, **overrides: Any) -> dict[str, Any]:
    """The trips row :func:`trip` builds, as a dict."""
    return {**dict(zip(FIELDS, trip(i), strict=True)), **overrides}


def rows(df: DataFrame, *columns: str) -> list[tuple[Any, ...]]:
    """``columns`` of every row of ``df``, sorted."""
    return sorted(tuple(r) for r in df.select(*columns).collect())


def write_json(folder: Path, name: str, records: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def trips_schema(spark: SparkSession) -> StructType:
    return spark.createDataFrame([], TRIP_COLUMNS).schema


# ---------------------------------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------------------------------


class Holder(BaseModel):
    source: SourceConfig


def test_config_is_discriminated_by_kind(tmp_path: Path) -> None:
    files = Holder.model_validate({"source": {"kind": "files", "path": "landing", "format": "json"}}).source
    assert isinstance(files, FilesSourceConfig)
    assert (files.pattern, files.max_files_per_batch, files.subject) == ("*", 1, None)
    table = Holder.model_validate({"source": {"kind": "table", "path": "/t", "max_commits_per_batch": 3}}).source
    assert isinstance(table, TableSourceConfig) and table.max_commits_per_batch == 3

    built = files.build(None, tmp_path)
    assert isinstance(built, FilesSource) and isinstance(built, Source)
    assert built.path == str(tmp_path / "landing")  # relative paths resolve against base_dir
    assert FilesSourceConfig(path="s3://b/landing", format="json").build(None, tmp_path).path == "s3://b/landing"
    assert isinstance(table.build(None, tmp_path), TableSource)
    assert table.build(None, tmp_path).path == "/t"


@pytest.mark.parametrize("data, fragment", [
    ({"kind": "files", "path": "x", "format": "confluent_avro"}, "requires a subject"),
    ({"kind": "files", "path": "x", "format": "json", "subject": "s"}, "only used by the avro"),
    ({"kind": "files", "path": "x", "format": "csv"}, "format"),
    ({"kind": "files", "path": "x", "format": "json", "max_files_per_batch": 0}, "max_files_per_batch"),
    ({"kind": "files", "path": "x", "format": "json", "bogus": 1}, "bogus"),
    ({"kind": "table", "path": "x", "max_commits_per_batch": 0}, "max_commits_per_batch"),
    ({"kind": "kafka", "path": "x"}, "kind"),
])
def test_config_errors(data: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        Holder.model_validate({"source": data})


def test_config_is_frozen() -> None:
    cfg = FilesSourceConfig(path="x", format="json")
    with pytest.raises(ValidationError):
        cfg.path = "y"  # type: ignore[misc]


def test_confluent_source_needs_a_registry(tmp_path: Path) -> None:
    cfg = FilesSourceConfig(path="x", format="confluent_avro", subject="trips-value")
    with pytest.raises(SourceError, match="needs a schema registry"):
        cfg.build(None, tmp_path)


def test_missing_folder_and_foreign_positions(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such folder"):
        FilesSource(str(tmp_path / "nope"), "json").next_batch(spark, None)
    (tmp_path / "in").mkdir()
    with pytest.raises(SourceError, match="not a files source position"):
        FilesSource(str(tmp_path / "in"), "json").next_batch(spark, {"instant": "20260101000000000"})
    with pytest.raises(SourceError, match="not a table source position"):
        TableSource(str(tmp_path / "t")).next_batch(spark, {"last_file": "a.json"})


# ---------------------------------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------------------------------


def test_json_batches_by_name_order_with_pattern_and_resume(spark: SparkSession, tmp_path: Path,
                                                            trips_schema: StructType) -> None:
    folder = tmp_path / "landing"
    # written out of order: name order is arrival order
    write_json(folder, "batch-0003.json", [record(5)])
    write_json(folder, "batch-0001.json", [record(1), record(2)])
    write_json(folder, "batch-0002.json", [record(3, rider_age=None), record(4)])
    write_json(folder, ".batch-0000.json", [record(90)])  # hidden
    write_json(folder, "_batch-0000.json", [record(91)])  # underscore
    write_json(folder, "batch-0004.json.tmp", [record(92)])  # still being written: not matched
    write_json(folder, "notes.txt", [record(93)])
    source = FilesSourceConfig(path="landing", format="json", pattern="batch-*.json",
                               max_files_per_batch=2).build(None, tmp_path)
    assert [f.name for f in source.pending(None)] == ["batch-0001.json", "batch-0002.json", "batch-0003.json"]

    first = source.next_batch(spark, None, schema=trips_schema)
    assert isinstance(first, Batch)
    assert first.position == {"last_file": "batch-0002.json"}
    assert first.description == "files batch-0001.json..batch-0002.json (2 files)"
    assert first.end_instant is None
    assert first.df.schema == trips_schema
    assert rows(first.df, "uuid", "rider_age", "ts") == [("trip-00001", 30, 1001), ("trip-00002", 30, 1002),
                                                          ("trip-00003", None, 1003), ("trip-00004", 30, 1004)]
    json.dumps(first.position)  # JSON-able

    second = source.next_batch(spark, first.position, schema=trips_schema)
    assert second is not None and second.position == {"last_file": "batch-0003.json"}
    assert second.description == "files batch-0003.json (1 file)"
    assert rows(second.df, "uuid", "fare") == [("trip-00005", 12.5)]
    assert source.next_batch(spark, second.position, schema=trips_schema) is None

    # a new file arrives: resuming from the committed position reads only it (schema inferred without `schema`)
    write_json(folder, "batch-0005.json", [record(6, driver="late")])
    third = source.next_batch(spark, json.loads(json.dumps(second.position)))
    assert third is not None and third.position == {"last_file": "batch-0005.json"}
    assert rows(third.df, "uuid", "driver", "ts") == [("trip-00006", "late", 1006)]


def test_empty_folder_has_nothing(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    assert FilesSource(str(tmp_path / "in"), "parquet").next_batch(spark, None) is None


def test_parquet_files(spark: SparkSession, tmp_path: Path) -> None:
    folder = tmp_path / "pq"
    folder.mkdir()
    for n, ids in ((1, [1, 2]), (2, [3]), (3, [4, 5])):
        table = pa.Table.from_pylist([record(i, fare=float(i)) for i in ids])
        pq.write_table(table, folder / f"part-{n:03d}.parquet")
    source = FilesSource(str(folder), "parquet", pattern="*.parquet", max_files_per_batch=2)
    first = source.next_batch(spark, None)
    assert first is not None and first.position == {"last_file": "part-002.parquet"}
    assert rows(first.df, "uuid", "fare") == [("trip-00001", 1.0), ("trip-00002", 2.0), ("trip-00003", 3.0)]
    second = source.next_batch(spark, first.position)
    assert second is not None and rows(second.df, "uuid") == [("trip-00004",), ("trip-00005",)]
    assert source.next_batch(spark, second.position) is None


def write_avro(path: Path, schema: dict[str, Any], records: list[dict[str, Any]]) -> None:
    with path.open("wb") as f:
        fastavro.writer(f, fastavro.parse_schema(schema), records)


def trips_v2() -> dict[str, Any]:
    """Trips with ``tip`` removed and ``city`` added (with a default): a BACKWARD-compatible evolution."""
    schema = copy.deepcopy(TRIPS_SCHEMA)
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "tip"]
    schema["fields"].append({"name": "city", "type": "string", "default": "unknown"})
    return schema


def test_avro_container_files_read_with_the_newest_writer_schema(spark: SparkSession, tmp_path: Path) -> None:
    folder = tmp_path / "avro"
    folder.mkdir()
    write_avro(folder / "a-001.avro", TRIPS_SCHEMA, [record(1), record(2, rider_age=None)])
    v2 = [{k: v for k, v in record(i).items() if k != "tip"} | {"city": "Lyon"} for i in (3, 4)]
    write_avro(folder / "a-002.avro", trips_v2(), v2)
    source = FilesSource(str(folder), "avro", max_files_per_batch=5)
    batch = source.next_batch(spark, None)
    assert batch is not None and batch.position == {"last_file": "a-002.avro"}
    assert "tip" not in batch.df.columns
    assert rows(batch.df, "uuid", "rider_age", "city") == [
        ("trip-00001", 30, "unknown"), ("trip-00002", None, "unknown"), ("trip-00003", 30, "Lyon"),
        ("trip-00004", 30, "Lyon")]
    assert source.next_batch(spark, batch.position) is None


def test_avro_reader_schema_from_a_subject(spark: SparkSession, tmp_path: Path, registry: RegistryClient) -> None:
    folder = tmp_path / "avro"
    folder.mkdir()
    write_avro(folder / "a-001.avro", TRIPS_SCHEMA, [record(1)])
    registry.register("trips-value", json.dumps(trips_v2()))
    source = FilesSourceConfig(path=str(folder), format="avro", subject="trips-value").build(registry, None)
    batch = source.next_batch(spark, None)
    assert batch is not None
    assert batch.df.columns == [f["name"] for f in trips_v2()["fields"]]
    assert rows(batch.df, "uuid", "fare", "city") == [("trip-00001", 12.5, "unknown")]


def test_not_an_avro_file(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "x.avro").write_bytes(b"not avro at all")
    with pytest.raises(SourceError, match=r"x\.avro is not an Avro container file"):
        FilesSource(str(tmp_path), "avro").next_batch(spark, None)


# ---------------------------------------------------------------------------------------------------------------------
# Confluent wire format
# ---------------------------------------------------------------------------------------------------------------------


def test_confluent_messages_of_two_schema_versions(spark: SparkSession, tmp_path: Path,
                                                   registry: RegistryClient) -> None:
    v1_id = registry.latest("trips-value").id
    v2_id = registry.register("trips-value", json.dumps(trips_v2())).id
    assert v1_id != v2_id
    folder = tmp_path / "kafka"
    folder.mkdir()
    v2 = trips_v2()
    write_confluent_file(folder / "trips-00001.bin", [
        message(v1_id, TRIPS_SCHEMA, record(1, tip=2.0)),
        message(v2_id, v2, {k: v for k, v in record(2).items() if k != "tip"} | {"city": "Oslo"}),
        message(v1_id, TRIPS_SCHEMA, record(3, rider_age=None)),
    ])
    write_confluent_file(folder / "trips-00002.bin", [
        message(v2_id, v2, {k: v for k, v in record(4).items() if k != "tip"} | {"city": "Lima"})])
    write_confluent_file(folder / "trips-00003.bin", [])  # an empty file is a batch of no rows

    cfg = FilesSourceConfig(path="kafka", format="confluent_avro", subject="trips-value", pattern="trips-*.bin",
                            max_files_per_batch=2)
    source = cfg.build(registry, tmp_path)
    batch = source.next_batch(spark, None)
    assert batch is not None
    assert batch.position == {"last_file": "trips-00002.bin"}
    assert batch.description == "files trips-00001.bin..trips-00002.bin (2 files, 4 messages)"
    # read with the latest version: tip (removed) is gone, city (added with a default) is there
    assert batch.df.columns == [f["name"] for f in v2["fields"]]
    assert rows(batch.df, "uuid", "rider_age", "fare", "city") == [
        ("trip-00001", 30, 12.5, "unknown"), ("trip-00002", 30, 12.5, "Oslo"), ("trip-00003", None, 12.5, "unknown"),
        ("trip-00004", 30, 12.5, "Lima")]

    empty = source.next_batch(spark, batch.position)
    assert empty is not None and empty.position == {"last_file": "trips-00003.bin"}
    assert empty.df.count() == 0 and "(1 file, 0 messages)" in empty.description
    assert source.next_batch(spark, empty.position) is None


@pytest.mark.parametrize("case", ["bad_magic", "unknown_id", "truncated_frame", "truncated_length", "short"])
def test_confluent_errors_name_file_and_offset(case: str, spark: SparkSession, tmp_path: Path,
                                               registry: RegistryClient) -> None:
    v1_id = registry.latest("trips-value").id
    good = message(v1_id, TRIPS_SCHEMA, record(1))
    second = {
        "bad_magic": frame(message(v1_id, TRIPS_SCHEMA, record(2), magic=1)),
        "unknown_id": frame(message(987_654, TRIPS_SCHEMA, record(2))),
        "truncated_frame": frame(message(v1_id, TRIPS_SCHEMA, record(2)))[:-3],
        "truncated_length": b"\x00\x00",
        "short": frame(b"\x00\x00\x01"),
    }[case]
    folder = tmp_path / "kafka"
    folder.mkdir()
    write_confluent_file(folder / "ok-1.bin", [good])
    (folder / "ok-2.bin").write_bytes(frame(good) + second)
    offset = len(frame(good))
    expected = {
        "bad_magic": "wrong magic byte 1",
        "unknown_id": "unknown schema id 987654",
        "truncated_frame": "truncated frame",
        "truncated_length": "truncated frame: 2 bytes left",
        "short": "message of 3 bytes is shorter than the 5-byte wire-format header",
    }[case]
    source = FilesSource(str(folder), "confluent_avro", max_files_per_batch=2, subject="trips-value",
                         registry=registry)
    with pytest.raises(SourceError, match=f"ok-2.bin at byte offset {offset}: {expected}"):
        source.next_batch(spark, None)


# ---------------------------------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------------------------------


@pytest.fixture
def source_table(spark: SparkSession, tmp_path: Path) -> tuple[Table, list[str]]:
    """A copy-on-write trips table with three commits: inserts 1-3, an update of 2 and insert of 4, insert of 5."""
    t = Table.create(str(tmp_path / "src"), TableConfig(name="trips_src", record_key=["uuid"], ordering_field="ts",
                                                         partition_fields=["dt"]), spark=spark)
    instants = [
        t.upsert(trips(spark, [trip(1), trip(2), trip(3)])).instant,
        t.upsert(trips(spark, [trip(2, ts=2_000, fare=40.0), trip(4)])).instant,
        t.upsert(trips(spark, [trip(5)])).instant,
    ]
    return t, instants


def test_table_source_in_steps(spark: SparkSession, source_table: tuple[Table, list[str]]) -> None:
    table, (c1, c2, c3) = source_table
    source = TableSourceConfig(path=table.uri, max_commits_per_batch=2).build(None, None)
    first = source.next_batch(spark, None)
    assert first is not None
    assert first.position == {"instant": c2} and first.end_instant == c2
    assert not [c for c in first.df.columns if c.startswith("_hoodie_")]
    assert sorted(first.df.columns) == sorted(FIELDS)
    # the latest in-range state of every changed key
    assert rows(first.df, "uuid", "ts", "fare") == [("trip-00001", 1001, 12.5), ("trip-00002", 2000, 40.0),
                                                   ("trip-00003", 1003, 12.5), ("trip-00004", 1004, 12.5)]
    assert "2 commits of 3 new" in first.description

    second = source.next_batch(spark, json.loads(json.dumps(first.position)))
    assert second is not None and second.position == {"instant": c3} and second.end_instant == c3
    assert rows(second.df, "uuid") == [("trip-00005",)]
    assert source.next_batch(spark, second.position) is None

    # without a limit, everything new in one batch
    whole = TableSource(source.path).next_batch(spark, {"instant": c1})
    assert whole is not None and whole.end_instant == c3
    assert rows(whole.df, "uuid", "ts") == [("trip-00002", 2000), ("trip-00004", 1004), ("trip-00005", 1005)]


def test_table_source_skips_table_services_and_refuses_cleaned_ranges(
        spark: SparkSession, source_table: tuple[Table, list[str]]) -> None:
    table, (c1, c2, c3) = source_table
    # a clustering rewrites files but changes nothing: no batch
    table.cluster(sort_by=["ts"])
    assert [i.operation for i in table.timeline() if i.action == "replacecommit"] == ["CLUSTER"]
    assert TableSource(table.uri).next_batch(spark, {"instant": c3}) is None

    # a consumer that fell behind the source's clean retention gets a clear error, not partial data
    c4 = table.upsert(trips(spark, [trip(i, ts=3_000) for i in range(1, 6)])).instant
    assert table.clean(retain_commits=1) is not None
    with pytest.raises(SourceError, match=rf"\({c1}, {c2}\] are no longer readable.*earliest readable"):
        TableSource(table.uri, max_commits_per_batch=1).next_batch(spark, {"instant": c1})
    # a range that only starts before the retained commits is complete (read as of its end)
    caught_up = TableSource(table.uri).next_batch(spark, {"instant": c3})
    assert caught_up is not None and caught_up.end_instant == c4
    assert rows(caught_up.df, "uuid", "ts")[0] == ("trip-00001", 3000)


def test_table_source_reads_the_columns_named(spark: SparkSession, source_table: tuple[Table, list[str]]) -> None:
    table, (c1, _, _) = source_table
    latest = TableSourceConfig(path=table.uri, columns=["uuid", "fare"]).build(None, None)
    batch = latest.next_batch(spark, {"instant": c1})
    assert batch is not None and batch.df.columns == ["uuid", "fare"]
    assert rows(batch.df, "uuid", "fare") == [("trip-00002", 40.0), ("trip-00004", 12.5), ("trip-00005", 12.5)]
    cdc = TableSourceConfig(path=table.uri, mode="cdc", columns=["fare", "ts"]).build(None, None)
    changes = cdc.next_batch(spark, {"instant": c1})
    assert changes is not None
    assert changes.df.columns == ["op", "commit_time", "completion_time", "record_key", "partition_path",
                                  "before_fare", "before_ts", "after_fare", "after_ts"]
    assert rows(changes.df, "record_key", "op", "before_fare", "after_fare") == [
        ("trip-00002", "u", 12.5, 40.0), ("trip-00004", "i", None, 12.5), ("trip-00005", "i", None, 12.5)]
    for mode in ("latest", "cdc"):
        bad = TableSourceConfig(path=table.uri, mode=mode, columns=["fare", "tips"]).build(None, None)
        with pytest.raises(SourceError, match=f"table source {re.escape(table.uri)}.*no column 'tips'"):
            bad.next_batch(spark, None)
    with pytest.raises(ValidationError, match="columns"):
        TableSourceConfig(path=table.uri, columns=[])


def test_missing_table(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no table there"):
        TableSource(str(tmp_path / "none")).next_batch(spark, None)


@pytest.mark.spark
def test_table_source_on_a_version_8_table_positions_by_completion_and_sees_a_late_publish(
        spark: SparkSession, tmp_path: Path) -> None:
    """A staged commit published after a later commit is ahead of a consumer that read the later one (version 8)."""
    table = Table.create(str(tmp_path / "v8"), TableConfig(name="v8", record_key=["uuid"], partition_fields=["uuid"],
                                                           table_version=8), spark=spark)  # A and B: other groups
    table.insert(trips(spark, [trip(0)]))
    a = table.upsert(trips(spark, [trip(1)]), stage=True)
    table.upsert(trips(spark, [trip(2)]))
    source = TableSource(table.path)
    first = source.next_batch(spark, None)
    assert first is not None and sorted(r["uuid"] for r in first.df.collect()) == ["trip-00000", "trip-00002"]
    assert source.next_batch(spark, first.position) is None
    a.publish()
    late = source.next_batch(spark, first.position)
    assert late is not None and [r["uuid"] for r in late.df.collect()] == ["trip-00001"]
    assert late.end_instant == a.instant and late.position["instant"] > first.position["instant"]
