"""The engine boundary: what the transaction, the services and ``Table`` ask of a compute engine.

tablecore's format layer, transaction and services know nothing of Spark; they call an :class:`Engine`. The Spark
engine (:class:`tablecore.spark.engine.SparkEngine`) is the one implementation today; a new engine (a local
Arrow engine, Spark Connect without JVM handles, Ray...) implements this protocol and nothing else changes.

Frames (the engine's DataFrames) are opaque here (``Any``): the transaction hands the user's frames to the engine
and returns the engine's frames to the user.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from tablecore.cdc_planning import CdcPlan
    from tablecore.config import TableConfig
    from tablecore.format.commit_metadata import WriteStat
    from tablecore.format.instant import Action
    from tablecore.format.timeline import Timeline
    from tablecore.io import FileIO
    from tablecore.read_planning import ReadPlan
    from tablecore.tasks.key_check import WrittenFile


class Operation(enum.StrEnum):
    """Write operations, named as Hudi records them in ``operationType``."""

    UPSERT = "UPSERT"
    INSERT = "INSERT"
    BULK_INSERT = "BULK_INSERT"
    DELETE = "DELETE"
    INSERT_OVERWRITE = "INSERT_OVERWRITE"
    INSERT_OVERWRITE_TABLE = "INSERT_OVERWRITE_TABLE"

    @property
    def is_replace(self) -> bool:
        """True for operations that complete as a replacecommit."""
        return self in (Operation.INSERT_OVERWRITE, Operation.INSERT_OVERWRITE_TABLE)


class RowObserver(Protocol):
    """Sees the rows of a write as the job that writes the files reads them, to compute something in the same
    pass (``DataFrame.observe``): no extra Spark job, no second read of the batch.

    Called with that job's input (a Spark DataFrame, on the Spark engine: the data columns — the batch's, before
    deduplication and before the cast to the table schema — plus the writer's own ``_lg_*`` columns) and the names
    of the data columns; must return a DataFrame of the same rows and columns. The write fails if the observed
    expressions fail.
    """

    def __call__(self, df: Any, data_columns: list[str]) -> Any: ...


@dataclass(frozen=True)
class WritePart:
    """One call of a transaction: a frame and what to do with its rows (``DELETE``: its keys)."""

    frame: Any
    operation: Operation
    observer: RowObserver | None = None


@dataclass(frozen=True)
class KeyCopies:
    """A key a snapshot read returns more than once in one partition (:meth:`Engine.duplicate_keys`)."""

    partition: str
    key: str
    copies: int
    file_ids: tuple[str, ...]  # the file groups holding the copies (one id: copies inside one group)


@dataclass(frozen=True)
class PlannedGroup:
    """A file group a planned write will write: a new base file version, or a new log file (``log_version``)."""

    partition: str
    file_id: str
    prev_commit: str
    log_version: int | None = None


class PlannedWrite(Protocol):
    """An engine's plan for one batch, made before the instant exists: the batch validated and deduplicated, its
    keys looked up in the index and every row assigned to a file group. :meth:`write` writes the files."""

    @property
    def action(self) -> Action:
        """The timeline action the write completes as (``commit``, ``deltacommit``, ``replacecommit``)."""

    @property
    def operation(self) -> Operation:
        """The operation recorded in the commit metadata."""

    @property
    def table_avro(self) -> dict[str, Any]:
        """The table's Avro schema after this write (evolved by the batch)."""

    @property
    def affected(self) -> frozenset[str]:
        """The partitions the batch holds rows of."""

    @property
    def groups(self) -> Sequence[PlannedGroup]:
        """The file groups the write will write."""

    @property
    def replaced(self) -> dict[str, tuple[str, ...]] | None:
        """Replace operations: partition -> file ids the write replaces."""

    @property
    def input_rows(self) -> int:
        """Rows of the batch before deduplication."""

    @property
    def base_instant(self) -> str | None:
        """The latest completed instant the plan was made against (conflict checks start after it)."""

    @property
    def pending_at_start(self) -> tuple[str, ...]:
        """Instants pending when the plan was made (a conflict if they complete on the same file groups)."""

    def write(self, instant: str) -> list[WriteStat]:
        """Write the files of every planned group as ``instant``, in the engine's tasks; their write stats."""

    def close(self) -> None:
        """Release what the plan holds (cached batches)."""


class Engine(Protocol):
    """A compute engine: writes file groups, executes read plans, counts rows, and runs per-slice tasks."""

    def plan_write(self, io: FileIO, config: TableConfig, timeline: Timeline, parts: Sequence[WritePart],
                   operation: Operation) -> PlannedWrite:
        """Validate, deduplicate, tag and plan ``parts`` (in call order: for a key, the last part's rows win).

        Raises:
            InvalidInputError: missing columns, null or empty keys, unwritable types.
            SchemaEvolutionError: the batch's schema is not a legal evolution of the table's.
        """

    def read(self, io: FileIO, plan: ReadPlan) -> Any:
        """The rows of a read plan as a frame (meta columns first)."""

    def read_cdc(self, io: FileIO, plan: CdcPlan, *, flatten: bool) -> Any:
        """The change rows of a CDC plan as a frame, in commit order (:mod:`tablecore.tasks.cdc`)."""

    def count(self, io: FileIO, plan: ReadPlan) -> int:
        """The exact number of rows :meth:`read` returns for a snapshot plan, without reading the rows."""

    def run_tasks(self, descriptors: pa.Table, task: Callable[[dict[str, Any], str], pa.Table]) -> list[WriteStat]:
        """Run ``task(descriptor row, write token)`` for every row of ``descriptors`` in parallel tasks; each returns
        write-stat rows (:data:`tablecore.tasks.write.STAT_SCHEMA`)."""

    def common_keys(self, io: FileIO, left: Sequence[WrittenFile], right: Sequence[WrittenFile], limit: int,
                    ) -> list[tuple[str, str]]:
        """Up to ``limit`` (partition, key) pairs written both into a file of ``left`` and into one of ``right``
        (:func:`tablecore.tasks.key_check.written_keys`), found in the engine's tasks: only the sample reaches the
        caller."""

    def duplicate_keys(self, io: FileIO, plan: ReadPlan, limit: int) -> tuple[int, list[KeyCopies]]:
        """The keys a read of ``plan`` returns more than once in one partition: how many there are, and up to
        ``limit`` of them (sorted by partition and key), found in the engine's tasks: only the count and the sample
        reach the caller."""

    def empty(self, avro_schema: str) -> Any:
        """A frame with no rows and the table's columns (meta columns first)."""

    def arrow_schema(self, frame_schema: Any) -> pa.Schema:
        """The Arrow schema of one of the engine's schema objects (what a user passes to ``Table.create``)."""

    def frame_schema(self, avro_schema: str, *, with_meta: bool) -> Any:
        """The engine's schema object for a table schema (Spark: a ``StructType``)."""


class MetadataOnlyEngine:
    """An engine for opening a table only to read its metadata (timeline, commit metadata, configuration) without
    starting a compute engine: ``Table.open(path, engine=MetadataOnlyEngine())``. Every job raises ConfigError."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            from tablecore.exceptions import ConfigError

            raise ConfigError(f"this table was opened for its metadata only: {name} needs a compute engine (open "
                              "it with a SparkSession)")

        return refuse
