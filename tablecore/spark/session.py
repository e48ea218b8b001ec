"""SparkSessions configured the way tablecore expects (UTC, Arrow, quiet from their first line): local, on a cluster,
or a Spark Connect client, and :func:`session_from_env`, which picks one from the environment."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")


def _settings(shuffle_partitions: int) -> dict[str, str]:
    """The settings every classic session of tablecore gets: UTC, few shuffle partitions, UI off, Arrow, the JVMs
    logging errors only (:data:`LOG4J2_CONFIG`, given at JVM start, so Spark's start-up notes never print)."""
    java_options = f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.driver.extraJavaOptions": java_options,
        "spark.executor.extraJavaOptions": java_options,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.python.worker.reuse": "true",
        # PySpark records the Python call site of every Column operation for error messages: ~8 JVM round trips a
        # call, the main fixed cost of building a validators suite or a write plan
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }


def _session(master: str, app_name: str, settings: Mapping[str, str]) -> SparkSession:
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def local_session(app_name: str = "lakegate", *, cores: int = 2, shuffle_partitions: int = 4,
                  driver_memory: str = "2g") -> SparkSession:
    """A ``local[cores]`` session: UTC time zone, few shuffle partitions, UI off, executors on this Python, and the
    JVM logging errors only (:data:`LOG4J2_CONFIG`, given at JVM start, so Spark's start-up notes never print)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return _session(f"local[{cores}]", app_name, {
        **_settings(shuffle_partitions), "spark.default.parallelism": str(cores), "spark.driver.memory": driver_memory})


REMOTE_ENV = "SPARK_REMOTE"
MASTER_ENV = "LAKEGATE_SPARK_MASTER"


def cluster_session(master: str, app_name: str = "lakegate", *, shuffle_partitions: int = 4,
                    executor_memory: str = "1g", conf: Mapping[str, str] | None = None) -> SparkSession:
    """A session on a running cluster manager (``spark://host:port`` for a standalone cluster): executors in JVMs of
    their own, running this Python (``spark.pyspark.python``), configured like :func:`local_session` otherwise;
    ``conf`` adds or overrides settings (``spark.driver.host``: the address executors reach the driver on)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return _session(master, app_name, {
        **_settings(shuffle_partitions), "spark.executor.memory": executor_memory,
        "spark.pyspark.python": os.environ["PYSPARK_PYTHON"], **(conf or {})})


def connect_session(url: str) -> SparkSession:
    """A Spark Connect client session on ``url`` (``sc://host:port``). The server decides executors and
    configuration; the session time zone is set to UTC, as tablecore's instants are."""
    session = SparkSession.builder.remote(url).getOrCreate()
    session.conf.set("spark.sql.session.timeZone", "UTC")
    return session


def session_from_env(app_name: str = "lakegate") -> SparkSession:
    """The session the command line and the demo run on, chosen from the environment:

    - ``SPARK_REMOTE=sc://host:port`` (PySpark's own variable): a Spark Connect client (:func:`connect_session`);
    - ``LAKEGATE_SPARK_MASTER=spark://host:port`` (or any master URL): a session on that cluster
      (:func:`cluster_session`);
    - neither: :func:`local_session`.
    """
    remote = os.environ.get(REMOTE_ENV)
    if remote:
        return connect_session(remote)
    master = os.environ.get(MASTER_ENV)
    if master:
        return cluster_session(master, app_name)
    return local_session(app_name)
