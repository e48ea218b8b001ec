"""A local SparkSession configured the way tablecore expects (UTC, Arrow, quiet from its first line)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")


def local_session(app_name: str = "lakegate", *, cores: int = 2, shuffle_partitions: int = 4,
                  driver_memory: str = "2g") -> SparkSession:
    """A ``local[cores]`` session: UTC time zone, few shuffle partitions, UI off, executors on this Python, and the
    JVM logging errors only (:data:`LOG4J2_CONFIG`, given at JVM start, so Spark's start-up notes never print)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    java_options = f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"
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
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.executor.extraJavaOptions", java_options)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.python.worker.reuse", "true")
        # PySpark records the Python call site of every Column operation for error messages: ~8 JVM round trips a
        # call, the main fixed cost of building a validators suite or a write plan
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .getOrCreate()
    )
    return session
