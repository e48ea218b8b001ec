"""Tests of tablecore.format.log_format and tablecore.format.avro_values (pure, no Spark).

Real log files come from the MOR fixtures written by Apache Hudi 0.14/0.15 (tests/fixtures/hudi-v6).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import struct
import time
import zipfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tablecore.format.avro_schema import META_FIELDS, arrow_to_avro, avro_to_arrow, canonical_json, with_meta_fields
from tablecore.format.avro_values import arrow_to_datums, datums_to_arrow
from tablecore.format.log_content import (
    DeleteRecord,
    decode_avro_data,
    decode_delete,
    decode_parquet_data,
    encode_avro_data,
    encode_delete,
)
from tablecore.format.log_format import (
    MAGIC,
    BlockType,
    HeaderKey,
    LogBlock,
    LogFileName,
    LogFormatError,
    TruncatedBlockError,
    encode_block,
    encode_rollback_command,
    iter_blocks,
    read_blocks,
)
from tests.conftest import FIXTURES
from tests.tablecore.data import ARROW_ALL_TYPES
from tests.tablecore.oracle import rows

HUDI = FIXTURES / "hudi-v6"
MOR = sorted(p.stem for p in HUDI.glob("mor_*.zip"))

# Block types of every log file of each MOR fixture, by log file name (these fixtures hold one block per file).
EXPECTED_BLOCKS: dict[str, dict[str, list[BlockType]]] = {
    "mor_avrolog_trips_deletes": {
        ".6d3d1d6e-2298-4080-a0c1-494877d6f40a-0_20250618054711154.log.1_0-26-85": [BlockType.DELETE],
    },
    "mor_parquetlog_nonpartitioned": {
        ".d206069c-22c8-4532-b9ea-3cf4282342c4-0_20250117083125837.log.1_0-33-43": [BlockType.PARQUET_DATA],
    },
    "mor_parquetlog_simplekeygen_nonhivestyle": {
        ".26e33b7b-aa9f-4f2e-b683-a90ef0d5861d-0_20250121000547796.log.1_0-33-47": [BlockType.PARQUET_DATA],
    },
}


@pytest.fixture(scope="module")
def fixture_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each MOR fixture extracted once: zip name -> table base path."""
    out = {}
    for name in MOR:
        dest = tmp_path_factory.mktemp(name)
        with zipfile.ZipFile(HUDI / f"{name}.zip") as z:
            z.extractall(dest)
        props = [p for p in dest.rglob(".hoodie/hoodie.properties") if "__MACOSX" not in p.parts]
        assert len(props) == 1
        out[name] = props[0].parent.parent
    return out


def log_files(base: Path) -> list[Path]:
    return sorted(p for p in base.rglob(".*.log.*") if "__MACOSX" not in p.parts)


def expected(name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((HUDI / "expected" / f"{name}.json").read_text())
    return result


# ---------------------------------------------------------------------------------------------------------------------
# real Hudi-written log files
# ---------------------------------------------------------------------------------------------------------------------


def test_fixture_names_match_expected_block_table() -> None:
    assert sorted(EXPECTED_BLOCKS) == MOR


@pytest.mark.parametrize("name", MOR)
def test_fixture_log_files_parse_and_reframe_byte_for_byte(name: str, fixture_tables: dict[str, Path]) -> None:
    base = fixture_tables[name]
    files = log_files(base)
    assert {p.name: None for p in files}.keys() == EXPECTED_BLOCKS[name].keys()
    completed = {p.name.split(".")[0] for p in (base / ".hoodie").glob("*.deltacommit")}
    for path in files:
        data = path.read_bytes()
        blocks = list(iter_blocks(data))
        assert [b.block_type for b in blocks] == EXPECTED_BLOCKS[name][path.name]
        ends = [b.offset for b in blocks[1:]] + [len(data)]
        for block, end in zip(blocks, ends, strict=True):
            raw = data[block.offset:end]
            block_size = struct.unpack(">q", raw[6:14])[0]
            assert raw[:6] == MAGIC
            assert block_size == len(raw) - 14
            assert struct.unpack(">q", raw[-8:])[0] == block_size + 6
            assert block.footer == {}
            assert block.instant in completed
            assert block.to_bytes() == raw
            schema = json.loads(block.schema or "")
            assert [f["name"] for f in schema["fields"][:5]] == list(META_FIELDS)
        name_parsed = LogFileName.parse(path.name)
        assert name_parsed is not None and name_parsed.name == path.name
        assert any(path.parent.glob(f"{name_parsed.file_id}_*_{name_parsed.base_instant}.parquet"))


def test_fixture_delete_block_matches_expected_rows(fixture_tables: dict[str, Path]) -> None:
    name = "mor_avrolog_trips_deletes"
    [path] = log_files(fixture_tables[name])
    data = path.read_bytes()
    [block] = read_blocks(data)
    assert block.block_type is BlockType.DELETE
    assert list(block.header) == [HeaderKey.SCHEMA, HeaderKey.INSTANT_TIME]  # Java's order for a delete block
    assert (block.instant, len(data), len(block.content)) == ("20250618054714114", 1098, 190)
    deletes = decode_delete(block.content)

    exp = expected(name)
    before, after = exp["completed_instants"]
    gone = {r["_hoodie_record_key"]: r["_hoodie_partition_path"] for r in exp["as_of"][before]}
    for r in exp["snapshot"]:
        del gone[r["_hoodie_record_key"]]
    assert block.instant == after
    assert {d.record_key: d.partition_path for d in deletes} == gone
    assert len(deletes) == len(gone) == 3
    assert all(d.natural_order and d.ordering_value == 0 for d in deletes)

    # re-encoded byte for byte: content, then the whole block with the header order as read
    assert encode_delete(deletes, None) == block.content
    assert encode_block(block.block_type, list(block.header.items()), encode_delete(deletes, "long")) == data


@pytest.mark.parametrize("name", ["mor_parquetlog_nonpartitioned", "mor_parquetlog_simplekeygen_nonhivestyle"])
def test_fixture_parquet_block_rows_match_expected_snapshot(name: str, fixture_tables: dict[str, Path]) -> None:
    [path] = log_files(fixture_tables[name])
    [block] = read_blocks(path.read_bytes())
    assert list(block.header) == [HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA]
    table = decode_parquet_data(block.content)
    assert table.column_names[:5] == list(META_FIELDS)
    assert set(table.column("_hoodie_commit_time").to_pylist()) == {block.instant}
    snapshot = {r["_hoodie_record_key"]: r for r in expected(name)["snapshot"]}
    block_rows = rows(table)
    assert block_rows
    for row in block_rows:
        assert row == snapshot[row["_hoodie_record_key"]]


@pytest.mark.parametrize("name", ["mor_parquetlog_nonpartitioned", "mor_parquetlog_simplekeygen_nonhivestyle"])
def test_fixture_parquet_rows_through_avro_block_with_hudi_schema(name: str, fixture_tables: dict[str, Path]) -> None:
    """The rows of a Hudi PARQUET_DATA block survive an AVRO_DATA block written with Hudi's own SCHEMA header."""
    [path] = log_files(fixture_tables[name])
    [block] = read_blocks(path.read_bytes())
    assert block.schema is not None
    table = decode_parquet_data(block.content)
    header = [(HeaderKey.INSTANT_TIME, block.instant or ""), (HeaderKey.SCHEMA, block.schema)]
    data = encode_block(BlockType.AVRO_DATA, header, encode_avro_data(arrow_to_datums(table, block.schema),
                                                                       block.schema))
    [avro_block] = read_blocks(data)
    assert avro_block.header == dict(header)
    back = datums_to_arrow(decode_avro_data(avro_block.content, avro_block.schema or ""),
                           avro_to_arrow(block.schema))
    assert rows(back) == rows(table)


def test_fixture_log_names_parse() -> None:
    name = ".6d3d1d6e-2298-4080-a0c1-494877d6f40a-0_20250618054711154.log.1_0-26-85"
    parsed = LogFileName.parse(name)
    assert parsed == LogFileName("6d3d1d6e-2298-4080-a0c1-494877d6f40a-0", "20250618054711154", 1, "0-26-85")
    assert parsed is not None and parsed.name == name


# ---------------------------------------------------------------------------------------------------------------------
# block framing
# ---------------------------------------------------------------------------------------------------------------------


def test_rollback_command_block_is_105_bytes_and_parses() -> None:
    data = encode_rollback_command("20250102000000000", "20250101000000000")
    assert len(data) == 105
    assert struct.unpack(">q", data[6:14])[0] == 91
    assert struct.unpack(">q", data[-8:])[0] == 97
    [block] = iter_blocks(data)
    assert block == LogBlock(
        BlockType.COMMAND,
        {HeaderKey.INSTANT_TIME: "20250102000000000", HeaderKey.TARGET_INSTANT_TIME: "20250101000000000",
         HeaderKey.COMMAND_BLOCK_TYPE: "0"},
        b"",
        {},
    )
    assert list(block.header) == [HeaderKey.INSTANT_TIME, HeaderKey.TARGET_INSTANT_TIME, HeaderKey.COMMAND_BLOCK_TYPE]
    assert (block.instant, block.target_instant, block.schema) == ("20250102000000000", "20250101000000000", None)
    assert block.is_rollback
    assert block.to_bytes() == data
    # the exact layout, field by field
    assert data == b"".join([
        b"#HUDI#", struct.pack(">q", 91), struct.pack(">ii", 1, 0),
        struct.pack(">i", 3),
        struct.pack(">ii", 0, 17), b"20250102000000000",
        struct.pack(">ii", 1, 17), b"20250101000000000",
        struct.pack(">ii", 3, 1), b"0",
        struct.pack(">q", 0), struct.pack(">i", 0), struct.pack(">q", 97),
    ])


def test_encode_block_keeps_header_order_and_footer() -> None:
    header = [(HeaderKey.SCHEMA, "{}"), (HeaderKey.INSTANT_TIME, "20250101000000000")]
    footer = {HeaderKey.BLOCK_IDENTIFIER: "7"}
    data = encode_block(BlockType.AVRO_DATA, header, b"xyz", footer=footer) + encode_block(
        BlockType.DELETE, dict(reversed(header)), b"")
    first, second = iter_blocks(data)
    assert list(first.header.items()) == header and first.footer == footer and first.content == b"xyz"
    assert list(second.header.items()) == list(reversed(header)) and second.offset == len(first.to_bytes())
    with pytest.raises(ValueError, match="duplicate"):
        encode_block(BlockType.COMMAND, [(HeaderKey.INSTANT_TIME, "1"), (HeaderKey.INSTANT_TIME, "2")], b"")


def test_header_values_are_utf8() -> None:
    data = encode_block(BlockType.AVRO_DATA, [(HeaderKey.SCHEMA, '{"doc":"café ☕"}')], b"")
    [block] = iter_blocks(data)
    assert block.schema == '{"doc":"café ☕"}'


def two_blocks() -> bytes:
    return encode_rollback_command("20250102000000000", "20250101000000000") + encode_block(
        BlockType.DELETE, [(HeaderKey.INSTANT_TIME, "20250103000000000")],
        encode_delete([DeleteRecord("k1", "p")], None))


def test_truncated_tail_raises_or_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    data = two_blocks()
    first_len = 105
    for cut in range(first_len + 1, len(data)):
        truncated = data[:cut]
        with pytest.raises(TruncatedBlockError) as info:
            list(iter_blocks(truncated))
        assert info.value.offset == first_len
        assert f"offset {first_len}" in str(info.value)
        with pytest.raises(TruncatedBlockError):
            read_blocks(truncated, tolerate_truncated_tail=False)
        with caplog.at_level(logging.WARNING, logger="tablecore.format.log_format"):
            caplog.clear()
            kept = read_blocks(truncated)
        assert [b.block_type for b in kept] == [BlockType.COMMAND]
        assert "incomplete last log block" in caplog.text
    assert len(read_blocks(data)) == 2
    assert read_blocks(b"") == []
    assert read_blocks(data[:3]) == []


def test_truncated_error_is_a_log_format_error() -> None:
    with pytest.raises(LogFormatError):
        list(iter_blocks(two_blocks()[:-1]))
    assert issubclass(LogFormatError, ValueError)


@pytest.mark.parametrize("offset", [0, 105])
def test_corrupt_magic_raises_with_offset(offset: int) -> None:
    data = bytearray(two_blocks())
    data[offset:offset + 6] = b"#HUDX#"
    with pytest.raises(LogFormatError, match=f"bad magic at offset {offset}") as info:
        list(iter_blocks(bytes(data)))
    assert not isinstance(info.value, TruncatedBlockError)
    with pytest.raises(LogFormatError, match="bad magic"):
        read_blocks(bytes(data))  # corruption is never tolerated


def test_garbage_after_blocks_is_corrupt_not_truncated() -> None:
    with pytest.raises(LogFormatError, match="bad magic at offset 105") as info:
        read_blocks(two_blocks()[:105] + b"\x00\x00\x00")
    assert not isinstance(info.value, TruncatedBlockError)


def corrupt(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value):]


@pytest.mark.parametrize(
    ("position", "value", "match"),
    [
        (-8, struct.pack(">q", 96), "total block length 96 does not match blockSize 91"),
        (14, struct.pack(">i", 0), "unsupported log format version 0"),
        (18, struct.pack(">i", 9), "unknown block type 9"),
        (22, struct.pack(">i", 4), "header value length overruns|overruns the block end"),
        (26, struct.pack(">i", 12), "unknown header key 12"),
        (30, struct.pack(">i", 99), "overruns the block end"),
        (6, struct.pack(">q", 20), "blockSize 20 is too small"),
        (-20, struct.pack(">q", 1), "overruns the block end"),
        (-12, struct.pack(">i", 1), "overruns the block end"),
    ],
)
def test_corrupt_block_fields_raise(position: int, value: bytes, match: str) -> None:
    data = encode_rollback_command("20250102000000000", "20250101000000000")
    bad = corrupt(data, position % len(data), value)
    with pytest.raises(LogFormatError, match=match) as info:
        list(iter_blocks(bad))
    assert "offset" in str(info.value)
    assert not isinstance(info.value, TruncatedBlockError)


def test_block_size_smaller_than_fields_is_corrupt() -> None:
    data = encode_rollback_command("20250102000000000", "20250101000000000")
    shrunk = corrupt(data, 6, struct.pack(">q", 80))[:94]
    with pytest.raises(LogFormatError, match="corrupt log block at offset 0"):
        list(iter_blocks(shrunk))


# ---------------------------------------------------------------------------------------------------------------------
# DELETE blocks
# ---------------------------------------------------------------------------------------------------------------------


def test_reference_constructed_delete_example() -> None:
    content = encode_delete([DeleteRecord("id3", "city=sf")], None)
    assert content == bytes.fromhex("00000003 00000012 02 02 06") + b"id3" + bytes.fromhex("02 0e") + b"city=sf" + \
        bytes.fromhex("04 00 00")
    assert len(content) == 26
    assert decode_delete(content) == [DeleteRecord("id3", "city=sf", 0, natural_order=True)]


UTC = dt.UTC


@pytest.mark.parametrize(
    ("ordering_type", "value", "union_hex", "decoded"),
    [
        ("boolean", True, "0201", True),
        ("int", 7, "040e", 7),
        ("int", -(2**31), "04ffffffff0f", -(2**31)),
        ("long", 300, "06d804", 300),
        ("long", 2**63 - 1, "06feffffffffffffffff01", 2**63 - 1),
        ("float", 1.5, "080000c03f", 1.5),
        ("double", -2.0, "0a00000000000000c0", -2.0),
        ("double", 3, "0a0000000000000840", 3.0),
        ("bytes", b"\x01\x02", "0c040102", b"\x01\x02"),
        ("string", "b", "0e0262", "b"),
        ("date", dt.date(1970, 1, 2), "1002", dt.date(1970, 1, 2)),
        ("date", dt.date(1969, 12, 31), "1001", dt.date(1969, 12, 31)),
        ("decimal", Decimal("1"), "120e038d7ea4c68000", Decimal("1.000000000000000")),
        ("decimal", Decimal("-0.000000000000128"), "120280", Decimal("-1.28E-13")),
        ("time-micros", dt.time(0, 0, 1), "1480897a", dt.time(0, 0, 1)),
        ("timestamp-micros", dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC), "1602",
         dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC)),
        ("timestamp-micros", dt.datetime(1970, 1, 1, 1, 0, 0, 1), "1682909de91a",
         dt.datetime(1970, 1, 1, 1, 0, 0, 1, tzinfo=UTC)),  # naive is UTC
        ("long", 0, "0600", 0),  # LongWrapper(0) is a real ordering value, not natural order
    ],
)
def test_delete_ordering_wrappers(ordering_type: str, value: Any, union_hex: str, decoded: Any) -> None:
    content = encode_delete([DeleteRecord("k", "p", value)], ordering_type)
    prefix = bytes.fromhex("02 02 02") + b"k" + bytes.fromhex("02 02") + b"p"
    datum = prefix + bytes.fromhex(union_hex) + b"\x00"
    assert content == struct.pack(">ii", 3, len(datum)) + datum
    [back] = decode_delete(content)
    assert back == DeleteRecord("k", "p", decoded, natural_order=False)
    assert type(back.ordering_value) is type(decoded)


def test_delete_natural_order_and_int_zero() -> None:
    natural = DeleteRecord("k", "p")
    assert natural.natural_order
    records = [natural, DeleteRecord("k2", "p", 5), DeleteRecord("k3", "p", 0, natural_order=True)]
    back = decode_delete(encode_delete(records, "int"))
    assert back == [
        DeleteRecord("k", "p", 0, True), DeleteRecord("k2", "p", 5, False), DeleteRecord("k3", "p", 0, True)]
    # an int ordering field's real 0 is indistinguishable from natural order on the wire (Java treats it alike)
    assert decode_delete(encode_delete([DeleteRecord("k", "p", 0)], "int")) == [DeleteRecord("k", "p", 0, True)]
    assert decode_delete(encode_delete([], None)) == []


def test_delete_null_ordering_branch_is_natural_order() -> None:
    datum = bytes.fromhex("02 02 06") + b"id3" + bytes.fromhex("02 0e") + b"city=sf" + bytes.fromhex("00 00")
    [rec] = decode_delete(struct.pack(">ii", 3, len(datum)) + datum)
    assert rec == DeleteRecord("id3", "city=sf", None, True)


def test_delete_many_records_multi_byte_lengths() -> None:
    records = [DeleteRecord(f"key-{i}", f"part={i % 7}", i * 1000, False) for i in range(500)]
    assert decode_delete(encode_delete(records, "long")) == records


@pytest.mark.parametrize(
    ("records", "ordering_type", "match"),
    [
        ([DeleteRecord("k", "p", 5)], None, "ordering_type is required"),
        ([DeleteRecord("k", "p", 5)], "uuid", "unsupported ordering type 'uuid'"),
        ([DeleteRecord("k", "p", 2**31)], "int", "int ordering value must be an int"),
        ([DeleteRecord("k", "p", True)], "long", "long ordering value must be an int"),
        ([DeleteRecord("k", "p", "5")], "long", "long ordering value must be an int"),
        ([DeleteRecord("k", "p", 1)], "boolean", "must be a bool"),
        ([DeleteRecord("k", "p", 1)], "string", "must be a str"),
        ([DeleteRecord("k", "p", dt.datetime(2020, 1, 1))], "date", "date"),
        ([DeleteRecord("k", "p", Decimal("0.0000000000000001"))], "decimal", "more than 15 decimal places"),
        ([DeleteRecord("k", "p", Decimal("1e16"))], "decimal", "exceeds decimal"),
        ([DeleteRecord("k", "p", 7, natural_order=True)], "int", "natural-order delete cannot carry"),
    ],
)
def test_delete_invalid_values(records: list[DeleteRecord], ordering_type: str | None, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        encode_delete(records, ordering_type)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (struct.pack(">ii", 2, 0), "version 2"),
        (struct.pack(">ii", 3, 5) + b"\x00", "length field 5"),
        (struct.pack(">i", 3), "too short"),
        (struct.pack(">ii", 3, 2) + b"\x02\x00", "cannot be decoded"),
        (struct.pack(">ii", 3, 3) + b"\x00\x00\x00", "unexpected bytes"),
        (struct.pack(">ii", 3, 5) + bytes.fromhex("02 00 00 00 00"), "null record key"),
        (struct.pack(">ii", 3, 6) + bytes.fromhex("02 02 00 00 30 00"), "cannot be decoded"),
    ],
)
def test_decode_delete_errors(content: bytes, match: str) -> None:
    with pytest.raises(LogFormatError, match=match):
        decode_delete(content)


# ---------------------------------------------------------------------------------------------------------------------
# AVRO_DATA blocks and Arrow <-> Avro values
# ---------------------------------------------------------------------------------------------------------------------

ALL_TYPES = pa.schema([
    *ARROW_ALL_TYPES,
    ("mm", pa.list_(pa.map_(pa.string(), pa.map_(pa.string(), pa.date32())))),
])

D = Decimal
ALL_TYPES_ROWS: list[dict[str, Any]] = [
    {
        "i8": -128, "i16": 32767, "i32": -(2**31), "i64": 2**63 - 1, "f32": 1.5, "f64": -2.25, "flag": True,
        "s": "héllo ☕", "ls": "large", "b": b"\x00\xff", "lb": b"big", "d": dt.date(2024, 2, 29),
        "ts_utc": dt.datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=UTC),
        "ts_ns_paris": dt.datetime(2024, 6, 1, 12, 0, 0, 5, tzinfo=UTC),
        "ts_local": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
        "ts_local_ms": dt.datetime(2000, 1, 1, 0, 0, 0, 1000),
        "dec": D("-12345.67890"), "dec38": D("9999999999999999999999999999.9999999999"),
        "ints": [1, None, 3], "big_list": ["a", None], "nested_list": [[D("1.5"), None], None, []],
        "m": {"a": 1, "b": None}, "m_struct": {"k": {"v": 1.0, "w": [True, None]}, "n": None},
        "st": {"a": 1, "inner": {"dd": D("-0.01"), "t": None}, "arr": [{"k": "z"}, None]},
        "mm": [{"x": {"y": dt.date(1970, 1, 1)}}, None, {}],
    },
    dict.fromkeys(ALL_TYPES.names),
    {
        "i8": 0, "i16": 0, "i32": 0, "i64": 0, "f32": 0.0, "f64": float("inf"), "flag": False, "s": "", "ls": "",
        "b": b"", "lb": b"", "d": dt.date(1, 1, 1), "ts_utc": dt.datetime(1, 1, 1, tzinfo=UTC),
        "ts_ns_paris": dt.datetime(2200, 1, 1, tzinfo=UTC), "ts_local": dt.datetime(9999, 12, 31, 23, 59, 59),
        "ts_local_ms": dt.datetime(1970, 1, 1), "dec": D("0.00000"), "dec38": D("-1E-10"), "ints": [],
        "big_list": [], "nested_list": [], "m": {}, "m_struct": {}, "st": {"a": None, "inner": None, "arr": None},
        "mm": [],
    },
]


def all_types_table() -> pa.Table:
    return pa.Table.from_pylist(ALL_TYPES_ROWS, schema=ALL_TYPES)


def test_avro_data_block_round_trip_all_types() -> None:
    source = all_types_table()
    avro = with_meta_fields(arrow_to_avro(ALL_TYPES, "all_types"))
    datums = arrow_to_datums(source, avro)
    assert [list(d) for d in datums] == [[f["name"] for f in avro["fields"]]] * len(ALL_TYPES_ROWS)
    assert datums[0]["m"] == {"a": 1, "b": None}
    assert datums[0]["mm"] == [{"x": {"y": dt.date(1970, 1, 1)}}, None, {}]
    assert datums[0]["ts_ns_paris"] == dt.datetime(2024, 6, 1, 12, 0, 0, 5, tzinfo=UTC)
    assert datums[0]["ts_utc"].utcoffset() == dt.timedelta(0)
    assert datums[0]["ts_local"].tzinfo is None
    assert datums[0]["_hoodie_record_key"] is None

    header = [(HeaderKey.INSTANT_TIME, "20250101000000000"), (HeaderKey.SCHEMA, canonical_json(avro))]
    data = encode_block(BlockType.AVRO_DATA, header, encode_avro_data(datums, avro))
    [block] = read_blocks(data)
    records = decode_avro_data(block.content, block.schema or "")
    assert records == datums
    back = datums_to_arrow(records, avro_to_arrow(block.schema or ""))
    expected = source.cast(avro_to_arrow(arrow_to_avro(ALL_TYPES, "all_types")))
    assert back.drop_columns(list(META_FIELDS)).equals(expected)
    assert back.schema.names[:5] == list(META_FIELDS)


def test_avro_data_content_layout() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "x", "type": "long"}, {"name": "s", "type": "string"}]}
    content = encode_avro_data([{"x": 1, "s": "a"}, {"x": -65, "s": ""}], schema)
    assert content == bytes.fromhex("00000003 00000002 00000003 02 02 61 00000003 8101 00")
    assert decode_avro_data(content, json.dumps(schema)) == [{"x": 1, "s": "a"}, {"x": -65, "s": ""}]
    assert encode_avro_data([], schema) == bytes.fromhex("00000003 00000000")
    assert decode_avro_data(encode_avro_data([], schema), schema) == []


def test_decode_avro_data_with_reader_schema() -> None:
    writer = {"type": "record", "name": "r", "fields": [{"name": "x", "type": ["null", "int"], "default": None}]}
    reader = {"type": "record", "name": "r", "fields": [
        {"name": "x", "type": ["null", "long"], "default": None},
        {"name": "y", "type": ["null", "string"], "default": None},
    ]}
    content = encode_avro_data([{"x": 5}], writer)
    assert decode_avro_data(content, writer, reader_schema=reader) == [{"x": 5, "y": None}]


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (bytes.fromhex("00000002 00000000"), "version 2"),
        (bytes.fromhex("00000003"), "too short"),
        (bytes.fromhex("00000003 00000001"), "record 0 of 1 starts past"),
        (bytes.fromhex("00000003 00000001 00000005 02"), "overruns the content"),
        (bytes.fromhex("00000003 00000001 00000002 02 02"), "decoded 1 bytes but its length says 2"),
        (bytes.fromhex("00000003 00000001 00000001 02 ff"), "1 unexpected bytes after 1 records"),
        (bytes.fromhex("00000003 00000001 00000001 80"), "cannot be decoded"),
        (bytes.fromhex("00000003 ffffffff"), "negative record count"),
    ],
)
def test_decode_avro_data_errors(content: bytes, match: str) -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "x", "type": "long"}]}
    with pytest.raises(LogFormatError, match=match):
        decode_avro_data(content, schema)


def test_encode_avro_data_names_bad_record() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "x", "type": ["null", "long"]}]}
    with pytest.raises(ValueError, match="record 1 does not match"):
        encode_avro_data([{"x": 1}, {"x": "nope"}], schema)


def test_arrow_to_datums_fills_missing_columns_and_rejects_extra() -> None:
    avro = arrow_to_avro(pa.schema([("a", pa.int64()), ("b", pa.string())]), "t")
    assert arrow_to_datums(pa.table({"b": ["x"]}), avro) == [{"a": None, "b": "x"}]
    with pytest.raises(ValueError, match=r"columns \['c'\] are not fields"):
        arrow_to_datums(pa.table({"a": [1], "c": [2]}), avro)


def test_arrow_to_datums_refuses_lossy_timestamp() -> None:
    table = pa.table({"t": pa.array([1_500], pa.timestamp("ns", tz="UTC"))})
    avro = arrow_to_avro(table.schema, "t")
    with pytest.raises(ValueError, match="column 't': cannot convert"):
        arrow_to_datums(table, avro)


def test_arrow_to_datums_rejects_duplicate_map_keys() -> None:
    for t in (pa.map_(pa.string(), pa.int32()), pa.list_(pa.map_(pa.string(), pa.int32()))):
        value: Any = [("a", 1), ("a", 2)]
        table = pa.table({"m": pa.array([value if pa.types.is_map(t) else [value]], t)})
        with pytest.raises(ValueError, match="column 'm'"):
            arrow_to_datums(table, arrow_to_avro(table.schema, "t"))


def test_datums_to_arrow_names_bad_column() -> None:
    with pytest.raises(ValueError, match="column 'a'"):
        datums_to_arrow([{"a": "x"}], pa.schema([("a", pa.int64())]))
    assert datums_to_arrow([{"zzz": 1}], pa.schema([("a", pa.int64())])).column("a").to_pylist() == [None]


def trips(n: int) -> pa.Table:
    keys = [f"{i:08d}-uuid" for i in range(n)]
    return pa.table({
        "_hoodie_commit_time": ["20250101000000000"] * n,
        "_hoodie_commit_seqno": [f"20250101000000000_0_{i}" for i in range(n)],
        "_hoodie_record_key": keys,
        "_hoodie_partition_path": ["city=san_francisco"] * n,
        "_hoodie_file_name": ["6d3d1d6e-2298-4080-a0c1-494877d6f40a-0"] * n,
        "ts": pa.array(range(1695000000000, 1695000000000 + n), pa.int64()),
        "uuid": keys,
        "rider": ["rider-A"] * n,
        "driver": ["driver-K"] * n,
        "fare": pa.array([i * 0.25 for i in range(n)], pa.float64()),
        "city": ["san_francisco"] * n,
        "pickup": pa.array(range(n), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
    })


def test_trips_50k_conversion_is_fast_and_lossless() -> None:
    table = trips(50_000)
    avro = with_meta_fields(arrow_to_avro(table.drop_columns(list(META_FIELDS)).schema, "trips"))
    arrow = avro_to_arrow(avro)
    start = time.perf_counter()
    back = datums_to_arrow(arrow_to_datums(table, avro), arrow)
    elapsed = time.perf_counter() - start
    assert back.equals(table.cast(arrow))
    assert elapsed < 3.0, f"50k-row Arrow -> Avro datums -> Arrow took {elapsed:.2f}s"


# ---------------------------------------------------------------------------------------------------------------------
# log file names
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        (".abc-0_20250101000000000.log.1_0-26-85", LogFileName("abc-0", "20250101000000000", 1, "0-26-85")),
        (".abc-0_20250101000000000.log.12_3-4-5", LogFileName("abc-0", "20250101000000000", 12, "3-4-5")),
        (".abc-0_20250101000000000.log.2", LogFileName("abc-0", "20250101000000000", 2, "")),
        (".abc-0_20250101000000000.log.1_0-26-85.cdc", None),
        (".abc-0_20250101000000000.archive.1_0-26-85", None),
        ("abc-0_0-26-85_20250101000000000.parquet", None),
        ("..abc-0_20250101000000000.log.1_0-26-85.crc", None),
        (".abc-0_20250101000000000.log.x_0-26-85", None),
        (".abc-0_20250101000000000.log.1_0-26", None),
        (".hoodie_partition_metadata", None),
    ],
)
def test_log_file_name_parse(name: str, parsed: LogFileName | None) -> None:
    assert LogFileName.parse(name) == parsed
    if parsed is not None:
        assert parsed.name == name


def test_log_file_name_sort_key_is_hudi_order() -> None:
    names = [
        LogFileName("f-0", "20250102000000000", 1, "0-1-1"),
        LogFileName("f-0", "20250101000000000", 10, "0-1-1"),
        LogFileName("f-0", "20250101000000000", 2, "1-1-1"),
        LogFileName("f-0", "20250101000000000", 2, "0-9-9"),
    ]
    ordered = sorted(names, key=lambda n: n.sort_key)
    assert [(n.base_instant[:8], n.version, n.write_token) for n in ordered] == [
        ("20250101", 2, "0-9-9"), ("20250101", 2, "1-1-1"), ("20250101", 10, "0-1-1"), ("20250102", 1, "0-1-1")]
    assert sorted(names) == ordered  # same file id: dataclass order agrees
