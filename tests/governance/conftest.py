"""Governance fixtures: a live registry on 127.0.0.1, the trips schema with semantic types, trips batches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from schema_registry import RegistryClient
from schema_registry.settings import Settings
from tests.schema_registry.conftest import LiveServer

TRIPS_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Trip", "namespace": "com.example.rides",
    "fields": [
        {"name": "uuid", "type": "string"},
        {"name": "driver", "type": "string"},
        {"name": "dt", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "rider_age", "type": ["null", "int"], "default": None, "semanticType": "age_years"},
        {"name": "fare", "type": "double", "semanticType": "non_negative_amount"},
        {"name": "tip", "type": "double", "semanticType": "non_negative_amount"},
        {"name": "currency", "type": "string", "semanticType": "iso_currency"},
    ],
}
TRIP_COLUMNS = "uuid string, driver string, dt string, ts long, rider_age int, fare double, tip double, currency string"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[RegistryClient]:
    """A live registry server (SQLite) with the trips schema registered under ``trips-value``."""
    live = LiveServer(Settings(store_url=f"sqlite:///{tmp_path / 'registry.db'}", port=0))
    client = RegistryClient(live.url)
    client.register("trips-value", json.dumps(TRIPS_SCHEMA))
    yield client
    client.close()
    live.stop()


def trip(i: int, *, day: str = "2026-11-18", ts: int | None = None, age: int | None = 30, fare: float = 12.5,
         tip: float = 0.0, currency: str = "USD", driver: str | None = None) -> tuple[Any, ...]:
    """One trips row."""
    return (f"trip-{i:05d}", driver or f"driver-{i % 7:02d}", day, ts if ts is not None else 1_000 + i, age, fare, tip,
            currency)


def trips(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    """A trips DataFrame of ``rows`` (see :func:`trip`)."""
    return spark.createDataFrame(rows, TRIP_COLUMNS)
