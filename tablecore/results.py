"""Result types of table operations."""

from __future__ import annotations

from dataclasses import dataclass


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
