"""CDC log files of tables with ``hoodie.table.cdc.enabled`` (issue 23, acceptance 2): their names, block, schema
and records follow Apache Hudi's layout (docs/cdc.md), their records are the changes the CDC read derives from the
file groups, they go with their commit on rollback and with their file slice on clean, and hudi-rs reads the table
exactly as lakegate does (CDC files disturb no reader)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tablecore import Table, TableConfig
from tablecore.format.file_view import list_table_files
from tablecore.format.log_content import decode_avro_data
from tablecore.format.log_format import BlockType, LogFileName, read_blocks
from tests.tablecore.oracle import hudi_incremental, hudi_snapshot, spark_rows

pytestmark = [pytest.mark.spark]

DDL = "id int, part string, ts long, val string"


def cdc_files(t: Table) -> list[tuple[str, str]]:
    """(instant, relative path) of every CDC log file of the table."""
    return sorted((c.instant, f"{c.partition}/{c.name}") for c in list_table_files(t.io).cdc)


def file_records(t: Table, rel: str) -> tuple[str, str, list[dict[str, Any]]]:
    """(instant header, schema header, records) of a CDC log file's one block."""
    blocks = read_blocks((Path(t.path) / rel).read_bytes())
    assert [b.block_type for b in blocks] == [BlockType.CDC_DATA]
    block = blocks[0]
    assert block.instant is not None and block.schema is not None
    return block.instant, block.schema, list(decode_avro_data(block.content, block.schema))


def data_of(image: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if image is None else {k: image[k] for k in ("id", "part", "ts", "val")}


def write_history(spark: Any, t: Table) -> list[str]:
    """Inserts into two partitions, an upsert with updates and inserts, a delete, an upsert into a new partition."""
    return [
        t.upsert(spark.createDataFrame([(i, f"p{i % 2}", 1, f"a{i}") for i in range(6)], DDL)).instant,
        t.upsert(spark.createDataFrame([(0, "p0", 2, "b0"), (3, "p1", 2, "b3"), (10, "p0", 2, "n10")], DDL)).instant,
        t.delete(spark.createDataFrame([(2, "p0", 0, ""), (5, "p1", 0, ""), (99, "p1", 0, "")], DDL)).instant,
        t.upsert(spark.createDataFrame([(20, "p2", 3, "n20")], DDL)).instant,
    ]


@pytest.mark.parametrize("mode", ["DATA_BEFORE_AFTER", "DATA_BEFORE", "OP_KEY_ONLY"])
def test_cdc_log_files_follow_hudi_layout_and_hold_the_changes(spark: Any, tmp_path: Path, mode: str) -> None:
    t = Table.create(str(tmp_path / "t"), TableConfig(name="trips", record_key=["id"], ordering_field="ts",
                                                      partition_fields=["part"], cdc_enabled=True, cdc_mode=mode),
                     spark=spark)
    props = (tmp_path / "t/.hoodie/hoodie.properties").read_text()
    assert "hoodie.table.cdc.enabled=true" in props
    assert f"hoodie.table.cdc.supplemental.logging.mode={mode}" in props
    assert Table.open(t.path, spark=spark).config.cdc_mode == mode
    first, second, third, fourth = write_history(spark, t)

    files = cdc_files(t)
    # new file groups (the first commit's, the fourth's) have none: their inserts are the base file itself
    assert sorted({i for i, _ in files}) == [second, third]
    # the commit metadata names each file with its size (Hudi's cdcStats), and nothing else has cdcStats
    for instant in (first, second, third, fourth):
        stats = {p: n for s in t.commit_metadata(instant).write_stats for p, n in (s.cdc_stats or {}).items()}
        assert stats == {rel: (Path(t.path) / rel).stat().st_size for i, rel in files if i == instant}
    for instant, rel in files:
        name = rel.rsplit("/", 1)[1]
        parsed = LogFileName.parse_cdc(name)
        assert parsed is not None and parsed.base_instant == instant and parsed.version == 1
        assert name == f".{parsed.file_id}_{instant}.log.1_{parsed.write_token}.cdc"
        # the token is the one of the base file the merge wrote
        assert (Path(t.path) / rel).parent.joinpath(f"{parsed.file_id}_{parsed.write_token}_{instant}.parquet").exists()
        header_instant, schema_text, records = file_records(t, rel)
        assert header_instant == instant
        schema = json.loads(schema_text)
        fields = [(f["name"], f["type"] if isinstance(f["type"], str) or f["name"] in ("op", "ts_ms", "record_key")
                   else "image") for f in schema["fields"]]
        if mode == "OP_KEY_ONLY":
            assert schema == {"type": "record", "name": "Record", "fields": [
                {"name": "op", "type": ["string", "null"]}, {"name": "record_key", "type": ["string", "null"]}]}
        elif mode == "DATA_BEFORE":
            assert (schema["name"], schema["namespace"]) == ("CDC", "hoodie.trips")
            assert [n for n, _ in fields] == ["op", "record_key", "before"]
        else:
            assert (schema["name"], schema["namespace"]) == ("CDC", "hoodie.trips")
            assert [n for n, _ in fields] == ["op", "ts_ms", "before", "after"]
            assert schema["fields"][3]["type"] == ["null", "hoodie.trips.trips_record"]
        if mode != "OP_KEY_ONLY":
            image = schema["fields"][2]["type"][1]
            assert image["name"] == "trips_record"
            assert [f["name"] for f in image["fields"]] == ["id", "part", "ts", "val"]  # no _hoodie_* fields
            assert all(f["doc"] == "" and f["default"] is None and f["type"][0] == "null"
                       for f in schema["fields"])
        # the records are exactly the changes the CDC read derives for this commit and file group
        partition = rel.split("/", 1)[0]
        derived = [r.asDict(recursive=True) for r in t.read_cdc(
            None, instant).where(f"commit_time = '{instant}' and partition_path = '{partition}'").collect()]
        expected = sorted((r["op"], r["record_key"], data_of(r["before"]), data_of(r["after"])) for r in derived)
        if mode == "DATA_BEFORE_AFTER":
            got = sorted((r["op"], str(r["after"]["id"] if r["after"] else r["before"]["id"]), r["before"],
                          r["after"]) for r in records)
            assert all(r["ts_ms"] == instant for r in records)
        elif mode == "DATA_BEFORE":
            got = sorted((r["op"], r["record_key"], r["before"], e[3]) for r, e in zip(
                sorted(records, key=lambda r: (r["op"], r["record_key"])), expected, strict=True))
        else:
            got = sorted((r["op"], r["record_key"], e[2], e[3]) for r, e in zip(
                sorted(records, key=lambda r: (r["op"], r["record_key"])), expected, strict=True))
        assert got == expected, rel
    ops = sorted((r["op"], r["record_key"]) for _, rel in files for r in file_records(t, rel)[2]
                 if "record_key" in r)
    if mode != "DATA_BEFORE_AFTER":
        assert ops == [("d", "2"), ("d", "5"), ("i", "10"), ("u", "0"), ("u", "3")]

    # hudi-rs reads the table as lakegate does, snapshot and incremental: the CDC files are no data files to it
    if mode != "DATA_BEFORE_AFTER":
        return
    assert hudi_snapshot(t.path) == spark_rows(t.read())
    assert hudi_incremental(t.path, first, fourth) == spark_rows(t.read_changes(first, fourth))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_cdc_files_go_with_their_commit_and_their_slice(spark: Any, tmp_path: Path, table_type: str) -> None:
    t = Table.create(str(tmp_path / "t"), TableConfig(name="trips", record_key=["id"], ordering_field="ts",
                                                      partition_fields=["part"], cdc_enabled=True,
                                                      table_type=table_type), spark=spark)
    write_history(spark, t)
    before = cdc_files(t)
    if table_type == "MERGE_ON_READ":
        # updates and deletes appended to log files leave no CDC file (readers infer them from the logs); only a
        # small base file rewritten to take inserts does, beside the base file it wrote
        listed = list_table_files(t.io)
        bases = {(b.partition, b.file_id, b.instant) for b in listed.bases}
        assert all((c.partition, c.file_id, c.instant) in bases for c in listed.cdc)
        log_writes = {s.partition_path for i in t.timeline() if i.action == "deltacommit"
                      for s in t.commit_metadata(i.instant).write_stats if s.log_version is not None}
        assert log_writes
        assert {r["op"] for r in t.read_cdc().collect()} == {"i", "u", "d"}
        t.compact()  # compaction logs no changes (Hudi 0.14/0.15 and 1.x with a SIMPLE index)
        assert cdc_files(t) == before
        assert hudi_snapshot(t.path) == spark_rows(t.read())
        return
    assert before
    # a staged write's CDC file is there while it is staged; an abort (the rollback of a pending instant) takes it
    staged = t.upsert(spark.createDataFrame([(1, "p1", 8, "s1")], DDL), stage=True)
    assert [i for i, _ in cdc_files(t)].count(staged.instant) == 1
    staged.abort()
    assert cdc_files(t) == before
    # a rolled-back commit takes its CDC files with it
    last = t.upsert(spark.createDataFrame([(0, "p0", 9, "z0")], DDL)).instant
    assert [i for i, _ in cdc_files(t)].count(last) == 1
    t.rollback(last)
    assert cdc_files(t) == before
    # a clean removes a slice's CDC file with its base file; the slices kept keep theirs
    for n in range(3):
        t.upsert(spark.createDataFrame([(0, "p0", 10 + n, f"y{n}"), (3, "p1", 10 + n, f"y{n}")], DDL))
    t.clean(retain_commits=1)
    listed = list_table_files(t.io)
    bases = {(b.partition, b.file_id, b.instant) for b in listed.bases}
    assert listed.cdc and all((c.partition, c.file_id, c.instant) in bases for c in listed.cdc)
    assert not set(before) & set(cdc_files(t))
    assert hudi_snapshot(t.path) == spark_rows(t.read())


def test_verify_checks_cdc_log_files_against_their_commits(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), TableConfig(name="trips", record_key=["id"], ordering_field="ts",
                                                      partition_fields=["part"], cdc_enabled=True), spark=spark)
    write_history(spark, t)
    assert t.verify().ok
    files = cdc_files(t)
    assert len(files) >= 3
    (gone_instant, gone), (cut_instant, cut), (_, extra) = files[0], files[1], files[2]
    (Path(t.path) / gone).unlink()
    data = (Path(t.path) / cut).read_bytes()
    (Path(t.path) / cut).write_bytes(data[:-10])
    stray = extra.replace(".cdc", "").rsplit("_", 1)[0] + "_9-9-9.cdc"  # another task attempt's file
    (Path(t.path) / stray).write_bytes((Path(t.path) / extra).read_bytes())
    found = {(p.kind, p.severity, p.path.rsplit("/", 1)[-1] if p.path else None, p.instant)
             for p in t.verify().problems}
    gone_name, cut_name, stray_name = (rel.rsplit("/", 1)[-1] for rel in (gone, cut, stray))
    assert found == {("missing_file", "error", gone_name, gone_instant),
                     ("size_mismatch", "error", cut_name, cut_instant),
                     ("orphan_file", "warning", stray_name, LogFileName.parse_cdc(stray_name).base_instant)}
