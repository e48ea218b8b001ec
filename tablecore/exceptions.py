"""The one exception tree of tablecore.

```
TableCoreError
 ├── ConfigError              bad TableConfig / hoodie.properties (incl. corrupt file, bad table name)
 ├── TableNotFoundError       the path holds no table
 ├── TableExistsError         create() on a path that already holds a table
 ├── SchemaEvolutionError     incoming schema is not a legal evolution of the table schema
 ├── InvalidInputError        bad rows or columns: null/empty record key, missing key/ordering/partition column
 ├── CommitConflictError      a concurrent commit touched the same file groups
 ├── LockTimeoutError         the commit lock could not be acquired in time
 ├── InstantNotFoundError     an instant that is not on the timeline (or not in the asked state)
 ├── CleanedRangeError        a time-travel or incremental read needs file slices a clean removed
 ├── StagedCommitError        publish/abort of a staged commit in the wrong state
 ├── RollbackError            an instant cannot be rolled back (newer writes depend on it, or it is savepointed)
 ├── ReplicationError         a replication target is another table, was written to, or is being replicated into
 ├── StorageError             the table's storage is misconfigured or unreachable (bad URI, unknown storage option,
 │   │                        no atomic create and no commit lock configured, lock database unreachable)
 │   └── StorageUnavailableError  object-store requests still failing when their retries ran out
 └── TableCorruptError        a table file is damaged or missing: a timeline file, hoodie.properties, commit metadata,
                              a base file or a log block that a completed instant wrote (names file and instant)
```
"""

from __future__ import annotations

import re


class TableCoreError(Exception):
    """Base class of every error raised by tablecore."""


class ConfigError(TableCoreError):
    """A table configuration (or hoodie.properties file) is invalid."""


class TableNotFoundError(TableCoreError):
    """The given path does not hold a table."""


class TableExistsError(TableCoreError):
    """A table already exists at the given path."""


class SchemaEvolutionError(TableCoreError):
    """The incoming schema is not a legal evolution of the table schema."""


class InvalidInputError(TableCoreError):
    """The input DataFrame cannot be written (missing columns, null or empty record keys, ...)."""


class CommitConflictError(TableCoreError):
    """A commit that completed meanwhile touched the same file groups."""


class LockTimeoutError(TableCoreError):
    """The table's commit lock could not be acquired in time (another writer holds it; retry later)."""


class InstantNotFoundError(TableCoreError):
    """The requested instant is not on the timeline."""


class StagedCommitError(TableCoreError):
    """A staged commit cannot be published or aborted in its current state."""


class RollbackError(TableCoreError):
    """An instant cannot be rolled back (newer writes depend on it, or it is savepointed)."""


class ReplicationError(TableCoreError):
    """A table cannot be replicated into the target (:func:`tablecore.replicate`): the target holds another table
    (name, record key, type or version differ), was written to (it has instants the source does not), or another
    replication into it is running. Nothing was copied when it is raised before the first instant."""


class StorageError(TableCoreError):
    """The table's storage cannot be used as configured: a malformed URI, an unknown storage option, options given
    to a backend that takes none, a write to storage without atomic creates and no commit lock
    (:mod:`tablecore.locks`), an unreachable lock database."""


class CleanedRangeError(TableCoreError):
    """A time-travel or incremental read needs file slices that a clean removed (or instants that were archived).

    Attributes:
        instant: the requested instant (``as_of``, or the end or start of an incremental range).
        earliest_readable: the earliest instant that can still be read.
    """

    def __init__(self, message: str, *, instant: str, earliest_readable: str) -> None:
        super().__init__(message)
        self.instant = instant
        self.earliest_readable = earliest_readable


class TableCorruptError(TableCoreError):
    """A file of the table is damaged or missing: a timeline file that does not parse, a ``hoodie.properties`` that
    cannot be read, a base file that does not open, a log block that a completed instant wrote but that is cut short,
    missing or fails its checksum.

    The table's committed data cannot be read correctly, so the read (or write, or table service) stops instead of
    returning older values. ``lakegate table doctor`` lists every such damage; ``lakegate table repair`` offers the
    ways out (roll the damaged instant back, restore a savepoint, recover ``hoodie.properties`` from its backup).

    Attributes:
        path: the damaged file (a path or URI), if known.
        instant: the instant that wrote it (or whose timeline file it is), if known.
        problem: what was expected and what was found.
    """

    def __init__(self, problem: str, *, path: str | None = None, instant: str | None = None) -> None:
        where = []
        if path is not None:
            where.append(f"file {path}")
        if instant is not None:
            where.append(f"instant {instant}")
        super().__init__(f"table corrupt: {problem}" + (f" ({', '.join(where)})" if where else ""))
        self.path = path
        self.instant = instant
        self.problem = problem


class StorageUnavailableError(StorageError):
    """Requests to the table's object store kept failing transiently (throttling, 5xx answers, dropped connections,
    timeouts) until their retry budget ran out (``lakegate_max_retries``, ``lakegate_retry_timeout``): the store is
    unreachable or failing. The operation that raised it did not complete; retry it when the store answers again."""


_CORRUPT_LINE = re.compile(r"TableCorruptError: (table corrupt: [^\n]*)")
_CORRUPT_MESSAGE = re.compile(
    r"^table corrupt: (?P<problem>.*?)(?: \((?:file (?P<path>.+?))?(?:, )?(?:instant (?P<instant>\d+))?\))?$")


def corrupt_error_in(exc: BaseException) -> TableCorruptError | None:
    """The :class:`TableCorruptError` an engine task raised, recovered from the engine's wrapper exception.

    Engines report a task's failure with their own exception types (Spark: ``PythonException``,
    ``Py4JJavaError``), whose text holds the task's traceback; this finds a ``TableCorruptError`` in it (or in the
    exception's causes) so that the caller can raise it as itself.
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, TableCorruptError):
            return cur
        match = _CORRUPT_LINE.search(str(cur))
        if match is not None:
            parsed = _CORRUPT_MESSAGE.match(match.group(1).strip())
            if parsed is not None:
                return TableCorruptError(parsed["problem"], path=parsed["path"], instant=parsed["instant"])
        cur = cur.__cause__ or cur.__context__
    return None
