"""The Spark deployment a test run asked for is the one the ``spark`` fixture gives (``LAKEGATE_TEST_SPARK``):
``make deployments`` would otherwise pass while testing the local session twice."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from tablecore.spark.session import MASTER_ENV, REMOTE_ENV
from tests.conftest import spark_mode

pytestmark = [pytest.mark.spark, pytest.mark.deployments]


def _task_pids(spark: SparkSession) -> set[int]:
    """The pids of the JVMs whose Python workers ran the tasks of a small job."""

    def pid(batches):  # type: ignore[no-untyped-def]
        import psutil

        jvm = next(p for p in psutil.Process().parents() if p.name() == "java")
        for _ in batches:
            yield pa.RecordBatch.from_pydict({"pid": [jvm.pid]})

    return {r.pid for r in spark.range(4, numPartitions=4).mapInArrow(pid, "pid long").collect()}


def test_the_fixture_is_the_deployment_asked_for(spark: SparkSession) -> None:
    mode = spark_mode()
    connect = type(spark).__module__.startswith("pyspark.sql.connect")
    assert connect == (mode == "connect")
    if mode == "connect":
        assert os.environ[REMOTE_ENV].startswith("sc://127.0.0.1:")
    elif mode == "cluster":
        assert spark.sparkContext.master == os.environ[MASTER_ENV] and spark.sparkContext.master.startswith("spark://")
    else:
        assert spark.sparkContext.master.startswith("local[")
    # Python workers are started by an executor JVM: in this process's JVM only for a local session
    jvm = set() if connect else {int(spark.sparkContext._jvm.ProcessHandle.current().pid())}
    pids = _task_pids(spark)
    assert pids and (pids == jvm if mode == "local" else not pids & jvm)
