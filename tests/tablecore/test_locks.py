"""Commit locks on storage without atomic creates (issue 17): an S3-compatible store that ignores conditional writes
is detected, and writes to it are refused unless commits are locked in PostgreSQL (``LAKEGATE_LOCK_URL``) or a
single writer is declared; the PostgreSQL advisory lock is exclusive, times out, and dies with its holder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tablecore import LockTimeoutError, StorageError, Table, TableConfig
from tablecore.io import S3FileIO
from tablecore.locks import LOCK_URL_ENV, SINGLE_WRITER_ENV, PostgresCommitLock, commit_lock, lock_key
from tests.s3proxy import UnconditionalS3Proxy
from tests.s3server import S3Server
from tests.schema_registry.conftest import PG_ENV
from tests.tablecore.data import frame, row
from tests.tablecore.oracle import assert_same_as_hudi, spark_rows


@pytest.fixture
def proxy(s3: S3Server) -> Iterator[UnconditionalS3Proxy]:
    p = UnconditionalS3Proxy(s3.endpoint)
    yield p
    p.stop()


@pytest.fixture
def pg_url() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"the PostgreSQL lock needs {PG_ENV} (make test / CI set it)")
    return url


def test_the_probe_tells_a_store_that_ignores_conditional_writes(s3: S3Server, proxy: UnconditionalS3Proxy) -> None:
    uri = s3.table_uri("probe")
    assert S3FileIO(uri).supports_atomic_create()
    ignoring = S3FileIO(uri, {**s3.storage_options, "aws_endpoint_url": proxy.endpoint})
    assert not ignoring.supports_atomic_create()
    assert ignoring.create_if_absent(ignoring.join("x"), b"1") and ignoring.create_if_absent(ignoring.join("x"), b"2")
    assert [f.name for f in S3FileIO(uri).list(S3FileIO(uri).base, recursive=True)] == ["x"]  # no probe left


@pytest.mark.spark
def test_writes_to_such_a_store_are_refused_without_a_lock_then_work_with_one(
        spark, s3: S3Server, proxy: UnconditionalS3Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOCK_URL_ENV, raising=False)
    monkeypatch.delenv(SINGLE_WRITER_ENV, raising=False)
    options = {**s3.storage_options, "aws_endpoint_url": proxy.endpoint}
    t = Table.create(s3.table_uri("unsafe"), TableConfig(name="t", record_key=["id"], ordering_field="ts",
                                                          partition_fields=["city"]), spark=spark,
                     storage_options=options)
    with pytest.raises(StorageError, match=rf"cannot create a file atomically.*{LOCK_URL_ENV}.*{SINGLE_WRITER_ENV}"):
        t.upsert(frame(spark, [row(i, city="sf") for i in range(4)]))
    assert t.timeline() == [] and spark_rows(t.read()) == []  # refused before anything was written
    monkeypatch.setenv(SINGLE_WRITER_ENV, "1")
    t.upsert(frame(spark, [row(i, city="sf") for i in range(4)]))
    assert len(spark_rows(t.read())) == 4
    assert_same_as_hudi(t)


@pytest.mark.spark
def test_with_the_postgres_lock_a_table_on_such_a_store_commits(
        spark, s3: S3Server, proxy: UnconditionalS3Proxy, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SINGLE_WRITER_ENV, raising=False)
    monkeypatch.setenv(LOCK_URL_ENV, pg_url)
    options = {**s3.storage_options, "aws_endpoint_url": proxy.endpoint}
    t = Table.create(s3.table_uri("locked"), TableConfig(name="t", record_key=["id"], ordering_field="ts",
                                                          table_type="MERGE_ON_READ"), spark=spark,
                     storage_options=options)
    t.upsert(frame(spark, [row(i) for i in range(5)]))
    t.upsert(frame(spark, [row(i, version=1) for i in (1, 7)]))
    assert len(spark_rows(t.read())) == 6
    assert_same_as_hudi(t)
    assert isinstance(commit_lock(S3FileIO(t.uri)), PostgresCommitLock)


def test_postgres_lock_is_exclusive_times_out_and_dies_with_its_holder(pg_url: str) -> None:
    table = f"s3://lake/lock-test-{time.time_ns()}"
    assert lock_key(table) == lock_key(table) != lock_key(table + "x")
    with PostgresCommitLock(pg_url, table, timeout_s=5):
        with pytest.raises(LockTimeoutError, match="advisory lock"), PostgresCommitLock(pg_url, table, timeout_s=0.3):
            pass
        with PostgresCommitLock(pg_url, table + "x", timeout_s=0.3):  # another table: another lock
            pass
    with PostgresCommitLock(pg_url, table, timeout_s=0.3):  # released on exit
        pass
    # a holder killed inside its critical section: the database ends its session, and with it the lock
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom tablecore.locks import PostgresCommitLock\n"
         "with PostgresCommitLock(sys.argv[1], sys.argv[2]):\n    print('held', flush=True); time.sleep(600)\n",
         pg_url, table], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeoutError), PostgresCommitLock(pg_url, table, timeout_s=0.3):
            pass
        holder.kill()
        holder.wait(timeout=10)
        with PostgresCommitLock(pg_url, table, timeout_s=10):
            pass
    finally:
        holder.kill()


def test_an_unreachable_lock_database_is_a_storage_error() -> None:
    with pytest.raises(StorageError, match=LOCK_URL_ENV), \
            PostgresCommitLock("postgresql://nobody@127.0.0.1:9/none", "s3://lake/t", timeout_s=1):
        pass
