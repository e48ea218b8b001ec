"""The timeline client on the driver: instant files, heartbeats, staged records, the commit lock and rollback of
pending instants. :class:`tablecore.transaction.Transaction` drives it; nothing else should.

```
start()      T.<action>.requested (create-if-absent: a unique instant)  + heartbeat
inflight()   T.inflight / T.<action>.inflight with the planned file groups
   ... executors write base files named ..._T.parquet ...
remove_unlisted_files()   delete files of T that no write stat names (failed task attempts)
complete()   under the commit lock: conflict check, then T.<action> written create-if-absent  <- the atomic publish
```

A failure anywhere before ``complete`` leaves nothing visible: readers only see files of completed instants. The
next writer (or ``Table.rollback_failed()``) rolls back pending instants whose writer is gone: it deletes their data
files first, then their instant files. Staged instants (write-audit-publish) are pending on purpose and are never
rolled back implicitly.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from tablecore.config import WRITE_VERSIONS
from tablecore.exceptions import CommitConflictError, ConfigError, StagedCommitError, StorageError
from tablecore.format.commit_avro import commit_metadata_to_avro
from tablecore.format.commit_metadata import CommitMetadata
from tablecore.format.file_naming import PARTITION_METAFILE, BaseFileName, partition_metadata_content
from tablecore.format.file_view import BaseFile, CdcFile, LogFile, list_table_files
from tablecore.format.instant import Action, Instant, State, next_instant_time
from tablecore.format.log_format import BlockType, LogFormatError, read_blocks
from tablecore.format.properties import java_date
from tablecore.format.timeline import AUX_DIR, HOODIE_DIR, Timeline, timeline_dir
from tablecore.io import FileIO
from tablecore.locks import check_writable, commit_lock, external_lock_url
from tablecore.metadata_table import MetadataTable, changes_of, forget_delta_commit, metadata_table_in_use
from tablecore.table_properties import read_config

logger = logging.getLogger(__name__)

KeyCheck = Callable[[Instant, CommitMetadata], None]  # raises CommitConflictError if a concurrent write clashes
HEARTBEAT_INTERVAL_S = 5.0
HEARTBEAT_EXPIRY_S = 120.0


@dataclass(frozen=True)
class StagedRecord:
    """What a staged (inflight, audited-before-publish) instant needs to be published by any process."""

    instant: str
    action: str
    operation: str
    base_instant: str | None
    pending_at_start: tuple[str, ...]
    metadata: dict[str, Any]
    result: dict[str, Any]

    def to_bytes(self) -> bytes:
        """JSON bytes."""
        return json.dumps(self.__dict__, indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> StagedRecord:
        """Parse JSON bytes."""
        d = json.loads(data.decode())
        d["pending_at_start"] = tuple(d.get("pending_at_start") or ())
        return cls(**d)


class Heartbeat:
    """A file that says 'the writer of instant T is alive': host, pid, refreshed by a daemon thread."""

    def __init__(self, io: FileIO, instant: str) -> None:
        self.io = io
        self.path = io.join(AUX_DIR, "heartbeat", instant)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _beat(self) -> None:
        body = {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}
        self.io.write_bytes(self.path, json.dumps(body).encode())

    def start(self) -> None:
        """Write the heartbeat and keep refreshing it."""
        self._beat()

        def run() -> None:
            while not self._stop.wait(HEARTBEAT_INTERVAL_S):
                try:
                    self._beat()
                except (OSError, StorageError):  # best effort: a store failing past its retries must not end the beats
                    logger.warning("could not refresh heartbeat %s", self.path)

        self._thread = threading.Thread(target=run, name=f"heartbeat-{self.path}", daemon=True)
        self._thread.start()

    def stop(self, *, delete: bool = True) -> None:
        """Stop refreshing (and delete the file, best effort).

        A heartbeat that cannot be deleted (the store failing past its retries) is logged, not raised: ``stop`` runs
        after a publish, which has taken effect and must not be reported as failed (a caller would write the batch
        again), and after a rollback, whose own error must not be replaced. What is left says only that this process
        was alive: nothing waits on the heartbeat of a completed or rolled-back instant, and another process takes
        it for dead once it is older than the expiry (or its pid is gone)."""
        self._stop.set()
        if delete:
            try:
                self.io.delete(self.path)
            except (OSError, StorageError) as e:
                logger.warning("could not delete heartbeat %s: %s", self.path, e)


def writer_alive(io: FileIO, instant: str) -> bool:
    """True if the heartbeat of ``instant`` says its writer still runs (same host: the pid is alive; else fresh).

    No heartbeat, or one that does not parse, is a dead writer. A heartbeat that cannot be read (the store failing
    past its retries: :class:`StorageError`; a local disk's I/O error: :class:`OSError`) is raised, never taken for a
    dead writer: callers roll back what they take for dead, and a live writer's instant must not be."""
    path = io.join(AUX_DIR, "heartbeat", instant)
    try:
        body = json.loads(io.read_bytes(path).decode())
    except (FileNotFoundError, ValueError):  # none, or not UTF-8 / not JSON (UnicodeDecodeError is a ValueError)
        return False
    if not isinstance(body, dict):
        return False
    if body.get("host") == socket.gethostname():
        pid = int(body.get("pid", -1))
        if pid == os.getpid():
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return bool(time.time() - float(body.get("time", 0)) < HEARTBEAT_EXPIRY_S)


COMPLETES_AS = {Action.COMPACTION: Action.COMMIT, Action.CLUSTERING: Action.REPLACE_COMMIT}
"""Pending actions whose completed instant has another action."""


class CommitProtocol:
    """Timeline transitions for one table."""

    def __init__(self, io: FileIO, *, lock_timeout_s: float = 60.0, table_version: int = 6) -> None:
        self.io = io
        self.lock_timeout_s = lock_timeout_s
        self.table_version = table_version
        # commit metadata of completed instants, shared by the timelines this client loads: a completed instant's
        # file never changes (a rollback deletes it, and instant times are never reused), so each is read once
        self._metadata: dict[str, CommitMetadata] = {}

    @property
    def timeline_dir(self) -> str:
        """The folder of the instant files (it follows ``table_version``)."""
        return timeline_dir(self.table_version)

    # timeline ----------------------------------------------------------------------------------------------------
    def load_timeline(self) -> Timeline:
        """List the timeline folder (``.hoodie/``, or ``.hoodie/timeline/`` from table version 8) and build the
        timeline."""
        timeline = Timeline.listed(self.io, self.table_version)
        completed = {i.time for i in timeline.files if i.is_completed}
        for gone in set(self._metadata) - completed:  # rolled back or archived since
            self._metadata.pop(gone, None)
        return replace(timeline, _meta_cache=self._metadata)

    def _instant_path(self, instant: Instant) -> str:
        return self.io.join(self.timeline_dir, instant.file_name)

    def encode_commit(self, meta: CommitMetadata) -> bytes:
        """Commit metadata as this table version stores it: JSON (6) or Avro (8)."""
        return commit_metadata_to_avro(meta) if self.table_version >= 8 else meta.to_bytes()

    # lifecycle ---------------------------------------------------------------------------------------------------
    def start(self, action: Action, content: bytes = b"") -> tuple[Instant, Heartbeat]:
        """Create a new, unique requested instant (with ``content``, e.g. a service plan) and start its heartbeat.

        Raises:
            StorageError: the storage cannot create files atomically and no lock is configured
                (:func:`tablecore.locks.check_writable`); nothing is written.
        """
        check_writable(self.io)
        self.check_version()
        if external_lock_url() is not None and not self.io.supports_atomic_create():
            with commit_lock(self.io, self.lock_timeout_s):  # create-if-absent is check-then-write here
                return self._start(action, content)
        return self._start(action, content)

    def check_version(self) -> None:
        """Raise :class:`ConfigError` if lakegate does not write this table version (it reads 6, 8 and 9)."""
        if self.table_version not in WRITE_VERSIONS:
            raise ConfigError(f"this table is Hudi table version {self.table_version}; lakegate reads it but writes "
                              f"versions {' and '.join(map(str, WRITE_VERSIONS))} only: nothing was written")

    def _start(self, action: Action, content: bytes) -> tuple[Instant, Heartbeat]:
        while True:
            timeline = self.load_timeline()
            time_ = next_instant_time(timeline.last_instant_time())
            requested = Instant(time_, action, State.REQUESTED)
            hb = Heartbeat(self.io, time_)
            hb.start()  # before the requested file: a pending instant always has a live heartbeat while running
            if self.io.create_if_absent(self._instant_path(requested), content):
                logger.info("requested %s %s", action, time_)
                return requested, hb
            hb.stop()
            time.sleep(0.002)

    def inflight(self, instant: Instant, placeholder: CommitMetadata) -> Instant:
        """Move a requested instant to inflight, recording the planned partitions and file groups."""
        inflight = instant.with_state(State.INFLIGHT)
        self.io.write_bytes(self._instant_path(inflight), self.encode_commit(placeholder))
        logger.info("inflight %s %s", instant.action, instant.time)
        return inflight

    def transition(self, instant: Instant, state: State, content: bytes = b"") -> Instant:
        """Write the file of ``instant`` in a pending ``state`` (services: their Avro plans); completed files are
        written by :meth:`complete` only."""
        if state is State.COMPLETED:
            raise ValueError("a completed instant is published with complete(), under the commit lock")
        moved = instant.with_state(state)
        self.io.write_bytes(self._instant_path(moved), content)
        logger.info("%s %s %s", state, instant.action, instant.time)
        return moved

    def ensure_partition_metadata(self, partitions: set[str], instant: str, depth_of: dict[str, int]) -> None:
        """Write ``.hoodie_partition_metadata`` into every partition that lacks it."""
        saved_on = java_date()
        for p in sorted(partitions):
            path = self.io.join(p, PARTITION_METAFILE)
            if not self.io.exists(path):
                self.io.create_if_absent(path, partition_metadata_content(instant, depth_of.get(p, 0), saved_on))

    def remove_unlisted_files(self, instant: str, partitions: set[str], keep: set[str]) -> int:
        """Delete base files and CDC log files of ``instant`` in ``partitions`` that no write stat names (failed task
        attempts)."""
        listed = list_table_files(self.io, partitions)
        files: list[BaseFile | CdcFile] = [*listed.bases, *listed.cdc]
        stray = [f for f in files if f.instant == instant and f.name not in keep]
        for f in stray:
            self.io.delete(f.path)
        removed = len(stray)
        if removed:
            logger.info("removed %d files of failed task attempts of %s", removed, instant)
        return removed

    def remove_unlisted_logs(self, instant: str, planned: set[tuple[str, str, str, int]], keep: set[str]) -> int:
        """Delete log files that failed task attempts of ``instant`` left in the planned (partition, fileId, base
        instant) slices: at the planned version or a later one (a task bumps the version when a concurrent writer
        took the name), named by no write stat, and holding blocks of ``instant`` only — never a log of another
        writer, which may sit at the same version under another write token."""
        if not planned:
            return 0
        first = {(p, fid, base): v for p, fid, base, v in planned}
        candidates = [lg for lg in list_table_files(self.io, {p for p, *_ in planned}).logs
                      if lg.name not in keep and lg.version >= first.get((lg.partition, lg.file_id, lg.base_instant),
                                                                         1 << 62)]
        stray = self.logs_with_blocks_of(instant, candidates)[0] if candidates else []
        for lg in stray:
            self.io.delete(lg.path)
        if stray:
            logger.info("removed %d log files of failed task attempts", len(stray))
        return len(stray)

    def remove_temp(self, instant: str) -> None:
        """Delete the instant's scratch folder ``.hoodie/.temp/<instant>`` (half-written log files)."""
        self.io.delete_dir(self.io.join(HOODIE_DIR, ".temp", instant))

    def logs_with_blocks_of(self, instant: str, logs: Iterable[LogFile]) -> tuple[list[LogFile], list[LogFile]]:
        """Of ``logs``: (those whose every data block belongs to ``instant`` — what a write of it appended — plus
        empty ones, those holding its blocks among blocks of other instants)."""
        only: list[LogFile] = []
        mixed: list[LogFile] = []
        for lg in logs:
            try:
                blocks = read_blocks(self.io.read_bytes(lg.path), tolerate_truncated_tail=True)
            except (OSError, LogFormatError):
                continue
            instants = {b.instant for b in blocks if b.block_type is not BlockType.COMMAND}
            if instants == {instant} or (not blocks and lg.size == 0):
                only.append(lg)
            elif instant in instants:
                mixed.append(lg)
        return only, mixed

    def read_plan(self, instant: Instant) -> bytes:
        """The plan of a pending service instant: the content of its inflight file, else of its requested file
        (b"" when both are empty or gone)."""
        for state in (State.INFLIGHT, State.REQUESTED):
            path = self._instant_path(instant.with_state(state))
            if self.io.exists(path) and (data := self.io.read_bytes(path)):
                return data
        return b""

    def complete(self, instant: Instant, content: bytes, *, touched: set[tuple[str, str]] | None,
                 base_instant: str | None, pending_at_start: tuple[str, ...],
                 key_check: KeyCheck | None = None, metadata: CommitMetadata | None = None) -> Instant:
        """Write the completed instant file create-if-absent, under the commit lock, after checking that no write
        completed since ``base_instant`` (or pending at its start) touched a file group of ``touched`` (None: no
        check) and, with ``key_check``, handing every such write's metadata to it (it raises on a clash). Called by
        :meth:`tablecore.transaction.Transaction.publish` only.

        On a table whose metadata table lakegate maintains (:mod:`tablecore.metadata_table`), the instant's changes
        (from ``metadata``, a write's, or from ``content``, a service's) are first recorded there as a delta commit
        of the same instant, completed just before this one."""
        # a compaction completes as a commit, a clustering (version 8) as a replacecommit
        action = COMPLETES_AS.get(instant.action, instant.action)
        with commit_lock(self.io, self.lock_timeout_s):
            timeline = self.load_timeline()
            for other in timeline.completed_writes():
                if other.time == instant.time and other.action is action:
                    raise StagedCommitError(f"instant {instant.time} is already completed")
                newer = (base_instant is None or other.time > base_instant) or other.time in pending_at_start
                if not newer or touched is None:
                    continue
                theirs = timeline.metadata(other)
                overlap = touched & theirs.touched_file_ids()
                if overlap:
                    p, fid = sorted(overlap)[0]
                    raise CommitConflictError(
                        f"instant {instant.time} conflicts with {other.action} {other.time}, completed meanwhile: "
                        f"both write file group {fid} in partition {p!r} ({len(overlap)} file groups overlap)")
                if key_check is not None:
                    key_check(other, theirs)
            # after every instant and completion so far (the lock orders publishes)
            completion = timeline.next_completion_time() if self.table_version >= 8 else None
            if completion is not None:
                config = read_config(self.io, self.io.uri)
                if metadata_table_in_use(config):
                    MetadataTable(self.io, config).commit(instant.time, completion,
                                                          changes_of(action, metadata, content), timeline,
                                                          action=action, moved=metadata)
                    completion = next_instant_time(completion)
            done = Instant(instant.time, action, State.COMPLETED, completion)
            if not self.io.create_if_absent(self._instant_path(done), content):
                raise StagedCommitError(f"instant {instant.time} was completed by another process")
        logger.info("completed %s %s%s", instant.action, instant.time, f" at {completion}" if completion else "")
        return done

    # rollback ----------------------------------------------------------------------------------------------------
    def rollback_pending(self, instant: Instant, *, partitions: set[str] | None = None) -> int:
        """Delete everything a pending instant wrote: data files first, then its instant files."""
        timeline = self.load_timeline()
        if timeline.is_completed_write(instant.time):
            raise StagedCommitError(f"instant {instant.time} is completed; it cannot be rolled back as pending")
        if partitions is None:
            partitions = self.planned_partitions(instant)
        listed = list_table_files(self.io, sorted(partitions))
        files: list[BaseFile | CdcFile] = [*listed.bases, *listed.cdc]
        written = [f.path for f in files if f.instant == instant.time]
        if instant.action is Action.DELTA_COMMIT:
            groups = self._planned_groups(instant)
            logs = [lg for lg in listed.logs if groups is None or lg.file_id in groups]
            written += [lg.path for lg in self.logs_with_blocks_of(instant.time, logs)[0]]
        for path in written:
            self.io.delete(path)
        removed = len(written)
        self.remove_temp(instant.time)
        self.forget_instant(instant)
        logger.info("rolled back pending %s %s (%d files)", instant.action, instant.time, removed)
        return removed

    def _planned_groups(self, instant: Instant) -> set[str] | None:
        inflight = self._instant_path(instant.with_state(State.INFLIGHT))
        try:
            meta = CommitMetadata.from_bytes(self.io.read_bytes(inflight))
        except (OSError, ValueError):
            return None
        ids = {s.file_id for s in meta.write_stats if s.file_id}
        return ids or None

    def delete_instant_file(self, instant: Instant) -> None:
        """Delete the timeline file of ``instant`` in its state."""
        self.io.delete(self._instant_path(instant))

    def forget_instant(self, instant: Instant) -> None:
        """Delete the pending state files of ``instant`` (newest first), then its delta commit in the metadata table,
        its staged record and heartbeat."""
        for state in (State.COMPLETED, State.INFLIGHT, State.REQUESTED):  # newest state first
            if instant.action in (Action.COMMIT, Action.COMPACTION) and state is State.COMPLETED:
                continue  # never delete a completed commit implicitly (a compaction completes as one)
            if state is State.COMPLETED and self.table_version >= 8:
                for done in self.load_timeline().files:  # its name holds the completion time
                    if done.time == instant.time and done.action is instant.action and done.is_completed:
                        self.io.delete(self._instant_path(done))
                continue
            self.io.delete(self._instant_path(instant.with_state(state)))
        if self.table_version >= 8:  # once the instant is invalid: its delta commit in the metadata table, if any
            forget_delta_commit(self.io, instant.time)
        self.io.delete(self.io.join(AUX_DIR, "staged", f"{instant.time}.json"))
        self.io.delete(self.io.join(AUX_DIR, "heartbeat", instant.time))
        self.remove_temp(instant.time)

    def planned_partitions(self, instant: Instant) -> set[str]:
        """The partitions a pending instant planned to write (from its inflight file), else every partition."""
        inflight = self._instant_path(instant.with_state(State.INFLIGHT))
        try:
            meta = CommitMetadata.from_bytes(self.io.read_bytes(inflight))
            parts = meta.partitions()
            if parts:
                return parts
        except (OSError, ValueError):
            pass
        return self.all_partitions()

    def all_partitions(self) -> set[str]:
        """Every directory (relative path) below the base that holds a base file or partition marker."""
        out: set[str] = set()
        prefix = self.io.base + "/"
        for f in self.io.list(self.io.base, recursive=True):
            rel = f.path[len(prefix):] if f.path.startswith(prefix) else f.path
            if rel.startswith(".hoodie/"):
                continue
            if f.name == PARTITION_METAFILE or BaseFileName.parse(f.name):
                out.add(rel.rsplit("/", 1)[0] if "/" in rel else "")
        return out

    # staged records ----------------------------------------------------------------------------------------------
    def staged_path(self, instant: str) -> str:
        """Where the staged record of ``instant`` lives."""
        return self.io.join(AUX_DIR, "staged", f"{instant}.json")

    def save_staged(self, record: StagedRecord) -> None:
        """Persist a staged record."""
        self.io.write_bytes(self.staged_path(record.instant), record.to_bytes())

    def load_staged(self, instant: str) -> StagedRecord | None:
        """Load the staged record of ``instant`` if there is one."""
        path = self.staged_path(instant)
        if not self.io.exists(path):
            return None
        return StagedRecord.from_bytes(self.io.read_bytes(path))

    def staged_instants(self) -> list[str]:
        """Instants with a staged record, oldest first."""
        names = [f.name for f in self.io.list(self.io.join(AUX_DIR, "staged"))]
        return sorted(n[: -len(".json")] for n in names if n.endswith(".json"))

    def drop_staged(self, instant: str) -> None:
        """Remove a staged record."""
        self.io.delete(self.staged_path(instant))
