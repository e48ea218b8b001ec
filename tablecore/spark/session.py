"""A local SparkSession configured the way tablecore expects (UTC, Arrow, quiet)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def local_session(app_name: str = "lakegate", *, cores: int = 2, shuffle_partitions: int = 4,
                  driver_memory: str = "2g") -> SparkSession:
    """A ``local[cores]`` session: UTC time zone, few shuffle partitions, UI off, executors on this Python."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(cores))
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.python.worker.reuse", "true")
        # PySpark records the Python call site of every Column operation for error messages: ~8 JVM round trips a
        # call, the main fixed cost of building a validators suite or a write plan
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
