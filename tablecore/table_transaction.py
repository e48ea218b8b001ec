"""``TableTransaction``: several writes of one table as one commit, in the style of pyiceberg's
``Table.transaction()`` and delta-rs's commit builder.

```python
with table.transaction() as tx:      # one instant, published when the block ends without an exception
    tx.upsert(df)
    tx.delete(keys)                  # for a key in both, the later call wins: it is deleted
staged = table.transaction().upsert(df).stage()   # written, not published: audit, then publish() or abort()
```

What one transaction can hold: any mix of ``upsert`` and ``delete`` calls (recorded as an ``UPSERT``, or ``DELETE``
when there are only deletes), or calls of one other operation (``insert``, ``bulk_insert``, ``insert_overwrite``,
``insert_overwrite_table``). Nothing is written before :meth:`TableTransaction.commit` or
:meth:`TableTransaction.stage`; the write itself is :func:`tablecore.transaction.write_batch`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from tablecore.engine import Operation, WritePart
from tablecore.exceptions import InvalidInputError, StagedCommitError
from tablecore.staged import StagedCommit
from tablecore.transaction import write_batch

if TYPE_CHECKING:
    from types import TracebackType

    import pyarrow as pa

    from tablecore.context import TableContext
    from tablecore.engine import RowObserver
    from tablecore.results import CommitResult
    from tablecore.spark.frames import DataFrame

logger = logging.getLogger(__name__)

_MIXABLE = frozenset({Operation.UPSERT, Operation.DELETE})


class TableTransaction:
    """Collects the writes of one commit. Use it as a context manager (commits on a clean exit, discards the
    collected writes on an exception) or call :meth:`commit` / :meth:`stage` yourself.

    Args:
        ctx: the table.
        extra_metadata: key/values recorded in the commit's ``extraMetadata`` (checkpoints, audit records).
        before_write: called before the write (the table's recovery of failed writers).
        after_commit: called after a published commit (inline compaction).
    """

    def __init__(self, ctx: TableContext, *, extra_metadata: dict[str, str] | None = None,
                 before_write: Callable[[], object] | None = None,
                 after_commit: Callable[[], object] | None = None) -> None:
        self.ctx = ctx
        self.extra_metadata = dict(extra_metadata or {})
        self._parts: list[WritePart] = []
        self._closed = False
        self._before_write = before_write
        self._after_commit = after_commit

    # ---- the writes ---------------------------------------------------------------------------------------------
    def upsert(self, df: DataFrame | pa.Table, *, observer: RowObserver | None = None) -> TableTransaction:
        """Insert new keys and update existing ones (deduplicated by the ordering field; a ``pyarrow.Table``: in
        this process, without Spark; :mod:`tablecore.arrow_upsert`).

        ``observer`` sees the rows in the job that writes the files (see
        :class:`~tablecore.engine.RowObserver`); a transaction takes one.
        """
        return self._add(df, Operation.UPSERT, observer)

    def insert(self, df: DataFrame, *, observer: RowObserver | None = None) -> TableTransaction:
        """Insert records without an index lookup (existing keys are not updated; small files are filled first)."""
        return self._add(df, Operation.INSERT, observer)

    def bulk_insert(self, df: DataFrame | pa.Table, *, observer: RowObserver | None = None) -> TableTransaction:
        """Write records into new file groups sorted by key, without index lookup or small-file handling (a
        ``pyarrow.Table``: in this process, without Spark; :mod:`tablecore.arrow_writer`)."""
        return self._add(df, Operation.BULK_INSERT, observer)

    def delete(self, keys: DataFrame) -> TableTransaction:
        """Delete the records whose keys ``keys`` holds (record key and partition columns)."""
        return self._add(keys, Operation.DELETE, None)

    def insert_overwrite(self, df: DataFrame, *, observer: RowObserver | None = None) -> TableTransaction:
        """Replace the partitions present in ``df`` with its rows (a replacecommit)."""
        return self._add(df, Operation.INSERT_OVERWRITE, observer)

    def insert_overwrite_table(self, df: DataFrame, *, observer: RowObserver | None = None) -> TableTransaction:
        """Replace the whole table with the rows of ``df`` (a replacecommit)."""
        return self._add(df, Operation.INSERT_OVERWRITE_TABLE, observer)

    def write(self, operation: Operation, df: DataFrame | pa.Table, *,
              observer: RowObserver | None = None) -> TableTransaction:
        """Add a write of ``operation`` (the typed form of the methods above)."""
        return self._add(df, operation, observer)

    def _add(self, df: DataFrame | pa.Table, operation: Operation, observer: RowObserver | None) -> TableTransaction:
        if self._closed:
            raise StagedCommitError("this transaction was already committed, staged or discarded")
        ops = {p.operation for p in self._parts} | {operation}
        if len(ops) > 1 and not ops <= _MIXABLE:
            held = ", ".join(sorted(o.value for o in ops))
            raise InvalidInputError(f"one transaction holds upserts and deletes, or writes of one other operation; "
                                    f"not {held}: commit them in separate transactions")
        self._parts.append(WritePart(df, operation, observer))
        return self

    @property
    def operation(self) -> Operation | None:
        """The operation the commit records (None: nothing added yet)."""
        ops = {p.operation for p in self._parts}
        if not ops:
            return None
        if ops <= _MIXABLE:
            return Operation.UPSERT if Operation.UPSERT in ops else Operation.DELETE
        return next(iter(ops))

    # ---- the end ------------------------------------------------------------------------------------------------
    def commit(self, extra_metadata: dict[str, str] | None = None) -> CommitResult | None:
        """Write and publish everything added as one instant; None if nothing was added."""
        operation = self._close()
        if operation is None:
            return None
        outcome = write_batch(self.ctx, self._parts, operation, extra_metadata=self._extra(extra_metadata))
        if self._after_commit is not None:
            self._after_commit()
        return outcome.result

    def stage(self, extra_metadata: dict[str, str] | None = None) -> StagedCommit:
        """Write everything added as one instant and leave it unpublished, for an audit (write-audit-publish).

        Raises:
            InvalidInputError: nothing was added.
        """
        operation = self._close()
        if operation is None:
            raise InvalidInputError("nothing to stage: the transaction holds no writes")
        outcome = write_batch(self.ctx, self._parts, operation, stage=True,
                              extra_metadata=self._extra(extra_metadata))
        assert outcome.staged is not None
        return StagedCommit(self.ctx, outcome.staged)

    def discard(self) -> None:
        """Forget the writes added so far (nothing was written)."""
        self._closed = True
        self._parts.clear()

    def _close(self) -> Operation | None:
        if self._closed:
            raise StagedCommitError("this transaction was already committed, staged or discarded")
        self._closed = True
        operation = self.operation
        if operation is not None and self._before_write is not None:
            self._before_write()
        return operation

    def _extra(self, extra: dict[str, str] | None) -> dict[str, str]:
        return {**self.extra_metadata, **(extra or {})}

    def __enter__(self) -> TableTransaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._closed:
            return
        if exc is not None:
            self.discard()
            return
        self.commit()

    def __repr__(self) -> str:
        return f"TableTransaction(parts={[p.operation.value for p in self._parts]})"
