"""Test data: rows of every Spark type we write."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

ALL_TYPES_DDL = (
    "id int, name string, city string, region string, ts long, "
    "b byte, s short, i int, l long, f float, d double, flag boolean, bin binary, dec decimal(10,5), day date, "
    "at timestamp, tags array<string>, "
    "items array<struct<sku: string, qty: int>>, attrs map<string, struct<score: double, ok: boolean>>, "
    "info struct<first: string, age: int, nested: struct<x: double, y: boolean>>"
)


def row(i: int, *, version: int = 0, city: str | None = "sf", region: str = "us") -> tuple[Any, ...]:
    """One row of ALL_TYPES_DDL; ``version`` changes the non-key values and raises ts."""
    v = version
    return (
        i, f"name-{i}", city, region, 100 * (v + 1) + i,
        (i + v) % 100, 300 + i + v, 15000 + i * 7 + v, 1234567890 + i + v, 1.5 * i + v, 3.14159 * i + v,
        (i + v) % 2 == 0,
        f"bin-{i}-{v}".encode(), decimal.Decimal(f"{i}{v}.12345"), dt.date(2024, 1, 1) + dt.timedelta(days=i + v),
        dt.datetime(2024, 4, 1, 17, 1, tzinfo=dt.UTC) + dt.timedelta(hours=i, minutes=v),
        [f"t{i}", f"v{v}"], [(f"sku-{i}", i + v), (f"sku-{i + 1}", 2 * i)],
        {f"k{i}": (0.5 * i + v, True), "z": (float(v), False)},
        (f"first-{i}", 20 + i + v, (1.25 * i, i % 2 == 1)),
    )


def frame(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    """A DataFrame of ALL_TYPES_DDL rows."""
    return spark.createDataFrame(rows, ALL_TYPES_DDL)


# Arrow types of every kind the Avro mapping handles (narrow, large, zoned and zone-less variants included)
ARROW_ALL_TYPES = pa.schema([
    ("i8", pa.int8()),
    ("i16", pa.int16()),
    ("i32", pa.int32()),
    ("i64", pa.int64()),
    ("f32", pa.float32()),
    ("f64", pa.float64()),
    ("flag", pa.bool_()),
    ("s", pa.string()),
    ("ls", pa.large_string()),
    ("b", pa.binary()),
    ("lb", pa.large_binary()),
    ("d", pa.date32()),
    ("ts_utc", pa.timestamp("us", tz="UTC")),
    ("ts_ns_paris", pa.timestamp("ns", tz="Europe/Paris")),
    ("ts_local", pa.timestamp("us")),
    ("ts_local_ms", pa.timestamp("ms")),
    ("dec", pa.decimal128(10, 5)),
    ("dec38", pa.decimal128(38, 10)),
    ("ints", pa.list_(pa.int32())),
    ("big_list", pa.large_list(pa.string())),
    ("nested_list", pa.list_(pa.list_(pa.decimal128(4, 1)))),
    ("m", pa.map_(pa.string(), pa.int64())),
    ("m_struct", pa.map_(pa.string(), pa.struct([("v", pa.float64()), ("w", pa.list_(pa.bool_()))]))),
    ("st", pa.struct([
        ("a", pa.int32()),
        ("inner", pa.struct([("dd", pa.decimal128(20, 2)), ("t", pa.timestamp("us", tz="UTC"))])),
        ("arr", pa.list_(pa.struct([("k", pa.string())]))),
    ])),
])
