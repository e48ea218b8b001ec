"""Shared fixtures: one session-scoped local[2] SparkSession (UTC, few shuffle partitions, UI off)."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.kafka_broker import TansuBroker
    from tests.s3server import S3Server

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

FIXTURES = Path(__file__).parent / "fixtures"

pytest_plugins = ["tests.scheduling"]  # the longest trials first, one to each xdist worker


SPARK_MODE_ENV = "LAKEGATE_TEST_SPARK"
"""How the ``spark`` fixture reaches Spark: ``local`` (default: a ``local[2]`` session in this process), ``connect``
(a Spark Connect server started from the pyspark install, this process a Connect client) or ``cluster`` (a standalone
master and worker started from the pyspark install, executors in JVMs of their own). ``make deployments`` runs the
tests marked ``deployments`` (the interop suites and the demo) in the last two."""


def spark_mode() -> str:
    """The Spark deployment of this test run (see :data:`SPARK_MODE_ENV`)."""
    mode = os.environ.get(SPARK_MODE_ENV, "local")
    if mode not in ("local", "connect", "cluster"):
        raise pytest.UsageError(f"{SPARK_MODE_ENV}={mode!r}: expected local, connect or cluster")
    return mode


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a Connect or cluster run (``make deployments``), a test that runs on both a local disk and S3 runs on S3
    only: a cluster's executors share no local disk with the driver, so S3 is where such a deployment's tables live,
    and the local-disk case of the same test has just passed in ``make test``. Halves the deployment runs.

    The interop suite's table-version-8 cases run in ``make test`` only, on a local disk, but for tests marked
    ``v8_on_s3``: the storage layer and the deployment do not depend on the table version (version 6 covers them
    everywhere), and the suite's time is kept.

    A test of a ``deployments`` suite marked ``s3_in_deployments(keep={param: value, ...})`` runs in ``make test``
    on S3 only in the cases whose parameters match ``keep`` (its local cases all run); marked without ``keep``, none
    of its S3 cases runs there. The deployment runs take every S3 case, twice (from Connect and on the cluster): the
    storage code those cases reach is the same one the kept S3 cases and the S3-only suites (``test_s3_io``,
    ``test_s3_faults``, the services, staged-commit, integrity and governance suites on S3) run in ``make test``,
    and ``make test`` stays within its budget."""
    local = spark_mode() == "local"
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params: dict[str, Any] = callspec.params if callspec is not None else {}
        where = params.get("lake_path")
        v8 = params.get("table_version") == 8
        if local:
            s3_v8 = v8 and where == "s3" and not item.get_closest_marker("v8_on_s3")
            (dropped if s3_v8 or _s3_case_left_to_deployments(item, params) else kept).append(item)
            continue
        on_disk = where == "local" or v8
        (dropped if on_disk or item.get_closest_marker("disk_twin_of_s3") else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _s3_case_left_to_deployments(item: pytest.Item, params: dict[str, Any]) -> bool:
    """Whether ``item`` (its parameters: ``params``) is an S3 case that its ``s3_in_deployments`` marker leaves to
    the deployment runs."""
    marker = item.get_closest_marker("s3_in_deployments")
    # an S3 case: the S3 case of ``lake_path``, or a test that takes the S3 server itself as an argument
    function = getattr(item, "function", None)
    on_s3 = params.get("lake_path") == "s3" or (
        function is not None and "s3" in inspect.signature(function).parameters)
    if not on_s3 or marker is None:
        return False
    keep: dict[str, Any] | None = marker.kwargs.get("keep")
    return keep is None or any(params.get(name) != value for name, value in keep.items())


@pytest.fixture(scope="session")
def spark(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The one SparkSession of the test run, started lazily — after the S3 test server, so that its JVMs and Python
    workers see the ``AWS_*`` environment as a user's would (the ``format("tablecore")`` data source plans in a
    Python worker). Local, a Spark Connect client or a session on a standalone cluster, by :func:`spark_mode`; the
    environment names the same deployment (``SPARK_REMOTE`` / ``LAKEGATE_SPARK_MASTER``), so that the CLI run in
    this process finds it too."""
    from tablecore.spark import session as sessions

    mode = spark_mode()
    if mode == "local":
        session = sessions.local_session("lakegate-tests")
        yield session
        session.stop()
        return
    from tests.sparkservers import start_connect_server, start_standalone_cluster

    logs = tmp_path_factory.mktemp(f"spark-{mode}")
    if mode == "connect":
        servers, url = start_connect_server(logs)
        env_name, session_of = sessions.REMOTE_ENV, sessions.connect_session
    else:
        servers, url = start_standalone_cluster(logs)
        env_name = sessions.MASTER_ENV

        def session_of(master: str) -> SparkSession:  # the driver listens on 127.0.0.1 only, as the servers do
            return sessions.cluster_session(master, "lakegate-tests", conf={
                "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(env_name, url)
            session = session_of(url)
            yield session
            session.stop()
    finally:
        servers.stop()


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    """A fresh table location."""
    return str(tmp_path / "tbl")


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """A real S3 API server (moto) on 127.0.0.1 for the session, with the ``AWS_*`` environment pointing at it."""
    from tests.s3server import start_s3_server

    server = start_s3_server()
    with pytest.MonkeyPatch.context() as mp:
        for k, v in server.env.items():
            mp.setenv(k, v)
        yield server
    server.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """A real Kafka-protocol broker (Tansu, in-memory storage) on 127.0.0.1 for the session (each xdist worker
    starts its own); its log is in a ``kafka`` temporary folder. Tests use topics of unique names."""
    from tests.kafka_broker import TansuBroker

    with TansuBroker(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


@pytest.fixture(params=["local", "s3"])
def lake_path(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh table location on a local disk, then on the S3 test server."""
    if request.param == "s3":
        server: S3Server = request.getfixturevalue("s3")
        return server.table_uri()
    return str(tmp_path / "tbl")
