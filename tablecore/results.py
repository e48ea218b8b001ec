"""Result types of table operations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CommitResult:
    """What one write did.

    Attributes:
        instant: the instant time of the commit.
        operation: the operation type as recorded in the commit (``UPSERT``, ``INSERT``...).
        inserted: records inserted (new keys; on merge-on-read tables with the bucket index, only those that start
            a new file group: rows appended to an existing group's log count as updated, as in Hudi).
        updated: records that replaced a stored record.
        deleted: stored records deleted.
        files_written: base files written.
        bytes_written: bytes of the base files written.
        replaced_file_groups: file groups replaced (insert_overwrite).
        input_rows: rows the write received, before deduplication by key (0 in results of older staged records).
    """

    instant: str
    operation: str
    inserted: int
    updated: int
    deleted: int
    files_written: int
    bytes_written: int
    replaced_file_groups: int = 0
    input_rows: int = 0


@dataclass(frozen=True)
class InstantInfo:
    """One entry of :meth:`Table.timeline`."""

    instant: str
    action: str
    state: str
    operation: str | None
    staged: bool = False
    completed: str | None = None  # the completion time (table versions 8 and 9: what incremental ranges compare)

    @property
    def time(self) -> str:
        """Alias of ``instant``."""
        return self.instant


@dataclass(frozen=True)
class CleanResult:
    """What one clean did.

    Attributes:
        instant: the clean instant.
        files_deleted: base and log files deleted.
        earliest_retained: the earliest write instant whose snapshot is still complete: time travel and incremental
            reads ending before it raise :class:`~tablecore.exceptions.CleanedRangeError`.
    """

    instant: str
    files_deleted: int
    earliest_retained: str


@dataclass(frozen=True)
class Problem:
    """One finding of :func:`tablecore.verify_table` / :meth:`Table.verify`.

    Attributes:
        kind: what was found: ``properties`` (``hoodie.properties`` does not parse, or differs from its backup),
            ``timeline`` (an instant file that does not parse, or a state file of a completed instant missing),
            ``missing_file``, ``size_mismatch`` (a file shorter or longer than its instant recorded),
            ``unreadable_base`` (not a Parquet file: magic or footer), ``row_count`` (footer and commit metadata
            disagree), ``log_damage`` (log bytes of a completed instant changed or not framed as blocks),
            ``torn_log_tail`` (bytes after the last committed block: a writer died mid-append; reads skip them),
            ``orphan_file`` (a data file no instant explains), ``half_written`` (a temporary file or scratch folder
            a writer left), ``unreadable_data`` (``deep``: rows that do not decode).
        severity: ``error`` — reads fail on it or would return other rows than were committed; ``warning`` —
            reads return the committed rows, but something needs cleaning up or repairing.
        path: the file (full path or URI in the table's storage), if the finding is about one.
        instant: the instant that wrote it (or whose timeline file it is), if known.
        message: what was expected, what was found and what to do.
    """

    kind: str
    severity: str
    path: str | None
    instant: str | None
    message: str

    def to_dict(self) -> dict[str, str | None]:
        """A JSON-able dict."""
        return {"kind": self.kind, "severity": self.severity, "path": self.path, "instant": self.instant,
                "message": self.message}

    def __str__(self) -> str:
        where = [f"file {self.path}"] if self.path else []
        where += [f"instant {self.instant}"] if self.instant else []
        return f"{self.severity}: {self.kind}: {self.message}" + (f" ({', '.join(where)})" if where else "")


@dataclass(frozen=True)
class IntegrityReport:
    """What :func:`tablecore.verify_table` / :meth:`Table.verify` found: every problem, none raised.

    Attributes:
        path: the table.
        problems: every finding (empty: the table is intact).
        files_checked: timeline and data files that were opened or checked against their recorded size.
        partitions: partitions of the latest snapshot.
        elapsed: seconds the check took.
        deep: whether every row was read as well.
    """

    path: str
    problems: tuple[Problem, ...]
    files_checked: int
    partitions: int
    elapsed: float
    deep: bool = False

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.problems

    @property
    def errors(self) -> tuple[Problem, ...]:
        """The problems of severity ``error`` (reads fail on them, or would return other rows)."""
        return tuple(p for p in self.problems if p.severity == "error")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (what ``lakegate table doctor --json`` prints)."""
        return {"path": self.path, "ok": self.ok, "deep": self.deep, "files_checked": self.files_checked,
                "partitions": self.partitions, "elapsed": round(self.elapsed, 3),
                "problems": [p.to_dict() for p in self.problems]}


@dataclass(frozen=True)
class ReplicationResult:
    """What one :func:`tablecore.replicate` run did.

    Attributes:
        source: the table replicated from.
        target: the table replicated into.
        instants: (instant time, action) of every instant copied, in the order it was completed in the target.
        files_copied: files written into the target (data, timeline, archive and table files).
        bytes_copied: their bytes.
        files_deleted: files deleted in the target (what cleans and rollbacks removed in the source, and timeline
            files of instants the source archived).
        instants_archived: instants that left the target's active timeline because the source archived them.
        replicated_instant: the newest completed write of the target afterwards (None: it has none): the target
            reads as the source did as of this instant.
        waiting_for: why the run stopped before copying everything completed in the source (None: it did not), e.g.
            a rollback the source is still running; the next run continues.
        elapsed: seconds the run took.
    """

    source: str
    target: str
    instants: tuple[tuple[str, str], ...]
    files_copied: int
    bytes_copied: int
    files_deleted: int
    instants_archived: int
    replicated_instant: str | None
    waiting_for: str | None = None
    elapsed: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (what ``lakegate table replicate --json`` prints)."""
        return {"source": self.source, "target": self.target,
                "instants": [{"instant": t, "action": a} for t, a in self.instants],
                "files_copied": self.files_copied, "bytes_copied": self.bytes_copied,
                "files_deleted": self.files_deleted, "instants_archived": self.instants_archived,
                "replicated_instant": self.replicated_instant, "waiting_for": self.waiting_for,
                "elapsed": round(self.elapsed, 3)}
