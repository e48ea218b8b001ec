"""Tests of tablecore.format.log_content (the contents of DELETE and AVRO_DATA blocks) and
tablecore.format.avro_values (pure, no Spark)."""

from __future__ import annotations

import datetime as dt
import json
import struct
import time
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from tablecore.format.avro_schema import META_FIELDS, arrow_to_avro, avro_to_arrow, canonical_json, with_meta_fields
from tablecore.format.avro_values import arrow_to_datums, datums_to_arrow
from tablecore.format.log_content import (
    DeleteRecord,
    decode_avro_data,
    decode_delete,
    encode_avro_data,
    encode_delete,
)
from tablecore.format.log_format import (
    BlockType,
    HeaderKey,
    LogFormatError,
    encode_block,
    read_blocks,
)
from tests.tablecore.data import ARROW_ALL_TYPES

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


