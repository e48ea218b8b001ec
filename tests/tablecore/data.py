"""Test data: rows of every Spark type we write."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

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
