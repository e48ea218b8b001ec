"""Seeded faults: a clean trips DataFrame and a generator that injects known numbers of violations per rule.

The clean frame is built inside Spark from ``spark.range`` with deterministic expressions; every column satisfies
the trips Avro schema (``data/trips.avsc``, with ``semanticType`` attributes) and the suite's JSON Schema. Each
:data:`FAULTS` entry names the rule it violates and how many rows to break; the rows of different faults are
disjoint (a fixed stride through the ids), so a check's failing-row count is the sum of its rules' faults.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

DATA = Path(__file__).parent / "data"
TRIPS_AVSC = DATA / "trips.avsc"
PAYLOAD_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["v", "src"],
    "properties": {"v": {"type": "integer", "minimum": 1}, "src": {"type": "string"}},
}
CURRENCIES = ["USD", "EUR", "GBP", "BRL", "JPY"]
COUNTRIES = ["US", "DE", "GB", "BR", "JP"]
STATUSES = ["completed", "cancelled", "disputed"]
BASE_MS = int(dt.datetime(2024, 6, 1, tzinfo=dt.UTC).timestamp() * 1000)


@dataclass(frozen=True)
class Fault:
    """``count`` rows get ``column`` replaced by ``value`` (a Spark expression), breaking rule ``rule``."""

    rule: str
    check: str
    count: int
    column: str
    value: Column


def trips_avro() -> dict[str, Any]:
    """The trips Avro schema (dict)."""
    return dict(json.loads(TRIPS_AVSC.read_text(encoding="utf-8")))


def clean_trips(spark: SparkSession, rows: int = 600) -> DataFrame:
    """``rows`` clean trips (column ``id`` first: the row id, kept for fault injection)."""
    i = F.col("id")

    def pick(values: list[str], salt: int) -> Column:
        return F.element_at(F.array(*[F.lit(v) for v in values]), (F.pmod(i * salt + 1, len(values)) + 1).cast("int"))

    h = F.md5(F.concat(F.lit("trip-"), i.cast("string")))
    return spark.range(rows).select(
        i.alias("id"),
        F.concat_ws("-", F.substring(h, 1, 8), F.substring(h, 9, 4), F.substring(h, 13, 4),
                    F.substring(h, 17, 4), F.substring(h, 21, 12)).alias("uuid"),
        (F.lit(BASE_MS) + i * 60_000).alias("ts"),
        F.concat(F.lit("rider-"), i.cast("string"), F.lit("@example.com")).alias("rider_email"),
        (F.lit(18) + F.pmod(i, 60)).cast("int").alias("rider_age"),
        F.round(F.lit(3.5) + F.pmod(i, 40) * 1.25, 2).alias("fare"),
        pick(CURRENCIES, 7).alias("currency"),
        pick(COUNTRIES, 3).alias("country"),
        (F.lit(-40.0) + F.pmod(i, 80)).alias("pickup_lat"),
        (F.lit(-150.0) + F.pmod(i, 300)).alias("pickup_lon"),
        (F.lit(0.5) + F.pmod(i, 30) * 0.7).alias("distance_km"),
        pick(STATUSES, 5).alias("status"),
        (F.pmod(i, 9000) / F.lit(7)).cast("decimal(10,2)").alias("amount"),
        F.concat(F.lit("note "), i.cast("string")).alias("note"),
        F.to_json(F.struct((F.pmod(i, 5) + 1).alias("v"), F.lit("app").alias("src"))).alias("payload"),
        F.array(F.lit("a"), F.concat(F.lit("t"), i.cast("string"))).alias("tags"),
        F.struct(pick(["sf", "nyc", "berlin"], 11).alias("city"),
                 F.when(F.pmod(i, 2) == 0, F.lit("94107")).alias("zip")).alias("address"),
    )


def faults(now: dt.datetime | None = None) -> list[Fault]:
    """The seeded faults; counts differ per rule so that a mixed-up count cannot pass."""
    future_ms = int(((now or dt.datetime.now(dt.UTC)) + dt.timedelta(days=30)).timestamp() * 1000)
    long_email = "x" * 260 + "@example.com"
    return [
        # schema check: structure the Spark types cannot guarantee
        Fault("schema:fare:not_null", "structure", 3, "fare", F.lit(None).cast("double")),
        Fault("schema:status:enum", "structure", 4, "status", F.lit("teleported")),
        Fault("schema:amount:decimal", "structure", 2, "amount", F.lit("123456.78").cast("decimal(10,2)")),
        Fault("schema:note:max_length", "structure", 5, "note", F.lit("n" * 30)),
        Fault("schema:address.city:not_null", "structure", 2, "address",
              F.struct(F.lit(None).cast("string").alias("city"), F.lit("10115").alias("zip"))),
        Fault("schema:tags[]:not_null", "structure", 3, "tags", F.array(F.lit("a"), F.lit(None).cast("string"))),
        # semantic check: one fault per constraint kind (and both bounds)
        Fault("semantic:rider_age:age_years:maximum", "semantics", 6, "rider_age", F.lit(900)),
        Fault("semantic:rider_age:age_years:minimum", "semantics", 2, "rider_age", F.lit(-1)),
        Fault("semantic:rider_email:email:pattern", "semantics", 5, "rider_email", F.lit("not-an-email")),
        Fault("semantic:rider_email:email:max_length", "semantics", 1, "rider_email", F.lit(long_email)),
        Fault("semantic:currency:iso_currency:enum", "semantics", 3, "currency", F.lit("XXZ")),
        Fault("semantic:country:iso_country:enum", "semantics", 2, "country", F.lit("ZZ")),
        Fault("semantic:pickup_lat:latitude:maximum", "semantics", 2, "pickup_lat", F.lit(91.5)),
        Fault("semantic:pickup_lon:longitude:minimum", "semantics", 1, "pickup_lon", F.lit(-200.0)),
        Fault("semantic:fare:non_negative_amount:minimum", "semantics", 4, "fare", F.lit(-5.0)),
        Fault("semantic:ts:timestamp_not_future:not_future", "semantics", 3, "ts", F.lit(future_ms)),
        Fault("semantic:uuid:uuid:pattern", "semantics", 2, "uuid", F.lit("not-a-uuid")),
        Fault("semantic:distance_km:positive_distance:minimum", "semantics", 2, "distance_km", F.lit(0.0)),
        # json_schema check: invalid JSON and schema violations
        Fault("json_schema:payload", "payload_json", 2, "payload", F.lit("{not json")),
        Fault("json_schema:payload", "payload_json", 2, "payload", F.lit('{"v": 0, "src": "app"}')),
    ]


def min_rows(seeded: list[Fault], *, stride: int = 3) -> int:
    """The smallest frame (ids ``0..n-1``) in which every fault of ``seeded`` lands."""
    return stride * sum(f.count for f in seeded) + 1


def inject(df: DataFrame, seeded: list[Fault], *, stride: int = 3) -> DataFrame:
    """``df`` with every fault applied to its own rows (ids ``stride * k + 1`` for consecutive k; disjoint).

    The frame must have at least :func:`min_rows` rows, or the last faults land nowhere.
    """
    out = df
    k = 0
    for fault in seeded:
        ids = [stride * (k + j) + 1 for j in range(fault.count)]
        k += fault.count
        out = out.withColumn(fault.column, F.when(F.col("id").isin(ids), fault.value).otherwise(F.col(fault.column)))
    return out


def expected_rule_counts(seeded: list[Fault]) -> dict[str, int]:
    """Injected failing rows per rule."""
    out: dict[str, int] = {}
    for f in seeded:
        out[f.rule] = out.get(f.rule, 0) + f.count
    return out


def expected_check_counts(seeded: list[Fault]) -> dict[str, int]:
    """Injected failing rows per check (faults are on disjoint rows)."""
    out: dict[str, int] = {}
    for f in seeded:
        out[f.check] = out.get(f.check, 0) + f.count
    return out
