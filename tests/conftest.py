"""Shared fixtures: one session-scoped local[2] SparkSession (UTC, few shuffle partitions, UI off)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one SparkSession of the test run, started lazily."""
    from tablecore.spark.session import local_session

    session = local_session("lakegate-tests")
    yield session
    session.stop()


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    """A fresh table location."""
    return str(tmp_path / "tbl")
