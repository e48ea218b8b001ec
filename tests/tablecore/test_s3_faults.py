"""Storage faults (issue 22): object-store requests that fail transiently — 503 SlowDown, 500 InternalError, a reset
connection, a request that took effect but whose answer was lost — are retried with bounded back-off, and a retried
conditional create never turns into a double or a lost commit.

A proxy in front of the moto S3 server (:class:`tests.s3proxy.S3FaultProxy`) fails a seeded fraction of the requests
of every client, the driver's and the executors'. Acceptance 4: with 5 % of requests failing, 50 upserts all commit
exactly once and the table equals a model; with 100 % failing, each upsert fails with a StorageError and leaves
nothing visible, and the table writes again once the store answers.

The two long trials (50 + 20 upserts at 5 %, the store going down at each step of an upsert) run with the SIGKILL
trials in ``make crash-trials``; the unit cases and the 100 % case run in ``make test``."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablecore import StorageError, Table, TableConfig
from tablecore.exceptions import StorageUnavailableError
from tablecore.io import S3FileIO, S3Options, object_store
from tablecore.io.retry import RetryPolicy, is_transient
from tests.s3proxy import FAULTS, S3FaultProxy
from tests.s3server import S3Server
from tests.tablecore.oracle import spark_rows

DDL = "id int, city string, ts long, val string"


@pytest.fixture
def proxy(s3: S3Server) -> Iterator[S3FaultProxy]:
    p = S3FaultProxy(s3.endpoint, seed=22)
    yield p
    p.stop()


def through(s3: S3Server, proxy: S3FaultProxy, **extra: str) -> dict[str, str]:
    """Storage options that reach the test server through the proxy."""
    return {**s3.storage_options, "aws_endpoint_url": proxy.endpoint, **extra}


@pytest.fixture
def io(s3: S3Server, proxy: S3FaultProxy) -> S3FileIO:
    return S3FileIO(s3.table_uri("faults"), through(s3, proxy))


# ---- one request at a time ------------------------------------------------------------------------------------------

def test_read_bytes_is_one_get(io: S3FileIO, proxy: S3FaultProxy) -> None:
    io.write_bytes(io.join("x"), b"abc")
    proxy.reset_counts()
    assert io.read_bytes(io.join("x")) == b"abc"
    assert [(m, o) for m, _, o in proxy.requests] == [("GET", "ok")]


@pytest.mark.parametrize("fault", FAULTS)
def test_every_kind_of_request_is_retried_after_every_kind_of_fault(io: S3FileIO, proxy: S3FaultProxy,
                                                                     fault: str) -> None:
    table = pa.table({"k": ["x", "y"], "v": [1, 2]})
    calls: list[tuple[str, Any]] = [
        ("PUT", lambda: io.write_bytes(io.join("a", "1"), b"one")),
        ("GET", lambda: io.read_bytes(io.join("a", "1"))),
        ("HEAD", lambda: io.exists(io.join("a", "1"))),
        ("GET", lambda: sorted(f.name for f in io.list(io.join("a")))),
        ("PUT", lambda: io.create_if_absent(io.join("a", "2"), b"two")),
        ("PUT", lambda: _write_parquet(io, io.join("a", "t.parquet"), table)),
        ("GET", lambda: _read_parquet(io, io.join("a", "t.parquet"))),
        ("PUT", lambda: io.move(io.join("a", "2"), io.join("b", "2"))),
        ("POST", lambda: io.delete(io.join("b", "2"))),
        ("POST", lambda: io.delete_dir(io.join("a"))),
    ]
    results = []
    for method, call in calls:
        proxy.fail_next(fault, method=method)
        results.append(call())
    assert results == [None, b"one", True, ["1"], True, None, table, None, None, None]
    assert proxy.counts[fault] == len(calls), "every call met its fault"
    assert io.list(io.base, recursive=True) == []


def _write_parquet(io: S3FileIO, path: str, table: pa.Table) -> None:
    with io.open_output(path) as out:
        pq.write_table(table, out)


def _read_parquet(io: S3FileIO, path: str) -> pa.Table:
    with io.open_input(path) as f:
        return pq.read_table(f)


def test_large_objects_are_read_by_ranges_each_retried(io: S3FileIO, proxy: S3FaultProxy,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    table = pa.table({"k": [f"key-{i}" for i in range(2000)], "v": list(range(2000))})
    _write_parquet(io, io.join("big.parquet"), table)
    monkeypatch.setattr(object_store, "WHOLE_READ_MAX", 1024)
    proxy.reset_counts()
    proxy.fail_next("slowdown", method="GET", times=2)
    assert _read_parquet(io, io.join("big.parquet")).equals(table)
    gets = [o for m, _, o in proxy.requests if m == "GET"]
    assert gets.count("slowdown") == 2 and gets.count("ok") >= 3, gets  # the first GET, then ranges


def test_a_conditional_create_whose_answer_was_lost_is_ours_and_only_ours(io: S3FileIO, proxy: S3FaultProxy) -> None:
    path = io.join(".hoodie", "001.commit")
    proxy.fail_next("lost", method="PUT")  # the store creates the object; the writer never hears of it
    assert io.create_if_absent(path, b"")  # the retry's 412 is resolved by our token: our create
    assert [(m, o) for m, _, o in proxy.requests] == [("PUT", "lost"), ("PUT", "ok"), ("HEAD", "ok")]
    other = S3FileIO(io.uri, io.storage_options)
    proxy.fail_next("lost", method="PUT")
    assert not other.create_if_absent(path, b"")  # the object is not the other writer's, though the bytes are equal
    assert io.read_bytes(path) == b""


def test_a_create_refused_after_a_failed_attempt_is_someone_elses(io: S3FileIO, proxy: S3FaultProxy) -> None:
    path = io.join(".hoodie", "002.commit")
    assert S3FileIO(io.uri, io.storage_options).create_if_absent(path, b"theirs")
    proxy.reset_counts()
    assert not io.create_if_absent(path, b"mine")
    assert [m for m, _, _ in proxy.requests] == ["PUT"], "a 412 to the first attempt needs no check"
    proxy.fail_next("reset", method="PUT")  # nothing reaches the store; the retry meets the other writer's object
    assert not io.create_if_absent(path, b"mine")
    assert io.read_bytes(path) == b"theirs"


def test_a_failing_store_fails_in_the_retry_budget_with_a_clear_error(s3: S3Server, proxy: S3FaultProxy) -> None:
    proxy.fail_fraction = 1.0
    few = S3FileIO(s3.table_uri("dead"), through(s3, proxy, lakegate_max_retries="3", lakegate_retry_timeout="60"))
    with pytest.raises(StorageUnavailableError, match=r"S3 GET s3://lake/dead-\w+/x failed after 4 attempts"):
        few.read_bytes(few.join("x"))
    assert proxy.counts.total() == 4
    brief = S3FileIO(s3.table_uri("dead"), through(s3, proxy, lakegate_max_retries="1000",
                                                   lakegate_retry_timeout="0.5"))
    started = time.monotonic()
    with pytest.raises(StorageUnavailableError, match="lakegate_retry_timeout"):
        brief.create_if_absent(brief.join("x"), b"1")
    assert time.monotonic() - started < 10, "the time budget bounds the retries"
    assert isinstance(StorageUnavailableError("x"), StorageError)


def test_a_commit_lock_this_process_could_not_release_or_did_not_hear_it_took_is_broken_at_once(
        s3: S3Server, proxy: S3FaultProxy) -> None:
    """Otherwise the next writer of this process would wait for the lock to expire (a minute)."""
    from tablecore.locks import CommitLock

    io = S3FileIO(s3.table_uri("lock"), through(s3, proxy, lakegate_max_retries="0"))
    proxy.fail_next("slowdown", method="POST")  # the release fails
    with CommitLock(io):
        pass
    assert io.exists(io.join(".hoodie/.aux/lakegate/commit.lock"))
    with CommitLock(io, timeout_s=0.2):  # broken at once, not timed out
        pass
    proxy.fail_next("lost", method="PUT", path_contains="commit.lock")  # the lock is taken, unbeknown to us
    with pytest.raises(StorageUnavailableError), CommitLock(io):
        pass
    assert io.exists(io.join(".hoodie/.aux/lakegate/commit.lock"))
    with CommitLock(io, timeout_s=0.2):
        pass
    assert not io.exists(io.join(".hoodie/.aux/lakegate/commit.lock"))


def test_retry_budget_options_are_read_and_checked() -> None:
    assert S3Options.resolve(None, {}).retry == RetryPolicy()
    assert S3Options.resolve({"lakegate_max_retries": "2", "lakegate_retry_timeout": "1.5"}, {}).retry == \
        RetryPolicy(max_retries=2, timeout_s=1.5)
    env = {"AWS_MAX_ATTEMPTS": "4", "LAKEGATE_S3_RETRY_TIMEOUT": "30"}
    assert S3Options.resolve(None, env).retry == RetryPolicy(max_retries=3, timeout_s=30.0)
    with pytest.raises(StorageError, match="lakegate_max_retries"):
        S3Options.resolve({"lakegate_max_retries": "many"}, {})
    with pytest.raises(StorageError, match="retry budget"):
        S3Options.resolve({"lakegate_retry_timeout": "0"}, {})


def test_transient_failures_are_told_from_refusals() -> None:
    from obstore.exceptions import GenericError, PermissionDeniedError

    def status(code: int) -> GenericError:
        return GenericError(f"Error performing PUT http://s3/x in 2ms - Server returned non-2xx status code: {code}")

    assert all(is_transient(status(c)) for c in (500, 503, 429, 408))
    assert not any(is_transient(status(c)) for c in (400, 403, 404))
    assert is_transient(GenericError("Error performing GET http://s3/x in 1ms - HTTP error: error sending request"))
    assert is_transient(ConnectionResetError())
    assert not is_transient(FileNotFoundError("x")) and not is_transient(PermissionDeniedError("denied"))


# ---- whole tables through Spark -------------------------------------------------------------------------------------

def _batch(rng: random.Random, n: int, model: dict[int, tuple[str, int, str]]) -> list[tuple[int, str, int, str]]:
    """``n`` rows: updates of keys in the model and new keys (a key's city never changes: it is its partition)."""
    out = []
    for _ in range(n):
        key = rng.choice(sorted(model)) if model and rng.random() < 0.5 else len(model) + 1000 + rng.randrange(10**6)
        city = model[key][0] if key in model else rng.choice(["sf", "nyc"])
        out.append((key, city, 1000 + len(model) + rng.randrange(10**6), f"v{rng.randrange(10**6)}"))
    return list({r[0]: r for r in out}.values())


def _contents(t: Table) -> dict[int, tuple[str, int, str]]:
    return {r["id"]: (r["city"], r["ts"], r["val"]) for r in spark_rows(t.read())}


def _completed(t: Table) -> list[str]:
    return [i.instant for i in t.timeline() if i.state == "completed"]


def _upserts(t: Table) -> set[str]:
    """The completed upserts (rollbacks of failed writes are completed instants too)."""
    return {i.instant for i in t.timeline() if i.state == "completed" and i.operation == "UPSERT"}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.crash_trials  # a trial of many upserts (1-2 minutes each): run with the SIGKILL trials
@pytest.mark.trial_seconds(70)  # 88 s with 50 copy-on-write upserts, 46 s with 20 merge-on-read ones
@pytest.mark.parametrize(("table_type", "upserts"), [("COPY_ON_WRITE", 50), ("MERGE_ON_READ", 20)])
def test_with_5_percent_of_requests_failing_upserts_all_commit_exactly_once(
        spark: Any, s3: S3Server, proxy: S3FaultProxy, table_type: str, upserts: int) -> None:
    """Acceptance 4 on a copy-on-write table; a merge-on-read table (fewer upserts: each costs as much) compacts
    inline every 5 delta commits, under the same faults."""
    mor = table_type == "MERGE_ON_READ"
    t = Table.create(s3.table_uri("flaky"), TableConfig(name="t", record_key=["id"], ordering_field="ts",
                                                         partition_fields=["city"], table_type=table_type,
                                                         inline_compaction_delta_commits=5 if mor else 0),
                     spark=spark, storage_options=through(s3, proxy))
    rng = random.Random(4)
    model: dict[int, tuple[str, int, str]] = {}
    proxy.fail_fraction = 0.05
    for n in range(1, upserts + 1):
        batch = _batch(rng, 3, model)
        t.upsert(spark.createDataFrame(batch, DDL))
        model.update({key: (city, ts, val) for key, city, ts, val in batch})  # the latest commit wins
        if n % 5 == 0:
            assert _contents(t) == model, f"after upsert {n}"  # read with faults too
    writes = [i for i in t.timeline() if i.state == "completed" and i.operation == "UPSERT"]
    assert len(writes) == upserts, "every upsert committed exactly once"
    if mor:
        assert len([i for i in t.timeline() if i.operation == "COMPACT"]) == upserts // 5
    failed = sum(proxy.counts[f] for f in FAULTS)
    assert failed > 0.03 * proxy.counts.total(), dict(proxy.counts)
    proxy.fail_fraction = 0.0
    assert _contents(t) == model
    assert all(i.state == "completed" for i in t.timeline()), "an instant was left pending"


@pytest.mark.spark
def test_with_every_request_failing_each_upsert_fails_cleanly_and_the_table_writes_again(
        spark: Any, s3: S3Server, proxy: S3FaultProxy) -> None:
    t = Table.create(s3.table_uri("down"), TableConfig(name="t", record_key=["id"], ordering_field="ts",
                                                        partition_fields=["city"]),
                     spark=spark, storage_options=through(s3, proxy, lakegate_retry_timeout="1"))
    t.upsert(spark.createDataFrame([(1, "sf", 1, "a"), (2, "nyc", 1, "b")], DDL))
    before, files = _contents(t), sorted(f.path for f in t.io.list(t.io.base, recursive=True))
    proxy.fail_fraction = 1.0
    for i in range(3):
        with pytest.raises(StorageError, match="failed after"):
            t.upsert(spark.createDataFrame([(1, "sf", 10 + i, "x"), (3, "sf", 10 + i, "y")], DDL))
    proxy.fail_fraction = 0.0
    assert _contents(t) == before and len(_completed(t)) == 1
    assert sorted(f.path for f in t.io.list(t.io.base, recursive=True)) == files, "nothing was written"
    t.upsert(spark.createDataFrame([(1, "sf", 20, "x"), (3, "sf", 20, "y")], DDL))
    assert _contents(t) == {1: ("sf", 20, "x"), 2: ("nyc", 1, "b"), 3: ("sf", 20, "y")}
    assert len(_completed(t)) == 2


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.crash_trials  # a trial of many upserts (1-2 minutes each): run with the SIGKILL trials
def test_a_store_that_goes_down_in_the_middle_of_an_upsert_leaves_it_committed_once_or_not_at_all(
        spark: Any, s3: S3Server, proxy: S3FaultProxy) -> None:
    """The store stops answering at a step of an upsert: after planning (the requested instant), while executors
    write data files, at the commit lock, at the publish (refused; or taking effect with its answer lost), right
    after the publish. Whatever the upsert reports, once the store is back the table holds its batch exactly once if
    its instant completed, else not at all, and the next upsert commits."""
    t = Table.create(s3.table_uri("cut"), TableConfig(name="t", record_key=["id"], ordering_field="ts",
                                                       partition_fields=["city"]),
                     spark=spark, storage_options=through(s3, proxy, lakegate_retry_timeout="1"))
    rng = random.Random(7)
    model: dict[int, tuple[str, int, str]] = {}
    completed = r"/\d{17}\.commit$"
    steps = [(FAULTS, r"\.commit\.requested$", 0), (FAULTS, r"\.parquet$", 0), (FAULTS, r"/commit\.lock$", 0),
             (("slowdown",), completed, 0), (("lost",), completed, 0), (FAULTS, completed, 1)]
    outcomes = []
    for faults, pattern, then in [(FAULTS, "", 10**9), *steps]:  # a clean upsert first
        batch = _batch(rng, 3, model)
        done = _upserts(t)
        proxy.faults = faults
        proxy.down_from(pattern, method="PUT", then=then)
        try:
            t.upsert(spark.createDataFrame(batch, DDL))
            outcomes.append("committed")
        except Exception as e:  # a StorageError, or Spark's error for an executor's StorageError
            assert "failed after" in str(e), f"an unclear error when the store went down at {pattern}: {e}"
            outcomes.append("failed")
        proxy.up()
        new = _upserts(t) - done
        assert len(new) <= 1
        if new:
            model.update({key: (city, ts, val) for key, city, ts, val in batch})
            outcomes[-1] += " (published)"
        assert _contents(t) == model, f"the store went down at {pattern} ({outcomes[-1]})"
    assert outcomes[:6] == ["committed (published)"] + ["failed"] * 4 + ["failed (published)"], outcomes
    batch = _batch(rng, 3, model)
    t.upsert(spark.createDataFrame(batch, DDL))
    model.update({key: (city, ts, val) for key, city, ts, val in batch})
    assert _contents(t) == model
