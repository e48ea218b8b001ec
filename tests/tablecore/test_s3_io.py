"""``S3FileIO`` against the real S3 API server of the test session (moto): conditional creates refused by the store,
whole-object writes, configuration from the environment and storage options."""

from __future__ import annotations

import pickle
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablecore import StorageError
from tablecore.format.file_view import LIST_IN_THREADS, list_table_files
from tablecore.io import S3FileIO, S3Options, file_io_for
from tests.s3server import S3Server


@pytest.fixture
def io(s3: S3Server) -> S3FileIO:
    fio = file_io_for(s3.table_uri())
    assert isinstance(fio, S3FileIO)
    return fio


def test_create_if_absent_is_refused_by_the_store_for_the_second_writer(io: S3FileIO) -> None:
    path = io.join(".hoodie", "001.commit")
    assert io.create_if_absent(path, b"first")
    assert not io.create_if_absent(path, b"second")
    assert io.read_bytes(path) == b"first"


def test_concurrent_creates_of_one_key_have_exactly_one_winner(io: S3FileIO) -> None:
    path = io.join("lock")
    wins: list[bool] = []
    barrier = threading.Barrier(8)

    def race(i: int) -> None:
        other = file_io_for(io.uri)  # a client of its own, as another process would have
        barrier.wait()
        wins.append(other.create_if_absent(path, str(i).encode()))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]


def test_open_output_puts_the_object_whole_and_nothing_on_error(io: S3FileIO) -> None:
    path = io.join("p", "f.parquet")
    with io.open_output(path) as sink:
        pq.write_table(pa.table({"a": [1, 2, 3]}), sink)
    with io.open_input(path) as f:
        assert pq.read_table(f).column("a").to_pylist() == [1, 2, 3]
    broken = io.join("p", "broken.parquet")
    with pytest.raises(RuntimeError), io.open_output(broken) as sink:
        sink.write(b"PAR1 half a file")
        raise RuntimeError("the task died")
    assert not io.exists(broken)


def test_listing_exists_move_and_delete(io: S3FileIO) -> None:
    for name in ("a/1", "a/2", "a/b/3"):
        io.write_bytes(io.join(name), name.encode())
    assert sorted(f.name for f in io.list(io.join("a"))) == ["1", "2"]
    assert sorted(f.name for f in io.list(io.join("a"), recursive=True)) == ["1", "2", "3"]
    assert io.exists(io.join("a")) and io.exists(io.join("a/b")) and not io.exists(io.join("c"))
    io.move(io.join("a/1"), io.join("c/1"))
    assert not io.exists(io.join("a/1")) and io.read_bytes(io.join("c/1")) == b"a/1"
    io.delete(io.join("c/1"))
    io.delete(io.join("c/1"))  # missing_ok
    with pytest.raises(FileNotFoundError):
        io.delete(io.join("c/1"), missing_ok=False)
    io.delete_dir(io.join("a"))
    assert io.list(io.join("a"), recursive=True) == []


def test_the_listings_of_many_partitions_run_side_by_side_and_miss_nothing(io: S3FileIO) -> None:
    """Partitions listed in threads (a LIST request each): every base and log file of every partition asked for,
    none of the others, whatever order the requests answer in."""
    names = {f"dt={d:02d}": [f"g{d}-0_0-1-1_20260101000000000.parquet", f".g{d}-0_20260101000000000.log.1_0-1-1"]
             for d in range(3 * LIST_IN_THREADS)}
    for partition, files in names.items():
        for name in files:
            io.write_bytes(io.join(partition, name), b"x")
    asked = sorted(names)[1:]
    listed = list_table_files(io, asked)
    assert io.remote and len(asked) >= LIST_IN_THREADS
    assert sorted(f.name for f in listed.bases) == sorted(n[0] for p, n in names.items() if p in asked)
    assert sorted(f.name for f in listed.logs) == sorted(n[1] for p, n in names.items() if p in asked)
    assert {f.partition for f in listed.bases} == set(asked)


def test_pickles_for_executors(io: S3FileIO) -> None:
    io.write_bytes(io.join("x"), b"1")
    clone = pickle.loads(pickle.dumps(io))
    assert clone.read_bytes(clone.join("x")) == b"1"
    assert clone.create_if_absent(clone.join("y"), b"2")


def test_storage_options_override_the_environment() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "env-key",
           "AWS_SECRET_ACCESS_KEY": "env-secret"}
    from_env = S3Options.resolve(None, env)
    assert (from_env.endpoint_url, from_env.region, from_env.allow_http, from_env.access_key_id) == \
        ("http://127.0.0.1:1", "eu-west-1", True, "env-key")
    over = S3Options.resolve({"aws_endpoint_url": "https://minio.local:9000", "aws_region": "us-west-2",
                              "AWS_ALLOW_HTTP": "false"}, env)
    assert (over.endpoint_url, over.region, over.allow_http, over.access_key_id) == \
        ("https://minio.local:9000", "us-west-2", False, "env-key")
    assert S3Options.resolve(None, {"AWS_ENDPOINT_URL_S3": "http://a:1", "AWS_ENDPOINT_URL": "http://b:2"}) \
        .endpoint_url == "http://a:1"
    assert S3Options.resolve(None, {}).region == "us-east-1"
    assert "secret" not in repr(from_env)


def test_bad_storage_configuration_is_refused_by_name(tmp_path) -> None:
    with pytest.raises(StorageError, match="aws_endpoint"):
        S3Options.resolve({"aws_endpoint": "http://x"}, {})
    with pytest.raises(StorageError, match="bucket"):
        file_io_for("s3:///no-bucket")
    with pytest.raises(StorageError, match="takes none"):
        file_io_for(str(tmp_path), {"aws_region": "us-east-1"})


def test_a_stale_commit_lock_is_broken_by_one_process_and_the_lock_stays_exclusive(io: S3FileIO) -> None:
    import json
    import socket
    import time

    from tablecore.locks import CommitLock

    dead = subprocess_pid_that_exited()
    stale = json.dumps({"host": socket.gethostname(), "pid": dead, "time": time.time()}).encode()
    io.write_bytes(io.join(".hoodie/.aux/lakegate/commit.lock"), stale)
    holders: list[int] = []
    most = [0]
    barrier = threading.Barrier(6)

    def contend() -> None:
        other = file_io_for(io.uri)
        barrier.wait()
        with CommitLock(other, timeout_s=30):
            holders.append(1)
            most[0] = max(most[0], len(holders))
            time.sleep(0.05)
            holders.pop()

    threads = [threading.Thread(target=contend) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1, "two holders of the commit lock at once"
    assert not io.exists(io.join(".hoodie/.aux/lakegate/commit.lock"))


def subprocess_pid_that_exited() -> int:
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_lock_body_read_torn_once_does_not_break_a_live_lock(io: S3FileIO, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a HEAD-then-GET read could see when the lock is released and retaken between the two requests: a body cut
    to the previous version's length. One such read is no proof that the holder is gone."""
    from tablecore import LockTimeoutError
    from tablecore.locks import CommitLock

    whole = io.read_bytes
    torn = file_io_for(io.uri)
    monkeypatch.setattr(torn, "read_bytes", lambda path: whole(path)[:17])
    with CommitLock(io) as held:
        body = io.read_bytes(held.path)
        with pytest.raises(LockTimeoutError):
            CommitLock(torn, timeout_s=0.2).__enter__()
        assert io.read_bytes(held.path) == body, "the live lock was broken"
    assert io.list(io.join(".hoodie/.aux/lakegate")) == []  # released, and no breaker mark


def test_a_lock_file_that_is_no_lock_record_is_broken_only_once_it_is_older_than_the_expiry(
        io: S3FileIO, monkeypatch: pytest.MonkeyPatch) -> None:
    from tablecore import LockTimeoutError, locks

    path = io.join(".hoodie/.aux/lakegate/commit.lock")
    io.write_bytes(path, b"{not json")
    with pytest.raises(LockTimeoutError):
        locks.CommitLock(io, timeout_s=0.2).__enter__()
    assert io.read_bytes(path) == b"{not json"
    monkeypatch.setattr(locks, "LOCK_EXPIRY_S", -1.0)  # now any file is older than the expiry
    with locks.CommitLock(io, timeout_s=5):
        assert io.read_bytes(path) != b"{not json"
    names = [f.name for f in io.list(io.join(".hoodie/.aux/lakegate"))]
    assert len(names) == 1 and names[0].startswith("commit.lock.broken."), names  # released; the mark is kept
