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

    from tests.s3server import S3Server

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def spark(s3: S3Server) -> Iterator[SparkSession]:
    """The one SparkSession of the test run, started lazily — after the S3 test server, so that its JVM and Python
    workers see the ``AWS_*`` environment as a user's would (the ``format("tablecore")`` data source plans in a
    Python worker)."""
    from tablecore.spark.session import local_session

    session = local_session("lakegate-tests")
    yield session
    session.stop()


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    """A fresh table location."""
    return str(tmp_path / "tbl")


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """A real S3 API server (moto) on 127.0.0.1 for the session, with the ``AWS_*`` environment pointing at it."""
    from tests.s3server import start_s3_server

    server = start_s3_server()
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    yield server
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    server.stop()


@pytest.fixture(params=["local", "s3"])
def lake_path(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh table location on a local disk, then on the S3 test server."""
    if request.param == "s3":
        server: S3Server = request.getfixturevalue("s3")
        return server.table_uri()
    return str(tmp_path / "tbl")
