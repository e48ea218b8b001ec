"""The format layer, read planning, Arrow slice reads, the transaction and the file-only table services on the
in-memory FileIO: no disk, no JVM. The Hudi-written fixtures read here exactly as their expected JSON."""

from __future__ import annotations

import json
import os
import socket
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablecore.commit import AUX_DIR, HEARTBEAT_EXPIRY_S, CommitProtocol, writer_alive
from tablecore.config import TableConfig
from tablecore.context import TableContext
from tablecore.exceptions import CommitConflictError, ConfigError, LockTimeoutError, StorageUnavailableError
from tablecore.format.commit_metadata import CommitMetadata, WriteStat
from tablecore.format.instant import Action, State
from tablecore.io import FileIO, InMemoryFileIO, LocalFileIO, clear_memory_stores, file_io_for
from tablecore.read_planning import plan_incremental, plan_snapshot
from tablecore.services.clean import CleanPolicy, clean
from tablecore.services.savepoint import savepoint
from tablecore.table_properties import PROPERTIES
from tablecore.tasks.read import read_plan_locally
from tablecore.transaction import Transaction
from tests.conftest import FIXTURES
from tests.tablecore.oracle import rows

HUDI = FIXTURES / "hudi-v6"
FIXTURES_ALL = sorted(p.stem for p in HUDI.glob("*.zip"))


@pytest.fixture(autouse=True)
def _fresh_memory() -> Iterator[None]:
    clear_memory_stores()
    yield
    clear_memory_stores()


def load_fixture(name: str) -> FileIO:
    """A Hudi-written fixture table copied file by file into a memory:// store."""
    io = file_io_for(f"memory://{name}/table")
    with zipfile.ZipFile(HUDI / f"{name}.zip") as z:
        names = [n for n in z.namelist() if "__MACOSX" not in n]
        props = next(n for n in names if n.endswith(".hoodie/hoodie.properties"))
        root = props[: -len(".hoodie/hoodie.properties")]
        for n in names:
            if n.startswith(root) and not n.endswith("/"):
                io.write_bytes(io.join(n[len(root):]), z.read(n))
    return io


def context(io: FileIO) -> TableContext:
    config = TableConfig.from_properties_text(io.read_bytes(io.join(PROPERTIES)).decode())
    return TableContext.of(config, io)


# ---- the FileIO contract, on memory and on a local disk ----------------------------------------------------------

@pytest.fixture(params=["memory", "local"])
def any_io(request: pytest.FixtureRequest, tmp_path: Path) -> FileIO:
    return file_io_for("memory://contract/t") if request.param == "memory" else file_io_for(str(tmp_path / "t"))


def test_file_io_is_chosen_from_the_uri(tmp_path: Path) -> None:
    assert isinstance(file_io_for(str(tmp_path)), LocalFileIO)
    assert isinstance(file_io_for(f"file://{tmp_path}"), LocalFileIO)
    assert isinstance(file_io_for("memory://x/y"), InMemoryFileIO)
    assert file_io_for("memory://x/y").table_uri() == "memory://x/y"


def test_file_io_contract(any_io: FileIO) -> None:
    io = any_io
    p = io.join("a", "b.txt")
    assert not io.exists(p)
    assert io.create_if_absent(p, b"one")
    assert not io.create_if_absent(p, b"two"), "create_if_absent must not replace a file"
    assert io.read_bytes(p) == b"one"
    io.write_bytes(p, b"three")
    assert io.read_bytes(p) == b"three"
    io.write_bytes(io.join("a", "c", "d.txt"), b"deep")
    assert [f.name for f in io.list(io.join("a"))] == ["b.txt"]
    assert sorted(f.name for f in io.list(io.join("a"), recursive=True)) == ["b.txt", "d.txt"]
    assert io.list(io.join("nothing")) == []
    io.move(io.join("a", "b.txt"), io.join("e", "b.txt"))
    assert not io.exists(p) and io.read_bytes(io.join("e", "b.txt")) == b"three"
    io.write_bytes(io.join("g.txt"), b"mine")
    assert not io.move_if_absent(io.join("g.txt"), io.join("e", "b.txt")), "move_if_absent must not replace a file"
    assert io.read_bytes(io.join("e", "b.txt")) == b"three" and io.read_bytes(io.join("g.txt")) == b"mine"
    assert io.move_if_absent(io.join("g.txt"), io.join("h", "g.txt"))
    assert not io.exists(io.join("g.txt")) and io.read_bytes(io.join("h", "g.txt")) == b"mine"
    table = pa.table({"k": ["x", "y"], "v": [1, 2]})
    with io.open_output(io.join("f.parquet")) as out:
        pq.write_table(table, out)
    with io.open_input(io.join("f.parquet")) as f:
        assert pq.read_table(f).equals(table)
    io.delete(io.join("e", "b.txt"))
    io.delete(io.join("e", "b.txt"))  # missing_ok
    with pytest.raises(FileNotFoundError):
        io.delete(io.join("e", "b.txt"), missing_ok=False)
    io.delete_dir(io.join("a"))
    assert not io.exists(io.join("a", "c", "d.txt"))


def test_memory_stores_are_shared_by_name_and_separate_otherwise() -> None:
    a = file_io_for("memory://one/t")
    a.write_bytes(a.join("x"), b"1")
    assert file_io_for("memory://one/t").read_bytes(a.join("x")) == b"1"
    other = file_io_for("memory://two/t")
    assert not other.exists(other.join("x"))


# ---- Hudi-written tables: planning and Arrow reads, no JVM --------------------------------------------------------

@pytest.mark.parametrize("name", FIXTURES_ALL)
def test_hudi_fixture_reads_as_expected_from_memory(name: str) -> None:
    expected = json.loads((HUDI / "expected" / f"{name}.json").read_text())
    io = load_fixture(name)
    ctx = context(io)
    timeline = ctx.meta.load_timeline()
    assert ctx.config.table_type == expected["table_type"]
    assert [i.time for i in timeline.completed_writes()] == expected["completed_instants"]
    assert rows(read_plan_locally(io, plan_snapshot(io, timeline, ctx.config))) == expected["snapshot"]
    if "read_optimized" in expected:
        plan = plan_snapshot(io, timeline, ctx.config, view="read_optimized")
        assert rows(read_plan_locally(io, plan)) == expected["read_optimized"]
    for instant, want in expected.get("as_of", {}).items():
        assert rows(read_plan_locally(io, plan_snapshot(io, timeline, ctx.config, as_of=instant))) == want
    for rng, want in expected.get("incremental", {}).items():
        start, end = rng.strip("()]").split(",")
        plan = plan_incremental(io, timeline, ctx.config, start=start, end=end)
        assert rows(read_plan_locally(io, plan)) == want, f"incremental {rng}"


def test_savepoint_and_clean_run_on_a_context_without_an_engine() -> None:
    name = "mor_avrolog_trips_deletes"
    expected = json.loads((HUDI / "expected" / f"{name}.json").read_text())
    io = load_fixture(name)
    ctx = context(io)
    first = expected["completed_instants"][0]
    assert savepoint(ctx, first) == first
    clean(ctx, CleanPolicy.of(retain_commits=1))
    timeline = ctx.meta.load_timeline()
    assert first in timeline.savepoint_times()
    # the savepointed snapshot and the latest one both still read in full
    assert rows(read_plan_locally(io, plan_snapshot(io, timeline, ctx.config, as_of=first))) \
        == expected["as_of"][first]
    assert rows(read_plan_locally(io, plan_snapshot(io, timeline, ctx.config))) == expected["snapshot"]
    with pytest.raises(ConfigError, match="compute engine"):
        _ = ctx.engine


# ---- the transaction --------------------------------------------------------------------------------------------

def _table() -> TableContext:
    io = file_io_for("memory://tx/t")
    config = TableConfig(name="t", record_key=["id"], ordering_field="ts")
    io.write_bytes(io.join(PROPERTIES), config.to_properties_text().encode())
    return TableContext.of(config, io)


def _metadata(*groups: str) -> CommitMetadata:
    stats = tuple(WriteStat(file_id=g, path=f"p/{g}_0-0-0_x.parquet", partition_path="p", prev_commit="null",
                            num_writes=1, num_deletes=0, num_update_writes=0, num_inserts=1, total_write_bytes=1)
                  for g in groups)
    return CommitMetadata(operation_type="UPSERT", write_stats=stats, extra_metadata={})


def test_a_transaction_publishes_its_instant_once() -> None:
    ctx = _table()
    with Transaction(ctx, Action.COMMIT) as tx:
        assert [i.state for i in ctx.meta.load_timeline().instants()] == [State.REQUESTED]
        tx.mark_inflight(_metadata("g1"))
        tx.publish(_metadata("g1"))
    timeline = ctx.meta.load_timeline()
    assert [(i.time, i.state) for i in timeline.instants()] == [(tx.instant.time, State.COMPLETED)]
    assert timeline.metadata(timeline.completed_writes()[0]).touched_file_ids() == {("p", "g1")}
    assert not ctx.io.list(ctx.io.join(AUX_DIR, "heartbeat"))


def test_a_failed_transaction_leaves_nothing_behind() -> None:
    ctx = _table()
    with pytest.raises(RuntimeError, match="boom"), Transaction(ctx, Action.COMMIT) as tx:
        tx.mark_inflight(_metadata("g1"))
        ctx.io.write_bytes(ctx.io.join("p", f"g1_0-0-0_{tx.instant.time}.parquet"), b"half")
        raise RuntimeError("boom")
    assert ctx.meta.load_timeline().instants() == []
    assert not ctx.io.exists(ctx.io.join("p", f"g1_0-0-0_{tx.instant.time}.parquet"))


def test_a_transaction_conflicting_with_one_that_completed_meanwhile_is_refused() -> None:
    ctx = _table()
    first, second = Transaction(ctx, Action.COMMIT), Transaction(ctx, Action.COMMIT)
    first.begin()
    second.begin()
    pending = [i.time for i in ctx.meta.load_timeline().pending()]
    first.mark_inflight(_metadata("g1"))
    second.mark_inflight(_metadata("g1", "g2"))
    first.publish(_metadata("g1"))
    with pytest.raises(CommitConflictError, match="g1"), second:
        second.publish(_metadata("g1", "g2"), pending_at_start=pending)
    assert [i.time for i in ctx.meta.load_timeline().instants()] == [first.instant.time]
    # a transaction on other file groups publishes
    with Transaction(ctx, Action.COMMIT) as third:
        third.publish(_metadata("g3"), pending_at_start=pending)


def test_a_held_commit_lock_times_out_with_its_own_error() -> None:
    ctx = _table()
    ctx.meta.lock_timeout_s = 0.2
    holder = {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}
    ctx.io.write_bytes(ctx.io.join(AUX_DIR, "commit.lock"), json.dumps(holder).encode())
    with pytest.raises(LockTimeoutError, match="commit lock"), Transaction(ctx, Action.COMMIT) as tx:
        tx.publish(_metadata("g1"))
    assert ctx.meta.load_timeline().completed_writes() == []


class _FailingReads(InMemoryFileIO):
    """The in-memory store, with reads of one path failing as a store down past its retries does."""

    def __init__(self, base_path: str, failing: str, error: Exception) -> None:
        super().__init__(base_path)
        self.failing, self.error = failing, error

    def read_bytes(self, path: str) -> bytes:
        if path == self.failing:
            raise self.error
        return super().read_bytes(path)


class _FailingHeartbeatDeletes(InMemoryFileIO):
    """The in-memory store, with deletes of heartbeats failing as a store that went down after a publish does."""

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        if "/heartbeat/" in path:
            raise StorageUnavailableError(f"DELETE {path} failed after 10 retries")
        super().delete(path, missing_ok=missing_ok)


def test_a_heartbeat_that_cannot_be_deleted_after_the_publish_does_not_fail_the_published_write() -> None:
    """The publish took effect: the caller must hear of success (an error would have it write the batch again)."""
    ctx = _table()
    failing = TableContext.of(ctx.config, _FailingHeartbeatDeletes(ctx.io.table_uri()))
    with Transaction(failing, Action.COMMIT) as tx:
        tx.mark_inflight(_metadata("g1"))
        tx.publish(_metadata("g1"))
    timeline = ctx.meta.load_timeline()
    assert [(i.time, i.state) for i in timeline.instants()] == [(tx.instant.time, State.COMPLETED)]
    assert [f.name for f in ctx.io.list(ctx.io.join(AUX_DIR, "heartbeat"))] == [tx.instant.time]


@pytest.mark.parametrize("error", [StorageUnavailableError("GET failed after 10 retries"), OSError(5, "EIO")])
def test_a_heartbeat_that_cannot_be_read_is_never_taken_for_a_dead_writer(error: Exception) -> None:
    """Callers roll back the instants of dead writers: a heartbeat the store fails to return must raise, while a
    missing or torn one (the writer is gone) and a stale one from another host mean dead."""
    ctx = _table()
    path = ctx.io.join(AUX_DIR, "heartbeat", "20261125000000000")
    here = {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}
    ctx.io.write_bytes(path, json.dumps(here).encode())
    assert writer_alive(ctx.io, "20261125000000000")
    failing = _FailingReads(ctx.io.table_uri(), path, error)
    with pytest.raises(type(error)):
        writer_alive(failing, "20261125000000000")
    assert not writer_alive(ctx.io, "20261125000000001")  # no heartbeat at all
    ctx.io.write_bytes(path, b'{"host": "x", "pi')
    assert not writer_alive(ctx.io, "20261125000000000")
    elsewhere = {"host": "another-host", "pid": 1, "time": time.time() - HEARTBEAT_EXPIRY_S - 1}
    ctx.io.write_bytes(path, json.dumps(elsewhere).encode())
    assert not writer_alive(ctx.io, "20261125000000000")
    ctx.io.write_bytes(path, json.dumps({**elsewhere, "time": time.time()}).encode())
    assert writer_alive(ctx.io, "20261125000000000")


def test_completed_files_are_written_by_publish_only() -> None:
    ctx = _table()
    with Transaction(ctx, Action.CLEAN, on_failure="keep") as tx:
        with pytest.raises(ValueError, match="complete"):
            ctx.meta.transition(tx.instant, State.COMPLETED, b"")
        tx.discard()
    assert isinstance(ctx.meta, CommitProtocol) and ctx.meta.load_timeline().instants() == []
