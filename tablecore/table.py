"""``Table``: the facade of tablecore — create/open, writes, reads, staged commits and the timeline.

Example:
    ```python
    from tablecore import Table, TableConfig
    t = Table.create("/data/trips", TableConfig(name="trips", record_key=["uuid"], ordering_field="ts",
                     partition_fields=["dt"]), spark=spark)
    r = t.upsert(df)                       # CommitResult
    t.read(); t.read(as_of=r.instant); t.read_changes(start=r.instant)
    s = t.upsert(df2, stage=True)          # StagedCommit: audit s.changes(), then s.publish() or s.abort()
    ```
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from tablecore.arrow_reader import read_plan_arrow
from tablecore.cdc_planning import plan_cdc
from tablecore.commit import CommitProtocol
from tablecore.config import WRITE_VERSIONS, TableConfig
from tablecore.context import TableContext
from tablecore.engine import Operation
from tablecore.exceptions import ConfigError, InstantNotFoundError, TableExistsError
from tablecore.format.avro_schema import arrow_to_avro, canonical_json
from tablecore.format.commit_metadata import CommitMetadata
from tablecore.format.instant import Action, next_instant_time
from tablecore.format.timeline import HOODIE_DIR, Timeline
from tablecore.io import FileIO, file_io_for
from tablecore.metadata_table import create_metadata_table, split_for_create
from tablecore.read_planning import plan_incremental, plan_snapshot
from tablecore.results import CleanResult, CommitResult, InstantInfo, IntegrityReport
from tablecore.services.archive import archive, check_keep
from tablecore.services.clean import CleanPolicy, clean
from tablecore.services.clustering import ClusteringOptions, cluster
from tablecore.services.compaction import CompactionSelection, compact
from tablecore.services.recovery import rollback_failed
from tablecore.services.rollback import RollbackResult, resume_rollbacks, rollback_instant
from tablecore.services.savepoint import delete_savepoint, restore, savepoint, savepoints
from tablecore.services.upgrade import UpgradePlan, upgrade_table
from tablecore.services.verify import verify
from tablecore.staged import StagedCommit
from tablecore.table_properties import PROPERTIES, read_config
from tablecore.table_transaction import TableTransaction

if TYPE_CHECKING:
    import pyarrow as pa

    from tablecore.engine import Engine, RowObserver
    from tablecore.spark.frames import DataFrame, SparkSession, StructType

logger = logging.getLogger(__name__)

__all__ = ["PROPERTIES", "Table", "describe"]


def _spark_engine(spark: SparkSession | None) -> Engine:
    """The default engine: Spark, on ``spark`` or the active session."""
    from tablecore.spark.engine import SparkEngine, active_session

    return SparkEngine(active_session(spark))


class Table:
    """A table in the Apache Hudi (v6) format, written and read through an engine (Spark by default).

    Writes go through a transaction (:meth:`transaction`; the write methods here are one-call transactions); the
    table services run on the table's :class:`~tablecore.context.TableContext`.
    """

    def __init__(self, path: str, config: TableConfig, engine: Engine, io: FileIO) -> None:
        self.path = path
        self.ctx = TableContext(config, io, CommitProtocol(io, table_version=config.table_version), engine)

    @property
    def config(self) -> TableConfig:
        """The table configuration (``hoodie.properties``)."""
        return self.ctx.config

    @property
    def io(self) -> FileIO:
        """The table's storage."""
        return self.ctx.io

    @property
    def protocol(self) -> CommitProtocol:
        """The timeline client (instant files, staged records, the commit lock)."""
        return self.ctx.meta

    @property
    def engine(self) -> Engine:
        """The compute engine."""
        return self.ctx.engine

    @property
    def spark(self) -> SparkSession:
        """The SparkSession of the Spark engine.

        Raises:
            ConfigError: the table's engine is not Spark.
        """
        session = getattr(self.ctx.engine, "spark", None)
        if session is None:
            raise ConfigError("this table's engine is not Spark")
        return cast("SparkSession", session)

    # ---- lifecycle ----------------------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str, config: TableConfig, *, spark: SparkSession | None = None,
               schema: StructType | None = None, engine: Engine | None = None,
               storage_options: Mapping[str, str] | None = None) -> Table:
        """Create a new, empty table at ``path``.

        Args:
            path: the table's base path or URI.
            config: the table configuration.
            spark: the SparkSession (default: the active one).
            schema: optional data schema, recorded as ``hoodie.table.create.schema``.
            engine: an engine other than Spark on ``spark``.
            storage_options: settings of the table's storage over its environment (for ``s3://``: ``aws_region``,
                ``aws_endpoint_url``, ``aws_allow_http``, ``aws_access_key_id``... see ``docs/storage.md``).

        Raises:
            TableExistsError: a table already exists at ``path``.
            StorageError: bad storage options.
        """
        io = file_io_for(path, storage_options)
        props_path = io.join(PROPERTIES)
        if io.exists(props_path):
            raise TableExistsError(f"a table already exists at {path}")
        engine = engine or _spark_engine(spark)
        if schema is not None:
            avro = arrow_to_avro(engine.arrow_schema(schema), config.name)
            config = config.model_copy(update={"create_schema": canonical_json(avro)})
        if config.table_version not in WRITE_VERSIONS or not config.populate_meta_fields:
            raise ConfigError(f"lakegate creates tables of version {' or '.join(map(str, WRITE_VERSIONS))} with meta "
                              f"fields, not version {config.table_version}"
                              f"{'' if config.populate_meta_fields else ' without meta fields'}")
        metadata, config = split_for_create(config)
        timeline = ("timeline/history",) if config.table_version >= 8 else ("archived",)
        for d in (".aux/.bootstrap/.partitions", ".aux/.bootstrap/.fileids", ".temp", ".schema", *timeline):
            io.makedirs(io.join(HOODIE_DIR, d))
        if not io.create_if_absent(props_path, config.to_properties_text().encode()):
            raise TableExistsError(f"a table already exists at {path}")
        if metadata:  # an empty metadata table, then hoodie.properties lists it (docs/metadata-table.md)
            create_metadata_table(io, config, metadata, next_instant_time(None))
            config = config.model_copy(update={"metadata_partitions": metadata, "metadata_by_lakegate": True})
        logger.info("created table %s at %s", config.name, path)
        return cls(path, config, engine, io)

    @classmethod
    def open(cls, path: str, *, spark: SparkSession | None = None, engine: Engine | None = None,
             storage_options: Mapping[str, str] | None = None) -> Table:
        """Open an existing table (ours or one written by Apache Hudi); ``storage_options`` as in :meth:`create`.

        Raises:
            TableNotFoundError: no ``.hoodie/hoodie.properties`` (nor its backup) at ``path``.
            TableCorruptError: ``hoodie.properties`` is damaged and has no intact backup
                (:mod:`tablecore.table_properties`).
            ConfigError: ``hoodie.properties`` describes an unsupported table.
            StorageError: bad storage options.
        """
        io = file_io_for(path, storage_options)
        config = read_config(io, path)
        return cls(path, config, engine or _spark_engine(spark), io)

    @property
    def name(self) -> str:
        """The table name."""
        return self.config.name

    @property
    def uri(self) -> str:
        """An absolute URI of the table base (what hudi-rs and Spark are given)."""
        return self.io.table_uri()

    def schema(self) -> StructType | None:
        """The data schema (no meta columns) as of the latest commit, or None before the first write."""
        avro = self.protocol.load_timeline().latest_schema() or self.config.create_schema
        return cast("StructType", self.engine.frame_schema(avro, with_meta=False)) if avro else None

    # ---- writes -------------------------------------------------------------------------------------------------
    def transaction(self, *, extra_metadata: dict[str, str] | None = None) -> TableTransaction:
        """A transaction: several writes as one commit (``with table.transaction() as tx: tx.upsert(df);
        tx.delete(keys)``), or a staged commit (``tx.stage()``). See :mod:`tablecore.table_transaction`."""
        return TableTransaction(self.ctx, extra_metadata=extra_metadata, before_write=self.rollback_failed,
                                after_commit=self._maybe_compact_inline)

    @overload
    def write(self, operation: Operation, df: DataFrame, *, stage: Literal[False] = ...,
              extra_metadata: dict[str, str] | None = ..., observer: RowObserver | None = ...) -> CommitResult: ...

    @overload
    def write(self, operation: Operation, df: DataFrame, *, stage: Literal[True],
              extra_metadata: dict[str, str] | None = ..., observer: RowObserver | None = ...) -> StagedCommit: ...

    def write(self, operation: Operation, df: DataFrame, *, stage: bool = False,
              extra_metadata: dict[str, str] | None = None,
              observer: RowObserver | None = None) -> CommitResult | StagedCommit:
        """One write of ``operation`` as its own transaction: published (a :class:`CommitResult`), or staged with
        ``stage=True`` (a :class:`StagedCommit`). The write methods below are this with a fixed operation."""
        return self._write(operation, df, stage, extra_metadata, observer)

    def _write(self, operation: Operation, df: DataFrame | pa.Table, stage: bool, extra_metadata: dict[str, str] | None,
               observer: RowObserver | None = None) -> CommitResult | StagedCommit:
        tx = self.transaction(extra_metadata=extra_metadata).write(operation, df, observer=observer)
        if stage:
            return tx.stage()
        return cast(CommitResult, tx.commit())  # a write transaction always commits an instant

    @overload
    def upsert(self, df: DataFrame | pa.Table, *, stage: Literal[False] = ...,
               extra_metadata: dict[str, str] | None = ..., observer: RowObserver | None = ...) -> CommitResult: ...

    @overload
    def upsert(self, df: DataFrame | pa.Table, *, stage: Literal[True],
               extra_metadata: dict[str, str] | None = ..., observer: RowObserver | None = ...) -> StagedCommit: ...

    def upsert(self, df: DataFrame | pa.Table, *, stage: bool = False,
               extra_metadata: dict[str, str] | None = None,
               observer: RowObserver | None = None) -> CommitResult | StagedCommit:
        """Insert new keys and update existing ones (deduped by the ordering field; a pyarrow.Table: without Spark).

        ``observer`` (every write but delete takes one) sees the rows in the job that writes the files: see
        :class:`~tablecore.engine.RowObserver`.

        Returns:
            A :class:`CommitResult`, or a :class:`StagedCommit` with ``stage=True``.
        """
        return self._write(Operation.UPSERT, df, stage, extra_metadata, observer)

    @overload
    def insert(self, df: DataFrame, *, stage: Literal[False] = ..., extra_metadata: dict[str, str] | None = ...,
               observer: RowObserver | None = ...) -> CommitResult: ...

    @overload
    def insert(self, df: DataFrame, *, stage: Literal[True], extra_metadata: dict[str, str] | None = ...,
               observer: RowObserver | None = ...) -> StagedCommit: ...

    def insert(self, df: DataFrame, *, stage: bool = False, extra_metadata: dict[str, str] | None = None,
               observer: RowObserver | None = None) -> CommitResult | StagedCommit:
        """Insert records without an index lookup (existing keys are not updated; small files are filled first)."""
        return self._write(Operation.INSERT, df, stage, extra_metadata, observer)

    @overload
    def bulk_insert(self, df: DataFrame | pa.Table, *, stage: Literal[False] = ...,
                    extra_metadata: dict[str, str] | None = ..., observer: RowObserver | None = ...) -> CommitResult:
        ...

    @overload
    def bulk_insert(self, df: DataFrame | pa.Table, *, stage: Literal[True],
                    extra_metadata: dict[str, str] | None = ..., observer: RowObserver | None = ...) -> StagedCommit:
        ...

    def bulk_insert(self, df: DataFrame | pa.Table, *, stage: bool = False, observer: RowObserver | None = None,
                    extra_metadata: dict[str, str] | None = None) -> CommitResult | StagedCommit:
        """Write records into new file groups sorted by key, no index lookup (a pyarrow.Table: without Spark)."""
        return self._write(Operation.BULK_INSERT, df, stage, extra_metadata, observer)

    @overload
    def delete(self, keys: DataFrame, *, stage: Literal[False] = ...,
               extra_metadata: dict[str, str] | None = ...) -> CommitResult: ...

    @overload
    def delete(self, keys: DataFrame, *, stage: Literal[True],
               extra_metadata: dict[str, str] | None = ...) -> StagedCommit: ...

    def delete(self, keys: DataFrame, *, stage: bool = False,
               extra_metadata: dict[str, str] | None = None) -> CommitResult | StagedCommit:
        """Delete the records whose keys ``keys`` holds (record key and partition columns)."""
        return self._write(Operation.DELETE, keys, stage, extra_metadata)

    @overload
    def insert_overwrite(self, df: DataFrame, *, stage: Literal[False] = ...,
                         extra_metadata: dict[str, str] | None = ...,
                         observer: RowObserver | None = ...) -> CommitResult: ...

    @overload
    def insert_overwrite(self, df: DataFrame, *, stage: Literal[True], extra_metadata: dict[str, str] | None = ...,
                         observer: RowObserver | None = ...) -> StagedCommit: ...

    def insert_overwrite(self, df: DataFrame, *, stage: bool = False, extra_metadata: dict[str, str] | None = None,
                         observer: RowObserver | None = None) -> CommitResult | StagedCommit:
        """Replace the partitions present in ``df`` with its rows (a replacecommit)."""
        return self._write(Operation.INSERT_OVERWRITE, df, stage, extra_metadata, observer)

    @overload
    def insert_overwrite_table(self, df: DataFrame, *, stage: Literal[False] = ...,
                               extra_metadata: dict[str, str] | None = ...,
                               observer: RowObserver | None = ...) -> CommitResult: ...

    @overload
    def insert_overwrite_table(self, df: DataFrame, *, stage: Literal[True],
                               extra_metadata: dict[str, str] | None = ...,
                               observer: RowObserver | None = ...) -> StagedCommit: ...

    def insert_overwrite_table(self, df: DataFrame, *, stage: bool = False,
                               extra_metadata: dict[str, str] | None = None,
                               observer: RowObserver | None = None) -> CommitResult | StagedCommit:
        """Replace the whole table with the rows of ``df`` (a replacecommit)."""
        return self._write(Operation.INSERT_OVERWRITE_TABLE, df, stage, extra_metadata, observer)

    def _maybe_compact_inline(self) -> None:
        n = self.config.inline_compaction_delta_commits
        if n <= 0 or self.config.table_type != "MERGE_ON_READ":
            return
        timeline = self.protocol.load_timeline()
        since = [i for i in timeline.completed_writes()
                 if i.action is Action.DELTA_COMMIT and i.time > _last_compaction(timeline)]
        if len(since) >= n:
            self.compact()

    # ---- reads --------------------------------------------------------------------------------------------------
    def read(self, *, as_of: str | None = None, view: str = "snapshot",
             partitions: Collection[str] | None = None) -> DataFrame:
        """The table as a DataFrame with the meta columns: the latest snapshot, or as of a completed instant.

        Args:
            as_of: a completed instant to time-travel to.
            view: ``snapshot`` (merge-on-read: base files merged with their logs) or ``read_optimized`` (base files
                only: faster, but without the updates still in log files).
            partitions: only these partitions (paths as ``_hoodie_partition_path`` holds them); only they are listed.
        """
        plan = plan_snapshot(self.io, self.protocol.load_timeline(), self.config, as_of=as_of, view=view,
                             partitions=partitions)
        return cast("DataFrame", self.engine.read(self.io, plan))

    def to_arrow(self, *, as_of: str | None = None, view: str = "snapshot",
                 columns: Sequence[str] | None = None) -> pa.Table:
        """:meth:`read`'s rows as a ``pyarrow.Table``, read in this process without Spark (``read_arrow``)."""
        plan = plan_snapshot(self.io, self.protocol.load_timeline(), self.config, as_of=as_of, view=view)
        return read_plan_arrow(self.io, plan, columns=columns)

    def count(self, *, as_of: str | None = None) -> int:
        """The exact number of rows of the snapshot (or as of a completed instant), the same as
        ``read(as_of=as_of).count()`` without reading the rows: base files count from their Parquet footers, and
        merge-on-read logs are decoded to find the base rows they supersede by key (see
        :mod:`tablecore.spark.counting`).

        Raises:
            InstantNotFoundError: ``as_of`` is not a completed write on the active timeline.
            CleanedRangeError: ``as_of`` is older than what cleaning kept.
        """
        plan = plan_snapshot(self.io, self.protocol.load_timeline(), self.config, as_of=as_of)
        return self.engine.count(self.io, plan)

    def verify(self, *, deep: bool = False) -> IntegrityReport:
        """Check the table's files against its timeline and report every problem found; nothing is raised for
        damage and nothing is changed (:mod:`tablecore.services.verify`). Only ``deep`` (every row read) runs jobs."""
        return verify(self.ctx, deep=deep)

    def read_changes(self, start: str | None = None, end: str | None = None, *,
                     mode: Literal["latest", "cdc"] = "latest") -> DataFrame:
        """Records written by commits in ``(start, end]``: the latest in-range state of every changed key, or with
        ``mode="cdc"`` every change (:meth:`read_cdc`). Costs the file groups those commits wrote, not the table."""
        if mode == "cdc":
            return self.read_cdc(start, end)
        if mode != "latest":
            raise ConfigError(f"unknown read_changes mode {mode!r}: expected 'latest' or 'cdc'")
        plan = plan_incremental(self.io, self.protocol.load_timeline(), self.config, start=start, end=end)
        return cast("DataFrame", self.engine.read(self.io, plan))

    def read_cdc(self, start: str | None = None, end: str | None = None, *, flatten: bool = False,
                 columns: Sequence[str] | None = None) -> DataFrame:
        """Every change of ``(start, end]`` (completion times on version 8 and 9), one row per change of a key, in
        commit order: ``op`` (``i``, ``u``, ``d``), ``commit_time``, ``completion_time``, ``record_key``,
        ``partition_path``, and the ``before`` / ``after`` images (structs of the table's columns, or of ``columns``
        only: the tasks build only those; null where there is none; ``flatten=True``: ``before_<column>`` /
        ``after_<column>`` columns). Several changes of one key in range are all there; replaying them in order onto
        the table as of ``start`` gives the table as of ``end``. The read costs the file groups the commits in range
        wrote (each as it stood before and after the commit), not the table (:mod:`tablecore.cdc_planning`,
        docs/cdc.md).

        Raises:
            CleanedRangeError: a clean removed the file slices the first commit's before images need.
            InvalidInputError: a column the table does not have, or one named twice.
        """
        plan = plan_cdc(self.io, self.protocol.load_timeline(), self.config, start=start, end=end, columns=columns)
        return cast("DataFrame", self.engine.read_cdc(self.io, plan, flatten=flatten))

    # ---- timeline and staged commits ----------------------------------------------------------------------------
    def timeline(self) -> list[InstantInfo]:
        """Every instant of the active timeline with action, state, operation, and whether it is staged."""
        tl = self.protocol.load_timeline()
        staged = set(self.protocol.staged_instants())
        out = []
        for i in tl.instants():
            op = tl.metadata(i).operation_type if i.is_completed and i.action.is_write else None
            if op is None and i.time in staged:
                rec = self.protocol.load_staged(i.time)
                op = rec.operation if rec else None
            out.append(InstantInfo(i.time, i.action.value, i.state.value, op, staged=i.time in staged,
                                   completed=i.completion))
        return out

    def latest_instant(self) -> str | None:
        """The latest completed write instant."""
        latest = self.protocol.load_timeline().latest_completed()
        return latest.time if latest else None

    def commit_metadata(self, instant: str) -> CommitMetadata:
        """The commit metadata of a completed write instant (``extra_metadata`` holds checkpoints and audits)."""
        tl = self.protocol.load_timeline()
        found = next((i for i in tl.completed_writes() if i.time == instant), None)
        if found is None:
            raise InstantNotFoundError(f"{instant!r} is not a completed commit of this table")
        return tl.metadata(found)

    def commit_history(self) -> Iterator[tuple[str, CommitMetadata]]:
        """Completed write instants of the active timeline with their metadata, newest first (read lazily: stop
        iterating once found; a pipeline looks for its last checkpoint this way)."""
        tl = self.protocol.load_timeline()
        for i in reversed(list(tl.completed_writes())):
            yield i.time, tl.metadata(i)

    def staged(self) -> list[StagedCommit]:
        """Staged commits waiting for publish or abort (from any process)."""
        out = []
        for t in self.protocol.staged_instants():
            rec = self.protocol.load_staged(t)
            if rec is not None:
                out.append(StagedCommit(self.ctx, rec))
        return out

    def staged_commit(self, instant: str) -> StagedCommit:
        """The staged commit of ``instant``."""
        rec = self.protocol.load_staged(instant)
        if rec is None:
            raise InstantNotFoundError(f"no staged commit {instant!r}")
        return StagedCommit(self.ctx, rec)

    # ---- table services -----------------------------------------------------------------------------------------
    def compact(self, *, strategy: str = "all", min_delta_commits: int = 1,
                min_log_ratio: float = 0.0) -> CommitResult | None:
        """Compact merge-on-read file slices: merge their log files into new base files (one ``commit``).

        Args:
            strategy: ``all`` (every slice with logs), ``num_commits`` (slices with at least ``min_delta_commits``
                delta commits since their base file) or ``log_ratio`` (log bytes >= ``min_log_ratio`` x base bytes).

        Returns:
            The compaction's result, or None when nothing needed compacting (or the table is copy-on-write).
        """
        self.rollback_failed()
        selection = CompactionSelection(strategy, min_delta_commits, min_log_ratio)  # type: ignore[arg-type]
        return compact(self.ctx, selection)

    def cluster(self, *, partitions: Sequence[str] | None = None, sort_by: Sequence[str] = (),
                small_file_limit: int | None = None, target_file_size: int | None = None,
                max_bytes_per_group: int | None = None) -> CommitResult | None:
        """Rewrite small file groups into target-size ones, optionally sorted (one ``replacecommit``, operation
        ``CLUSTER``). Every view returns the same rows before and after; rows keep their commit times.

        Args:
            partitions: partition paths to cluster (e.g. ``["city=sf"]``); default: every partition.
            sort_by: columns to sort the rows of each clustering group by (then by record key).
            small_file_limit: file groups (base + log bytes) below this size are rewritten; default: the table's.
            target_file_size: size of the new base files; default: the table's.
            max_bytes_per_group: input bytes rewritten (and sorted) together by one task; default: 4 x target.

        Returns:
            The clustering's result, or None when no partition had small file groups to rewrite.

        Raises:
            ConfigError: the table uses the bucket index (its file groups are fixed).
            InvalidInputError: an unknown sort column or partition.
            CommitConflictError: a write completed meanwhile on a file group being rewritten.
        """
        options = ClusteringOptions(partitions=tuple(partitions) if partitions is not None else None,
                                    sort_by=tuple(sort_by), small_file_limit=small_file_limit,
                                    target_file_size=target_file_size, max_bytes_per_group=max_bytes_per_group)
        self.rollback_failed()
        return cluster(self.ctx, options)

    def clean(self, *, retain_commits: int | None = None,
              retain_file_versions: int | None = None) -> CleanResult | None:
        """Delete the file slices no retained snapshot needs (one ``clean`` instant).

        Args:
            retain_commits: ``KEEP_LATEST_COMMITS`` (the default policy, N=10): keep every slice a read as of one of
                the latest N completed writes needs.
            retain_file_versions: ``KEEP_LATEST_FILE_VERSIONS``: keep the newest N slices of every file group.

        Savepointed files, the latest slice of every live group and files of pending instants are never deleted.
        Afterwards, time travel to (and incremental reads ending at) instants older than
        ``CleanResult.earliest_retained`` raise :class:`CleanedRangeError`.

        Returns:
            The clean's result, or None when there was nothing to delete (then no instant is written).

        Raises:
            ValueError: both policies given, or a value below 1.
        """
        policy = CleanPolicy.of(retain_commits, retain_file_versions)
        self.rollback_failed()
        return clean(self.ctx, policy)

    def savepoint(self, instant: str | None = None, *, comments: str = "") -> str:
        """Savepoint the snapshot as of ``instant`` (default: the latest completed write): cleaning keeps its files,
        it stays readable with ``as_of`` and :meth:`restore` can return to it. A no-op if already savepointed.

        Returns:
            The savepointed instant.

        Raises:
            InstantNotFoundError: ``instant`` is not a completed write (or the table has none).
            CleanedRangeError: a clean already removed file slices of that snapshot.
        """
        return savepoint(self.ctx, instant, comments=comments)

    def savepoints(self) -> list[str]:
        """The savepointed instants, oldest first."""
        return savepoints(self.ctx)

    def delete_savepoint(self, instant: str) -> None:
        """Remove a savepoint: its files become cleanable again.

        Raises:
            InstantNotFoundError: ``instant`` is not savepointed.
        """
        delete_savepoint(self.ctx, instant)

    def restore(self, instant: str) -> list[str]:
        """Return the table to the savepoint ``instant``: roll back, newest first, every write, compaction and pending
        or staged instant after it (one ``restore`` instant).

        Returns:
            The rolled-back instant times, newest first (empty: nothing was after the savepoint).

        Raises:
            InstantNotFoundError: ``instant`` is not savepointed.
            RollbackError: a later instant is savepointed too (delete that savepoint first).
            CommitConflictError: a writer is still running on an instant after ``instant``.
        """
        self.rollback_failed()
        return restore(self.ctx, instant)

    def upgrade(self, to_version: int = 8, *, dry_run: bool = False,
                on_step: Callable[[str], None] | None = None) -> UpgradePlan:
        """Upgrade the table in place to ``to_version`` (8), crash-safe and rerunnable; failed writers are rolled back
        and merge-on-read log files compacted first (:mod:`tablecore.services.upgrade`). ``dry_run``: only plan."""
        return upgrade_table(self.ctx, to_version, dry_run=dry_run, on_step=on_step,
                             prepare=lambda: (self.rollback_failed(), self.compact()))

    def archive(self, *, keep_min: int = 20, keep_max: int = 30) -> int:
        """Move the oldest instants out of the active timeline into ``.hoodie/archived/`` once it holds more than
        ``keep_max`` completed writes, keeping ``keep_min`` (Hudi's ``hoodie.keep.min/max.commits``). Never past the
        earliest pending instant, the oldest savepoint, or a replacecommit whose replaced files are not cleaned.
        The data of archived instants stays visible; they are no time-travel targets any more.

        Returns:
            How many instants were archived.

        Raises:
            ValueError: ``keep_min`` < 1 or ``keep_max`` <= ``keep_min``.
        """
        check_keep(keep_min, keep_max)
        self.rollback_failed()
        return archive(self.ctx, keep_min=keep_min, keep_max=keep_max)

    def rollback(self, instant: str) -> RollbackResult:
        """Roll back an instant: the newest completed write or compaction, or a pending one.

        Its files are deleted (merge-on-read logs get rollback command blocks), it leaves the timeline, and a
        ``rollback`` instant records what was done.

        Raises:
            InstantNotFoundError: no such instant.
            RollbackError: newer completed writes exist, or the instant is savepointed.
        """
        resume_rollbacks(self.ctx)
        return rollback_instant(self.ctx, instant)

    def rollback_failed(self) -> list[str]:
        """Roll back pending instants whose writer is gone (crashed or killed), recording a ``rollback`` instant
        for each, and finish rollbacks that were killed midway; staged instants are kept.

        Returns:
            The rolled-back instant times.
        """
        return rollback_failed(self.ctx)

    def __repr__(self) -> str:
        return f"Table(name={self.name!r}, path={self.path!r}, type={self.config.table_type})"


def describe(table: Table) -> dict[str, Any]:
    """A JSON-able summary of a table (config and timeline)."""
    return {"name": table.name, "path": table.path, "config": json.loads(table.config.model_dump_json()),
            "timeline": [i.__dict__ for i in table.timeline()]}


def _last_compaction(timeline: Timeline) -> str:
    """The instant of the newest completed compaction (or of nothing: the epoch)."""
    return max((i.time for i in timeline.completed_writes() if i.action is Action.COMMIT
                and timeline.metadata(i).compacted), default="0")
