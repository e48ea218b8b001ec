"""Replication (``tablecore.replicate``, docs/replication.md): 10 rounds of writes and table services on a source with
a replication after each, the replica equal to the source at every replicated instant (our reader, and hudi-rs at a
middle and the last round); resuming copies nothing twice; another table and a replica that was written to are
refused; a replica on S3; and a replication stopped after every single file operation of a run (in this process) or
SIGKILLed at random moments (a process of its own) leaves a replica that reads as the source did as of the replica's
newest instant, which the next run brings up to date."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tablecore import (
    ConfigError,
    ReplicationError,
    Table,
    TableConfig,
    TableNotFoundError,
    replicate,
    verify_table,
)
from tablecore.format.properties import format_properties, parse_properties
from tablecore.format.timeline import Timeline, timeline_dir
from tablecore.io import FileIO, LocalFileIO, file_io_for
from tablecore.read_planning import plan_snapshot
from tablecore.services import replicate_copy
from tablecore.services.replicate import replicate_storage
from tablecore.services.replicate_copy import LOCK_PATH
from tablecore.table_properties import read_config
from tablecore.tasks.read import read_plan_locally
from tests.conftest import FIXTURES
from tests.tablecore.oracle import hudi_snapshot, rows, spark_rows

pytestmark = [pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
DDL = "id int, part string, ts long, val string"
KINDS = [("COPY_ON_WRITE", 6), ("MERGE_ON_READ", 6), ("MERGE_ON_READ", 8)]
IGNORED = (".hoodie/.aux/", ".hoodie/.temp/")  # lakegate's own records (locks, heartbeats): not replicated


def create(spark: Any, path: str, table_type: str, version: int) -> Table:
    return Table.create(path, TableConfig(name="trips", record_key=["id"], ordering_field="ts",
                                          partition_fields=["part"], table_type=table_type, table_version=version),
                        spark=spark)


def batch(spark: Any, ids: range | list[int], ts: int, val: str) -> Any:
    return spark.createDataFrame([(i, f"p{i % 3}", ts, f"{val}{i}") for i in ids], DDL)


def local_rows(uri: str) -> list[dict[str, Any]]:
    """The latest snapshot through our reader's code, in this process (tablecore.tasks.read)."""
    io = file_io_for(uri)
    config = read_config(io, uri)
    timeline = Timeline.listed(io, config.table_version)
    return rows(read_plan_locally(io, plan_snapshot(io, timeline, config)))


def latest_write(uri: str) -> str | None:
    io = file_io_for(uri)
    latest = Timeline.listed(io, read_config(io, uri).table_version).latest_completed()
    return latest.time if latest else None


def listing(io: FileIO, *, data_only: bool = False) -> dict[str, int]:
    """Every file of a table (relative path -> size) but lakegate's own records."""
    prefix = io.base.rstrip("/") + "/"
    out = {f.path[len(prefix):]: f.size for f in io.list(io.base, recursive=True)}
    return {p: n for p, n in out.items() if not p.startswith(IGNORED) and not (data_only and p.startswith(".hoodie"))}


def timeline_files(uri: str) -> dict[str, int]:
    io = file_io_for(uri)
    return {f.name: f.size for f in io.list(io.join(timeline_dir(read_config(io, uri).table_version)))}


def play(spark: Any, t: Table, r: int, *, mor: bool) -> None:
    """Round ``r`` of the source's history: upserts with deletes, a compaction, an insert_overwrite, a clean, a
    clustering, an archival and the rollback of a write the replica already has."""
    if r == 0:
        t.upsert(batch(spark, range(12), 0, "a"))
    elif r in (1, 5, 8):
        with t.transaction() as tx:
            tx.upsert(batch(spark, [*range(r, r + 4), 20 + r], r, f"u{r}-"))
            tx.delete(batch(spark, [r + 5], 0, ""))
    elif r == 2:
        t.upsert(batch(spark, range(0, 12, 2), 2, "b"))
    elif r == 3:
        t.upsert(batch(spark, [1, 30], 3, "c"))
        if mor:
            assert t.compact() is not None
    elif r == 4:
        t.insert_overwrite(batch(spark, [0, 3, 40], 4, "o"))
    elif r == 6:
        assert t.clean(retain_commits=1) is not None
        t.upsert(batch(spark, [2, 50], 6, "d"))
    elif r == 7:
        assert t.cluster(sort_by=["ts"]) is not None
        t.clean(retain_commits=1)
    elif r == 9:
        latest = t.latest_instant()
        assert latest is not None
        t.rollback(latest)
        t.upsert(batch(spark, [4, 60], 9, "e"))
        assert t.archive(keep_min=2, keep_max=3) > 0


@pytest.mark.parametrize(("table_type", "version"), KINDS)
def test_ten_rounds_each_replicated_read_the_same_as_the_source(spark: Any, tmp_path: Path, table_type: str,
                                                                version: int) -> None:
    src, dst, lagging = str(tmp_path / "src"), str(tmp_path / "dst"), str(tmp_path / "lagging")
    t = create(spark, src, table_type, version)
    archived = 0
    for r in range(10):
        play(spark, t, r, mor=table_type == "MERGE_ON_READ")
        if r == 1:
            replicate(src, lagging)
        result = replicate(src, dst)
        assert result.instants, f"round {r} copied no instant"
        assert result.replicated_instant == t.latest_instant() == latest_write(dst)
        archived += result.instants_archived
        # the replica holds the source's files and timeline, byte counts equal (what cleans, rollbacks and the
        # archival removed is gone from it too), and reads the same
        assert listing(file_io_for(dst)) == listing(t.io), f"round {r}"
        assert local_rows(dst) == local_rows(src), f"round {r}"
        # nothing to do a second time
        again = replicate(src, dst)
        assert (again.instants, again.files_copied, again.files_deleted) == ((), 0, 0)
        if r in (4, 9):  # Spark's reader and hudi-rs on the replica
            expected = spark_rows(t.read())
            assert spark_rows(Table.open(dst, spark=spark).read()) == expected
            assert hudi_snapshot(dst) == expected
    assert archived > 0
    assert verify_table(dst).ok and verify_table(src).ok
    # a replica last brought up to date at round 1, and a new one, catch up over what the source cleaned, rolled
    # back and archived since (archived instants come from the source's archive)
    for behind in (lagging, str(tmp_path / "new")):
        assert replicate(src, behind).instants_archived > 0
        assert listing(file_io_for(behind)) == listing(t.io)
        assert local_rows(behind) == local_rows(src)
    assert hudi_snapshot(lagging) == local_rows(src)


HUDI_WRITTEN = [*(("hudi-v6", p.stem) for p in sorted((FIXTURES / "hudi-v6").glob("*.zip"))),
                *(("hudi-v8", p.stem) for p in sorted((FIXTURES / "hudi-v8").glob("cow_v8_*.zip")))]


def extract(folder: str, name: str, dest: Path) -> str:
    with zipfile.ZipFile(FIXTURES / folder / f"{name}.zip") as z:
        z.extractall(dest)
    props = [p for p in dest.rglob(".hoodie/hoodie.properties")
             if "__MACOSX" not in p.parts and "metadata" not in p.parts]
    assert len(props) == 1
    return str(props[0].parent.parent)


def ordered(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(found, key=lambda r: json.dumps(r, sort_keys=True, default=str))


@pytest.mark.parametrize(("folder", "name"), HUDI_WRITTEN)
def test_a_table_apache_hudi_wrote_replicates_and_reads_the_same(folder: str, name: str, tmp_path: Path) -> None:
    """Hudi 0.14/0.15 and 1.x tables (Avro plans, Java's log files, out-of-order completions on version 8)."""
    src, dst = extract(folder, name, tmp_path / "src"), str(tmp_path / "dst")
    result = replicate(src, dst)
    copied = [t for t, _ in result.instants]
    if folder == "hudi-v8":  # in completion order (an instant requested first may complete last)
        expected = json.loads((FIXTURES / folder / "expected" / f"{name}.json").read_text())
        done = {i["requested"]: i["completed"] for i in expected["completed_instants"]}
        assert [t for t in copied if t in done] == sorted(done, key=lambda t: done[t])
    else:
        assert copied == sorted(copied)
    assert listing(file_io_for(dst)) == {p: n for p, n in listing(file_io_for(src)).items() if ".DS_Store" not in p}
    assert ordered(local_rows(dst)) == ordered(local_rows(src))
    assert ordered(hudi_snapshot(dst)) == ordered(hudi_snapshot(src))
    assert replicate(src, dst).files_copied == 0


def test_a_metadata_table_is_not_replicated_and_the_replica_says_it_has_none(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replicate_copy, "WHOLE_COPY_MAX", 0)  # every file streamed: a temporary file, then a move
    monkeypatch.setattr(replicate_copy, "CHUNK", 1000)
    src, dst = extract("hudi-v8", "cow_v8_nonpartitioned", tmp_path / "src"), str(tmp_path / "dst")
    expected = json.loads((FIXTURES / "hudi-v8" / "expected" / "cow_v8_nonpartitioned.json").read_text())
    props = Path(src, ".hoodie", "hoodie.properties")
    values = parse_properties(props.read_text())
    props.write_text(format_properties({**values, "hoodie.table.metadata.partitions": "files"}))
    Path(src, ".hoodie", "metadata", ".hoodie").mkdir(parents=True)
    Path(src, ".hoodie", "metadata", ".hoodie", "hoodie.properties").write_text("hoodie.table.name=x\n")
    replicate(src, dst)
    assert not Path(dst, ".hoodie", "metadata").exists()
    assert parse_properties(Path(dst, ".hoodie", "hoodie.properties").read_text()) == values
    assert ordered(hudi_snapshot(dst)) == ordered(expected["snapshot"])
    assert replicate(src, dst).files_copied == 0


def test_a_running_replication_holds_the_target_and_a_dead_ones_lock_is_taken_over(tmp_path: Path) -> None:
    src, dst = extract("hudi-v6", "cow_nonpartitioned", tmp_path / "src"), tmp_path / "dst"
    lock = dst / LOCK_PATH
    lock.parent.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    for pid, alive in ((os.getpid(), True), (int(dead.stdout), False)):
        lock.write_text(json.dumps({"host": socket.gethostname(), "pid": pid, "time": time.time(), "token": "x"}))
        if alive:
            with pytest.raises(ReplicationError, match=f"another replication .* is running \\(pid {pid}"):
                replicate(src, str(dst))
            assert not (dst / ".hoodie" / "hoodie.properties").exists()
        else:
            assert replicate(src, str(dst)).replicated_instant is not None
    assert not lock.exists()  # released
    # what a replication SIGKILLed inside an atomic write leaves: its temporaries beside hoodie.properties and the lock
    leftovers = [dst / ".hoodie" / f".hoodie.properties.{'a' * 32}.tmp",
                 lock.parent / f".replicate.lock.{'b' * 32}.tmp", dst / replicate_copy.TEMP_DIR / ("c" * 32)]
    for leftover in leftovers:
        leftover.parent.mkdir(parents=True, exist_ok=True)
        leftover.write_text("partial")
    assert replicate(src, str(dst)).files_copied == 0
    assert not [p for p in leftovers if p.exists()]
    assert listing(file_io_for(str(dst))) == listing(file_io_for(src))


def test_version_9_is_not_replicated(tmp_path: Path) -> None:
    src = extract("hudi-v8", "cow_v9_txns_simple_meta", tmp_path / "src")
    with pytest.raises(ConfigError, match="version 9"):
        replicate(src, str(tmp_path / "dst"))
    assert not (tmp_path / "dst").exists()


def test_another_table_or_a_written_replica_is_refused_and_a_missing_source_not_found(spark: Any,
                                                                                      tmp_path: Path) -> None:
    src, dst, other = str(tmp_path / "src"), str(tmp_path / "dst"), str(tmp_path / "other")
    t = create(spark, src, "MERGE_ON_READ", 6)
    t.upsert(batch(spark, range(6), 0, "a"))
    Table.create(other, TableConfig(name="rides", record_key=["id"], ordering_field="ts"), spark=spark)
    before = listing(file_io_for(other))
    with pytest.raises(ReplicationError, match="another table"):
        replicate(src, other)
    assert listing(file_io_for(other)) == before  # nothing copied
    with pytest.raises(TableNotFoundError):
        replicate(str(tmp_path / "nothing"), dst)
    with pytest.raises(ReplicationError, match="the source itself"):
        replicate(src, f"file://{src}/")

    replicate(src, dst)
    written = Table.open(dst, spark=spark).upsert(batch(spark, [99], 1, "x")).instant
    t.upsert(batch(spark, [7], 1, "b"))
    with pytest.raises(ReplicationError, match=f"{written}.*written to"):
        replicate(src, dst)
    assert latest_write(dst) == written  # refused before copying anything


def test_a_replica_on_s3(spark: Any, tmp_path: Path, s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replicate_copy, "WHOLE_COPY_MAX", 1000)  # larger files streamed in chunks: one put each
    monkeypatch.setattr(replicate_copy, "CHUNK", 777)
    src, dst = str(tmp_path / "src"), s3.table_uri("replica")
    t = create(spark, src, "MERGE_ON_READ", 8)
    t.upsert(batch(spark, range(8), 0, "a"))
    first = replicate(src, dst)
    t.upsert(batch(spark, range(4, 10), 1, "b"))
    t.compact()
    second = replicate(src, dst)
    assert [a for _, a in second.instants] == ["deltacommit", "commit"]
    assert first.files_copied + second.files_copied > 0
    assert listing(file_io_for(dst)) == listing(t.io)
    assert local_rows(dst) == local_rows(src) == hudi_snapshot(dst)
    assert replicate(src, dst).files_copied == 0


# ---- stopped at every file operation, killed at random ------------------------------------------------------------

class Crash(BaseException):
    """Stands for the process dying (nothing in the replication catches it)."""


class CrashingIO(LocalFileIO):
    """A local FileIO that dies at its ``at``-th change of storage (a write, move, create or delete)."""

    def __init__(self, base: str, at: int | None) -> None:
        super().__init__(base)
        self.at, self.changes = at, 0

    def _change(self) -> None:
        if self.changes == self.at:
            self.at = None  # dead once
            raise Crash(self.changes)
        self.changes += 1

    def write_bytes(self, path: str, data: bytes) -> None:
        self._change()
        super().write_bytes(path, data)

    def create_if_absent(self, path: str, data: bytes) -> bool:
        self._change()
        return super().create_if_absent(path, data)

    def move(self, source: str, target: str) -> None:
        self._change()
        super().move(source, target)

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        self._change()
        super().delete(path, missing_ok=missing_ok)

    def delete_dir(self, directory: str) -> None:
        self._change()
        super().delete_dir(directory)


def newest(uri: str) -> str | None:
    """The write that completed last (version 8: by completion time; a staged commit published after a later
    write is newer than it)."""
    io = file_io_for(uri)
    writes = Timeline.listed(io, read_config(io, uri).table_version).completed_writes_by_completion()
    return writes[-1].time if writes else None


def record(model: dict[str | None, list[dict[str, Any]]], src: str) -> None:
    """The source's rows now: what a replica whose newest write is the source's newest must read."""
    model[newest(src)] = local_rows(src)


def test_a_replication_stopped_at_any_file_operation_leaves_a_consistent_replica(spark: Any, tmp_path: Path) -> None:
    src, before = str(tmp_path / "src"), str(tmp_path / "before")
    t = create(spark, src, "MERGE_ON_READ", 8)
    model: dict[str | None, list[dict[str, Any]]] = {}
    for step in (lambda: t.upsert(batch(spark, range(10), 0, "a")),
                 lambda: t.upsert(batch(spark, range(0, 10, 3), 1, "b")), t.compact,
                 lambda: t.upsert(batch(spark, [5, 11], 2, "rolled-back-later"))):
        step()
        record(model, src)
    staged = t.upsert(batch(spark, [0, 70], 3, "staged"), stage=True)
    replicate(src, before)  # the staged commit is pending: not copied
    # every kind of instant after the replica's state: the rollback of a write it has, a clean (of slices it has),
    # a write completed before the staged commit, which is published after it (version 8: copied in completion
    # order), writes with deletes, an archival (of a rollback, a clean, a compaction)
    t.rollback(t.latest_instant() or "")
    record(model, src)
    assert t.clean(retain_commits=1) is not None
    later = t.upsert(batch(spark, [2, 5, 8, 11], 4, "c")).instant
    record(model, src)
    for step in (staged.publish, lambda: t.delete(batch(spark, [4, 8], 0, "")),
                 lambda: t.upsert(batch(spark, [2, 40], 6, "f"))):
        step()
        record(model, src)
    assert t.archive(keep_min=2, keep_max=3) > 0
    counter = CrashingIO(str(tmp_path / "count"), None)
    shutil.copytree(before, counter.base)
    copied = [i for i, _ in replicate_storage(file_io_for(src), counter).instants]
    assert staged.instant < later and copied.index(staged.instant) > copied.index(later)
    print(f"{counter.changes} changes of storage")
    assert counter.changes > 40
    for at in range(counter.changes):
        dst = str(tmp_path / f"dst{at}")
        shutil.copytree(before, dst)
        with pytest.raises(Crash):
            replicate_storage(file_io_for(src), CrashingIO(dst, at))
        Path(dst, LOCK_PATH).unlink(missing_ok=True)  # a dead process's lock (taken over: the SIGKILL test)
        assert local_rows(dst) == model[newest(dst)], f"stopped at change {at}"
        assert replicate(src, dst).replicated_instant == t.latest_instant()
        assert listing(file_io_for(dst)) == listing(t.io), f"stopped at change {at}"
        shutil.rmtree(dst)


KILLED = """
import sys
from tablecore import replicate
print("go", flush=True)
replicate(sys.argv[1], sys.argv[2])
print("done", flush=True)
"""


def start_replication(src: str, dst: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, src, dst], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "go"
    return proc


@pytest.mark.slow
@pytest.mark.crash_trials
def test_a_replication_sigkilled_at_random_moments_leaves_a_consistent_replica_and_resumes(
        spark: Any, tmp_path: Path) -> None:
    """After each step of the source a replication process is SIGKILLed at a random moment, twice; the replica
    reads as the source did as of the replica's newest write, and the next replication (taking over the dead
    process's lock) brings it up to date."""
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    t = create(spark, src, "MERGE_ON_READ", 6)
    model: dict[str | None, list[dict[str, Any]]] = {}
    record(model, src)
    steps: list[Callable[[], object]] = [lambda i=i: t.upsert(batch(spark, range(i, i + 8), i, f"v{i}-"))
                                         for i in range(4)]
    steps += [t.compact, lambda: t.delete(batch(spark, [4, 8], 0, "")), lambda: t.clean(retain_commits=1),
              lambda: t.insert_overwrite(batch(spark, [0, 3, 40], 7, "o")),
              lambda: t.upsert(batch(spark, [1, 30], 8, "e")), lambda: t.rollback(t.latest_instant() or ""),
              lambda: t.upsert(batch(spark, [2, 50], 9, "f")), lambda: t.archive(keep_min=2, keep_max=3)]
    rng = random.Random(20261127)
    kills = interrupted = 0
    for step in steps:
        step()
        record(model, src)
        for _ in range(2):  # killed twice: the second run resumes what the first left
            proc = start_replication(src, dst)
            time.sleep(rng.uniform(0, 0.03))  # a replication of one step takes some 10-60 ms
            proc.send_signal(signal.SIGKILL)
            kills += proc.wait(timeout=120) == -signal.SIGKILL
            if Path(dst, ".hoodie", "hoodie.properties").exists():
                assert local_rows(dst) == model[newest(dst)]
            interrupted += Path(dst).exists() and listing(file_io_for(dst)) != listing(t.io)
        replicate(src, dst)
        assert listing(file_io_for(dst)) == listing(t.io)
    print(f"{kills} of {2 * len(steps)} replications killed, {interrupted} before they were done")
    assert kills >= len(steps) and interrupted >= 2, "the replications finished before they could be killed"
    expected = spark_rows(t.read())
    assert spark_rows(Table.open(dst, spark=spark).read()) == expected == hudi_snapshot(dst)
