"""The vectorized Avro encoder writes exactly the bytes fastavro writes, for every primitive field type, nullable or
not, with nulls, empty and multi-byte strings and extreme numbers; other schemas are left to fastavro."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tablecore.format.avro_columnar import (
    decode_avro_columns,
    decode_avro_columns_by_schema,
    decode_avro_columns_many,
    encode_avro_columns,
)
from tablecore.format.avro_schema import arrow_to_avro, avro_to_arrow, with_meta_fields
from tablecore.format.avro_values import arrow_to_datums, datums_to_arrow
from tablecore.format.log_content import decode_avro_data, encode_avro_data
from tests.tablecore.data import ARROW_ALL_TYPES

LONGS = st.integers(-(2**63), 2**63 - 1)
INTS = st.integers(-(2**31), 2**31 - 1)
TEXT = st.text(max_size=200)  # any code points, incl. multi-byte UTF-8
DOUBLES = st.floats(allow_nan=False, width=64)
FLOATS = st.floats(allow_nan=False, width=32)


def _decimals(precision: int, scale: int) -> Any:
    top = Decimal(10 ** precision - 1).scaleb(-scale)
    return st.decimals(min_value=-top, max_value=top, places=scale, allow_nan=False, allow_infinity=False)


def _fixed_decimal(name: str, precision: int, scale: int, size: int) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size, "logicalType": "decimal", "precision": precision,
            "scale": scale}


MONEY = {"type": "bytes", "logicalType": "decimal", "precision": 14, "scale": 2}

COLUMNS: dict[str, tuple[pa.DataType, Any, str | list[str]]] = {
    "s": (pa.string(), TEXT, ["null", "string"]),
    "s_req": (pa.string(), TEXT, "string"),
    "b": (pa.binary(), st.binary(max_size=50), ["bytes", "null"]),  # null as the second branch
    "i": (pa.int32(), INTS, ["null", "int"]),
    "l": (pa.int64(), LONGS, ["null", "long"]),
    "l_req": (pa.int64(), LONGS, "long"),
    "f": (pa.float32(), FLOATS, ["null", "float"]),
    "d": (pa.float64(), DOUBLES, ["null", "double"]),
    "t": (pa.bool_(), st.booleans(), ["null", "boolean"]),
    # decimals: bytes (as long as the value needs) and fixed (Spark's size, and wider: sign bytes first)
    "m": (pa.decimal128(14, 2), _decimals(14, 2), ["null", MONEY]),
    "m_req": (pa.decimal128(18, 0), _decimals(18, 0), {**MONEY, "precision": 18, "scale": 0}),
    "x": (pa.decimal128(18, 4), _decimals(18, 4), ["null", _fixed_decimal("x8", 18, 4, 8)]),
    "x_wide": (pa.decimal128(9, 3), _decimals(9, 3), _fixed_decimal("x11", 9, 3, 11)),
}


def _table_and_schema(rows: list[dict[str, Any]]) -> tuple[pa.Table, dict[str, Any]]:
    table = pa.table({k: pa.array([r[k] for r in rows], t) for k, (t, _, _) in COLUMNS.items()})
    schema = {"type": "record", "name": "r", "fields": [{"name": k, "type": a} for k, (_, _, a) in COLUMNS.items()]}
    return table, schema


def _required(i: int) -> dict[str, Any]:
    """A row with nulls wherever a field is nullable."""
    return dict.fromkeys(COLUMNS) | {"s_req": "x" * i, "l_req": i, "m_req": Decimal(i), "x_wide": Decimal(i).scaleb(-3)}


def _row() -> Any:
    return st.fixed_dictionaries({
        k: (s if not isinstance(a, list) else st.none() | s) for k, (_, s, a) in COLUMNS.items()})


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(_row(), max_size=40), offset=st.integers(0, 3))
def test_columnar_encoding_equals_fastavro(rows: list[dict[str, Any]], offset: int) -> None:
    table, schema = _table_and_schema(rows)
    table = table.slice(min(offset, table.num_rows))  # arrays that start inside their buffers
    got = encode_avro_columns(table, schema)
    assert got == encode_avro_data(arrow_to_datums(table, schema), json.dumps(schema))


def test_columnar_encoding_round_trips_extremes() -> None:
    rows = [{"s": "ü日😀", "s_req": "", "b": b"\x00\xff", "i": -(2**31), "l": -(2**63), "l_req": 2**63 - 1,
             "f": -0.0, "d": math.inf, "t": False, "m": Decimal("-999999999999.99"),
             "m_req": Decimal(10 ** 18 - 1), "x": Decimal("-128.0000"), "x_wide": Decimal("-999999.999")},
            {"s": None, "s_req": "x" * 300, "b": None, "i": 2**31 - 1, "l": None, "l_req": 0, "f": None, "d": None,
             "t": None, "m": None, "m_req": Decimal(-(10 ** 18 - 1)), "x": None, "x_wide": Decimal("0.000")},
            {"s": None, "s_req": "", "b": None, "i": None, "l": None, "l_req": 0, "f": None, "d": None, "t": None,
             "m": Decimal("-1.28"), "m_req": Decimal(-129), "x": Decimal("0.0128"), "x_wide": Decimal("0.128")}]
    table, schema = _table_and_schema(rows)
    content = encode_avro_columns(table, schema)
    assert content is not None
    assert decode_avro_data(content, json.dumps(schema)) == rows


def test_columnar_encoding_with_meta_fields_matches_the_log_writer() -> None:
    data = pa.table({"id": pa.array([1, 2, None], pa.int64()), "name": ["a", None, "c"]})
    schema = with_meta_fields(arrow_to_avro(data.schema, "t"))
    meta = {m["name"]: pa.array([f"{m['name']}-{i}" for i in range(3)]) for m in schema["fields"][:5]}
    table = pa.table({**meta, **{c: data.column(c) for c in data.column_names}})
    assert encode_avro_columns(table, schema) == encode_avro_data(arrow_to_datums(table, schema), json.dumps(schema))


def test_other_schemas_are_left_to_fastavro() -> None:
    schema = arrow_to_avro(ARROW_ALL_TYPES, "all")  # decimals, dates, timestamps, lists, maps, structs
    table = ARROW_ALL_TYPES.empty_table()
    assert encode_avro_columns(table, schema) is None
    # a long column with a logical type, or a column of another Arrow type than the field's, is not handled either
    ts = {"type": "record", "name": "r", "fields": [
        {"name": "x", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]}]}
    assert encode_avro_columns(pa.table({"x": pa.array([1], pa.int64())}), ts) is None
    longs = {"type": "record", "name": "r", "fields": [{"name": "x", "type": "long"}]}
    assert encode_avro_columns(pa.table({"x": pa.array(["1"])}), longs) is None
    assert encode_avro_columns(pa.table({"y": pa.array([1])}), longs) is None


def test_null_in_a_required_field_is_an_error_naming_it() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "x", "type": "long"}]}
    with pytest.raises(ValueError, match="'x' is not nullable"):
        encode_avro_columns(pa.table({"x": pa.array([1, None], pa.int64())}), schema)


# ---- decoding ----------------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(_row(), max_size=40))
def test_columnar_decoding_equals_fastavro(rows: list[dict[str, Any]]) -> None:
    table, schema = _table_and_schema(rows)
    content = encode_avro_data(arrow_to_datums(table, schema), json.dumps(schema))
    got = decode_avro_columns(content, schema)
    assert got is not None
    assert got.equals(datums_to_arrow(decode_avro_data(content, json.dumps(schema)), avro_to_arrow(schema)))
    assert got.to_pylist() == rows


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(_row(), max_size=30), picked=st.sets(st.sampled_from(list(COLUMNS))))
def test_columnar_decoding_of_some_columns_equals_the_full_decoding(rows: list[dict[str, Any]],
                                                                    picked: set[str]) -> None:
    table, schema = _table_and_schema(rows)
    content = encode_avro_data(arrow_to_datums(table, schema), json.dumps(schema))
    full = decode_avro_columns(content, schema)
    got = decode_avro_columns(content, schema, columns=picked)
    assert full is not None and got is not None
    assert got.equals(full.select([c for c in COLUMNS if c in picked]))
    # the columns stepped over are still checked: a record that does not end where its size says declines
    assert decode_avro_columns(content + b"\x00", schema, columns=picked) is None
    if rows:
        assert decode_avro_columns(content[:-1], schema, columns=picked) is None


def test_columnar_decoding_declines_what_it_does_not_handle() -> None:
    table, schema = _table_and_schema([_required(1)])
    content = encode_avro_data(arrow_to_datums(table, schema), json.dumps(schema))
    assert decode_avro_columns(content, schema) is not None
    # truncated, extended, a wrong union index, a wrong version: left to the record-by-record decoder
    assert decode_avro_columns(content[:-1], schema) is None
    assert decode_avro_columns(content + b"\x00", schema) is None
    broken = bytearray(content)
    broken[12] = 9  # the first record's first union index
    assert decode_avro_columns(bytes(broken), schema) is None
    assert decode_avro_columns(b"\x00\x00\x00\x02" + content[4:], schema) is None
    # invalid UTF-8 in a string
    one = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    assert decode_avro_columns(b"\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x02\x02\xff", one) is None
    assert decode_avro_columns(content, arrow_to_avro(ARROW_ALL_TYPES, "all")) is None
    # a record that contains itself (a linked list)
    node = {"type": "record", "name": "node", "fields": [{"name": "v", "type": "long"},
                                                         {"name": "next", "type": ["null", "node"]}]}
    linked = encode_avro_data([{"v": 1, "next": {"v": 2, "next": None}}], json.dumps(node))
    assert decode_avro_columns(linked, node) is None


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(blocks=st.lists(st.lists(_row(), max_size=12), min_size=1, max_size=6),
       picked=st.none() | st.sets(st.sampled_from(list(COLUMNS))))
def test_decoding_many_contents_at_once_equals_decoding_each(blocks: list[list[dict[str, Any]]],
                                                             picked: set[str] | None) -> None:
    schema = _table_and_schema([])[1]
    contents = [encode_avro_data(arrow_to_datums(_table_and_schema(rows)[0], schema), json.dumps(schema))
                for rows in blocks]
    got = decode_avro_columns_many(contents, schema, columns=picked)
    assert got is not None and len(got) == len(contents)
    for content, table, rows in zip(contents, got, blocks, strict=True):
        alone = decode_avro_columns(content, schema, columns=picked)
        assert alone is not None and table.equals(alone)
        assert table.num_rows == len(rows)


def test_decoding_many_contents_declines_when_one_is_bad_even_if_the_sum_adds_up() -> None:
    schema = _table_and_schema([])[1]
    rows = [_required(i) for i in range(5)]
    a = encode_avro_data(arrow_to_datums(_table_and_schema(rows[:2])[0], schema), json.dumps(schema))
    b = encode_avro_data(arrow_to_datums(_table_and_schema(rows[2:])[0], schema), json.dumps(schema))
    assert [t.num_rows for t in decode_avro_columns_many([a, b], schema) or []] == [2, 3]
    # counts moved from one block to the other (3 + 2 = 5 records in all): each block no longer describes its
    # own bytes, so nothing is decoded (one table would hand a record to the wrong block)
    a_bad = a[:4] + (3).to_bytes(4, "big") + a[8:]
    b_bad = b[:4] + (2).to_bytes(4, "big") + b[8:]
    assert decode_avro_columns_many([a_bad, b_bad], schema) is None
    # a record that runs from one block into the next
    assert decode_avro_columns_many([a[:-1], a[-1:] + b], schema) is None
    assert decode_avro_columns_many([a, b[:-1]], schema) is None
    assert decode_avro_columns_many([], schema) is None


def test_contents_of_several_writer_schemas_are_decoded_together_schema_by_schema() -> None:
    full = _table_and_schema([])[1]
    narrow = {**full, "fields": [f for f in full["fields"] if f["name"] in ("l_req", "s_req")]}
    rows = [_required(i) for i in range(9)]

    def content(schema: dict[str, Any], part: list[dict[str, Any]]) -> tuple[str, bytes]:
        names = [f["name"] for f in schema["fields"]]
        table = _table_and_schema(part)[0].select(names)
        return json.dumps(schema), encode_avro_data(arrow_to_datums(table, schema), json.dumps(schema))

    good = [content(full, rows[:2]), content(narrow, rows[2:5]), content(full, rows[5:6]), content(narrow, rows[6:8])]
    lone = content({**full, "name": "other"}, rows[8:])  # the only content of its schema: left to the caller
    got = decode_avro_columns_by_schema([*good, lone])
    assert sorted((idx, [t.num_rows for t in tables]) for idx, tables in got) == [([0, 2], [2, 1]), ([1, 3], [3, 2])]
    for idx, tables in got:
        for i, t in zip(idx, tables, strict=True):
            assert t.equals(decode_avro_columns(good[i][1], json.loads(good[i][0])))
    # a schema whose contents do not decode together is left out, the others are not
    truncated = (good[0][0], good[0][1][:-1])
    got = decode_avro_columns_by_schema([truncated, good[0], good[1], good[3]])
    assert [(idx, [t.num_rows for t in tables]) for idx, tables in got] == [([2, 3], [3, 2])]
    assert decode_avro_columns_by_schema([]) == []


def test_strings_either_side_of_the_inline_length_and_long_varints_decode_exactly() -> None:
    """Strings of up to 12 bytes are held inside their Arrow view, longer ones point into the content: every length
    around that boundary (with multi-byte characters across it), and lengths and numbers of many varint bytes."""
    texts = ["", "a", "x" * 11, "x" * 12, "x" * 13, "é" * 6, "x" * 11 + "é", "€" * 4 + "y", "z" * 63, "z" * 64,
             "w" * 8191, "w" * 8192, "🙂" * 40]
    rows = [dict.fromkeys(COLUMNS) | {"s": t, "s_req": t[::-1], "b": t.encode()[:50],
                                      "l_req": (1 << min(7 * i, 63)) - 1, "m_req": Decimal(i),
                                      "x_wide": Decimal(i).scaleb(-3)} for i, t in enumerate(texts)]
    table, schema = _table_and_schema(rows)
    content = encode_avro_data(arrow_to_datums(table, schema), json.dumps(schema))
    got = decode_avro_columns_many([content, content], schema)
    assert got is not None and [t.to_pylist() for t in got] == [rows, rows]


def test_strings_that_are_not_utf8_decline() -> None:
    """A string's bytes that are not UTF-8 (short or long): the columnar decoder declines, and the record-by-record
    decoder then names the error."""
    schema = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    for bad in (b"\xff", b"abcdefghijklmnop\xc3"):
        datum = bytes([len(bad) * 2]) + bad  # zigzag length, then the bytes
        content = (3).to_bytes(4, "big") + (1).to_bytes(4, "big") + len(datum).to_bytes(4, "big") + datum
        assert decode_avro_columns(content, schema) is None
        good = b"ok" if len(bad) == 1 else b"abcdefghijklmnop"
        datum = bytes([len(good) * 2]) + good
        assert decode_avro_columns((3).to_bytes(4, "big") + (1).to_bytes(4, "big") + len(datum).to_bytes(4, "big")
                                   + datum, schema).to_pylist() == [{"s": good.decode()}]


def _cdc_schema() -> dict[str, Any]:
    """A CDC log record (``DATA_BEFORE_AFTER``) as Hudi writes it: the before image's record type is in the
    enclosing namespace, and the after image names it by its full name."""
    _, image = _table_and_schema([])

    def opt(name: str, typ: Any) -> dict[str, Any]:
        return {"name": name, "type": ["null", typ], "doc": "", "default": None}

    return {"type": "record", "name": "CDC", "namespace": "ns", "fields": [opt("op", "string"), opt("ts_ms", "string"),
                                                        opt("before", image), opt("after", "ns.r")]}


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(records=st.lists(st.fixed_dictionaries({"op": st.sampled_from(["i", "u", "d"]), "ts_ms": st.none() | TEXT,
                                                "before": st.none() | _row(), "after": st.none() | _row()}),
                        max_size=30))
def test_columnar_decoding_of_nullable_nested_records_equals_fastavro(records: list[dict[str, Any]]) -> None:
    schema = _cdc_schema()
    content = encode_avro_data(records, json.dumps(schema))
    got = decode_avro_columns(content, schema)
    assert got is not None
    assert got.to_pylist() == decode_avro_data(content, json.dumps(schema)) == records
    picked = decode_avro_columns(content, schema, columns={"op", "after"})
    assert picked is not None and picked.column_names == ["op", "after"]
    assert picked.to_pylist() == [{"op": r["op"], "after": r["after"]} for r in records]
    # fields of the images by dotted name: structs of those fields alone, null where the image is; a name the
    # record does not have gives a struct of no fields that still says where the image is
    dotted = decode_avro_columns(content, schema, columns={"before.l", "before.s_req", "after.m", "after.none"})
    assert dotted is not None and dotted.column_names == ["before", "after"]
    assert dotted.column("before").type.names == ["s_req", "l"]  # the writer's order
    assert dotted.to_pylist() == [
        {"before": None if r["before"] is None else {k: r["before"][k] for k in ("s_req", "l")},
         "after": None if r["after"] is None else {"m": r["after"]["m"]}} for r in records]
    nothing = decode_avro_columns(content, schema, columns={"op", "before.none"})
    assert nothing is not None and nothing.column("before").type == pa.struct([])
    assert nothing.column("before").is_valid().to_pylist() == [r["before"] is not None for r in records]
    assert decode_avro_columns(content + b"\x00", schema) is None
    assert decode_avro_columns(content + b"\x00", schema, columns={"after.m"}) is None


def test_decimals_beyond_what_the_columnar_codec_handles_are_left_to_fastavro() -> None:
    money = {"type": "record", "name": "r", "fields": [{"name": "m", "type": MONEY}]}
    cents = pa.table({"m": pa.array([Decimal("1.25")], pa.decimal128(14, 2))})
    assert encode_avro_columns(cents, money) is not None
    # another scale, more digits than the schema's precision, a precision beyond 18: not encoded here
    assert encode_avro_columns(pa.table({"m": pa.array([Decimal("1.250")], pa.decimal128(14, 3))}), money) is None
    assert encode_avro_columns(pa.table({"m": pa.array([Decimal(10 ** 13)], pa.decimal128(16, 2))}), money) is None
    wide = {"type": "record", "name": "r", "fields": [{"name": "m", "type": {**MONEY, "precision": 19}}]}
    assert encode_avro_columns(pa.table({"m": pa.array([Decimal(1)], pa.decimal128(19, 2))}), wide) is None
    assert decode_avro_columns(encode_avro_data([{"m": Decimal(1)}], json.dumps(wide)), wide) is None
    # stored bytes that hold more digits than the precision: the record-by-record decoder deals with them
    over = b"\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x08\x0e" + (10 ** 14).to_bytes(7, "big")
    assert decode_avro_columns(over, money) is None
    assert decode_avro_columns(over[:-7] + (10 ** 14 - 1).to_bytes(7, "big"), money) is not None
