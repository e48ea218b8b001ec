"""Damaged tables: a torn write is told from lost data, and every damage is either read around correctly or reported
as a ``TableCorruptError`` naming the file and the instant (issue 22: the damage matrix, on disk and on S3).

Each case builds a small table with a Python model of its rows, damages one file through the table's own storage,
and checks what every reader (snapshot, read-optimized, incremental, count) and compaction do."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tablecore import Table, TableConfig, TableCorruptError
from tablecore.format.commit_metadata import WriteStat
from tablecore.format.log_format import MAGIC, BlockType, HeaderKey, encode_block
from tablecore.format.log_integrity import LogExtent, checksum, read_log_checked
from tablecore.read_planning import plan_snapshot
from tablecore.tasks.read import read_plan_locally
from tests.tablecore.oracle import hudi_snapshot

DDL = "id int, city string, ts long, v string"


# ---- the pure reader ---------------------------------------------------------------------------------------------

def _block(instant: str, payload: bytes = b"x" * 40) -> bytes:
    return encode_block(BlockType.AVRO_DATA, [(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, "{}")], payload)


def test_a_damaged_tail_no_instant_wrote_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    committed = _block("001")
    extents = [LogExtent("001", 0, len(committed), checksum(committed))]
    for tail in (b"garbage!" * 3, MAGIC + b"\x00\x00", _block("002")[:-7], MAGIC + b"\xff" * 30):
        with caplog.at_level(logging.WARNING, logger="tablecore.format.log_integrity"):
            caplog.clear()
            blocks = read_log_checked(committed + tail, "f.log", extents)
        assert [b.instant for b in blocks] == ["001"]
        assert "torn write" in caplog.text and "f.log" in caplog.text


def test_a_damaged_region_between_intact_blocks_is_skipped_to_the_next_magic() -> None:
    first, second = _block("001"), _block("003")
    data = first + b"\x00junk\x00" + second
    extents = [LogExtent("001", 0, len(first)), LogExtent("003", len(first) + 6, len(second))]
    assert [b.instant for b in read_log_checked(data, "f.log", extents)] == ["001", "003"]


@pytest.mark.parametrize("damage", ["cut", "flip", "empty"])
def test_damage_inside_a_completed_instants_bytes_is_an_error_naming_file_and_instant(damage: str) -> None:
    first, second = _block("001"), _block("002")
    data = first + second
    extents = [LogExtent("001", 0, len(first), checksum(first)),
               LogExtent("002", len(first), len(second), checksum(second))]
    if damage == "cut":
        data = data[:-5]
    elif damage == "flip":
        pos = len(first) + len(second) // 2
        data = data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1:]
    else:
        data = b""
    with pytest.raises(TableCorruptError) as err:
        read_log_checked(data, "p/.f_001.log.1_0-1-1", extents)
    assert err.value.path == "p/.f_001.log.1_0-1-1"
    assert err.value.instant == ("001" if damage == "empty" else "002")


def test_without_checksums_a_framing_error_inside_a_completed_extent_is_still_an_error() -> None:
    block = _block("001")
    data = block[:10] + b"\xff\xff\xff\xff" + block[14:]  # the version/type fields
    with pytest.raises(TableCorruptError, match="damaged log block at offset 0"):
        read_log_checked(data, "f.log", [LogExtent("001", 0, len(block))])


def test_write_stats_carry_the_checksum_through_json() -> None:
    stat = WriteStat(file_id="f", path="p/.f_001.log.1_0-1-1", partition_path="p", log_version=1, log_offset=0,
                     total_write_bytes=12, crc32=123)
    assert WriteStat.from_json(stat.to_json(), "p").crc32 == 123


# ---- tables ------------------------------------------------------------------------------------------------------

@dataclass
class Built:
    table: Table
    model: dict[int, tuple[str, int, str]]  # id -> (city, ts, v)
    base_instant: str  # the commit that wrote the base files
    last: str  # the newest completed write

    def rows(self, df: Any) -> dict[int, tuple[str, int, str]]:
        return {r.id: (r.city, r.ts, r.v) for r in df.collect()}

    def stats(self, instant: str) -> list[WriteStat]:
        return [s for s in self.table.commit_metadata(instant).write_stats if s.path]

    def full(self, stat: WriteStat) -> str:
        assert stat.path
        return self.table.io.join(stat.path)


def build(path: str, spark: Any, table_type: str) -> Built:
    cfg = TableConfig(name="d", record_key=["id"], ordering_field="ts", partition_fields=["city"],
                      table_type=table_type)
    t = Table.create(path, cfg, spark=spark)
    model = {i: ("ab"[i % 2], 1, f"v{i}") for i in range(1, 11)}
    first = t.upsert(spark.createDataFrame([(i, c, ts, v) for i, (c, ts, v) in model.items()], DDL)).instant
    update = {i: ("ab"[i % 2], 2, f"u{i}") for i in (2, 3, 5)}
    last = t.upsert(spark.createDataFrame([(i, c, ts, v) for i, (c, ts, v) in update.items()], DDL)).instant
    model.update(update)
    return Built(t, model, first, last)


def _log_stat(b: Built) -> WriteStat:
    return next(s for s in b.stats(b.last) if s.log_version is not None)


pytestmark = [pytest.mark.spark]


@pytest.fixture(params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def table_type(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_bytes_appended_to_a_log_file_are_skipped_and_every_read_and_compaction_returns_the_committed_rows(
        lake_path: str, spark: Any) -> None:
    b = build(lake_path, spark, "MERGE_ON_READ")
    io, stat = b.table.io, _log_stat(b)
    torn = _block("99991231235959999")[:-9]  # a writer's block cut off: it never completed
    io.write_bytes(b.full(stat), io.read_bytes(b.full(stat)) + torn)
    assert b.rows(b.table.read()) == b.model
    assert b.table.count() == len(b.model)
    assert b.rows(b.table.read_changes(b.base_instant)) == {i: b.model[i] for i in (2, 3, 5)}
    assert {r.id: r.v for r in b.table.read(view="read_optimized").collect()} == {i: f"v{i}" for i in b.model}
    # in this process (the tasks' code): the warning is logged
    plan = plan_snapshot(io, b.table.protocol.load_timeline(), b.table.config)
    local = read_plan_locally(io, plan)
    assert {r["id"]: r["v"] for r in local.to_pylist()} == {i: v for i, (_, _, v) in b.model.items()}
    assert b.table.compact() is not None
    assert b.rows(b.table.read()) == b.model
    assert {r["id"]: r["v"] for r in hudi_snapshot(b.table.uri)} == {i: v for i, (_, _, v) in b.model.items()}


def _expect_corrupt(call: Callable[[], Any], stat_path: str, instant: str) -> None:
    with pytest.raises(TableCorruptError) as err:
        call()
    assert err.value.instant == instant, err.value
    assert err.value.path is not None and err.value.path.endswith(stat_path.rsplit("/", 1)[-1]), err.value


def test_a_log_file_cut_short_inside_a_completed_block_fails_every_read_and_compaction(
        lake_path: str, spark: Any) -> None:
    b = build(lake_path, spark, "MERGE_ON_READ")
    io, stat = b.table.io, _log_stat(b)
    assert stat.path
    io.write_bytes(b.full(stat), io.read_bytes(b.full(stat))[:-20])
    before = [(i.instant, i.state) for i in b.table.timeline()]
    _expect_corrupt(lambda: b.table.read().collect(), stat.path, b.last)
    _expect_corrupt(b.table.count, stat.path, b.last)
    _expect_corrupt(lambda: b.table.read_changes(b.base_instant).collect(), stat.path, b.last)
    _expect_corrupt(b.table.compact, stat.path, b.last)
    _expect_corrupt(lambda: b.table.cluster(), stat.path, b.last)
    # nothing was written over the damage: no compaction or clustering instant, no older value made permanent
    assert [(i.instant, i.state) for i in b.table.timeline()] == before


def _flip(b: Built, stat: WriteStat) -> None:
    data = bytearray(b.table.io.read_bytes(b.full(stat)))
    data[len(data) // 2] ^= 0x20
    b.table.io.write_bytes(b.full(stat), bytes(data))


def test_a_flipped_byte_in_a_committed_log_block_is_reported_never_read_as_data(lake_path: str, spark: Any) -> None:
    b = build(lake_path, spark, "MERGE_ON_READ")
    stat = _log_stat(b)
    assert stat.path
    _flip(b, stat)
    _expect_corrupt(b.table.count, stat.path, b.last)
    _expect_corrupt(b.table.compact, stat.path, b.last)
    # a lazily evaluated DataFrame fails when collected, Spark's error carrying the TableCorruptError's text
    with pytest.raises(Exception, match=r"TableCorruptError: table corrupt: .*CRC-32") as err:
        b.table.read().collect()
    assert b.last in str(err.value) and stat.path.rsplit("/", 1)[-1] in str(err.value)


@pytest.mark.parametrize("damage", ["missing base", "truncated base", "missing log", "zero-length log"])
def test_missing_and_cut_short_files_are_found_before_anything_is_read(lake_path: str, spark: Any,
                                                                       table_type: str, damage: str) -> None:
    if "log" in damage and table_type == "COPY_ON_WRITE":
        pytest.skip("copy-on-write tables have no log files")
    b = build(lake_path, spark, table_type)
    io = b.table.io
    if "log" in damage:
        stat, instant = _log_stat(b), b.last
    else:  # the newest base file of a file group
        instant = b.last if table_type == "COPY_ON_WRITE" else b.base_instant
        stat = next(s for s in b.stats(instant) if s.log_version is None)
    assert stat.path
    if damage.startswith("missing"):
        io.delete(b.full(stat))
    else:
        io.write_bytes(b.full(stat), io.read_bytes(b.full(stat))[: 0 if "zero" in damage else 100])
    _expect_corrupt(lambda: b.table.read(), stat.path, instant)
    _expect_corrupt(b.table.count, stat.path, instant)
    if damage.endswith("base"):
        _expect_corrupt(lambda: b.table.read(view="read_optimized"), stat.path, instant)
        # an upsert into the damaged group refuses too, instead of merging into an older version
        key = next(i for i, (c, _, _) in b.model.items() if stat.partition_path.endswith(c))
        with pytest.raises(TableCorruptError):
            b.table.upsert(spark.createDataFrame([(key, b.model[key][0], 9, "late")], DDL))


def test_a_garbage_completed_commit_file_is_named_with_its_instant(lake_path: str, spark: Any,
                                                                   table_type: str) -> None:
    b = build(lake_path, spark, table_type)
    io = b.table.io
    action = "commit" if table_type == "COPY_ON_WRITE" else "deltacommit"
    path = io.join(f".hoodie/{b.last}.{action}")
    for garbage in (b"\x00\xffnot json", b""):
        io.write_bytes(path, garbage)
        for call in (b.table.read, b.table.timeline, lambda: b.table.read(as_of=b.base_instant)):
            with pytest.raises(TableCorruptError, match=f"--rollback-instant {b.last}") as err:
                call()
            assert err.value.instant == b.last and err.value.path is not None
            assert err.value.path.endswith(f"{b.last}.{action}")


def test_a_deleted_inflight_file_of_a_completed_instant_changes_nothing(lake_path: str, spark: Any,
                                                                        table_type: str) -> None:
    b = build(lake_path, spark, table_type)
    inflight = b.table.io.join(f".hoodie/{b.last}.inflight" if table_type == "COPY_ON_WRITE"
                               else f".hoodie/{b.last}.deltacommit.inflight")
    assert b.table.io.exists(inflight)
    b.table.io.delete(inflight)
    assert b.rows(b.table.read()) == b.model
    b.table.upsert(spark.createDataFrame([(1, "b", 5, "after")], DDL))
    assert b.rows(b.table.read())[1] == ("b", 5, "after")


def test_rolling_back_an_instant_whose_commit_file_is_garbage_restores_the_previous_state(
        lake_path: str, spark: Any, table_type: str) -> None:
    b = build(lake_path, spark, table_type)
    previous = b.rows(b.table.read(as_of=b.base_instant))
    action = "commit" if table_type == "COPY_ON_WRITE" else "deltacommit"
    b.table.io.write_bytes(b.table.io.join(f".hoodie/{b.last}.{action}"), b"{ garbage")
    result = Table.open(lake_path, spark=spark).rollback(b.last)
    assert result.rolled_back == b.last
    t = Table.open(lake_path, spark=spark)
    assert b.rows(t.read()) == previous
    assert [i.instant for i in t.timeline() if i.action != "rollback"] == [b.base_instant]
    assert {r["id"]: r["v"] for r in hudi_snapshot(t.uri)} == {i: v for i, (_, _, v) in previous.items()}
    t.upsert(spark.createDataFrame([(1, "b", 5, "after")], DDL))  # and the table takes writes again
    assert b.rows(t.read())[1] == ("b", 5, "after")
