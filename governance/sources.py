"""Pipeline sources: where the batches of a pipeline come from, one batch at a time, each with a position.

A :class:`Source` hands out :class:`Batch` es. Each batch carries a JSON-able *position*; the pipeline commits it
in the same commit as the batch's rows, and on restart asks for the batch after the last committed position, so
every batch is written exactly once.

Three kinds of source (configured by the pydantic models of :data:`SourceConfig`, embedded in pipeline YAML):

- ``files`` (:class:`FilesSourceConfig`): the files of one folder in *name order* (name them so that name order is
  arrival order: a timestamp or sequence prefix). Formats: JSON lines, Parquet, Avro container files, and files of
  Kafka messages in the Confluent wire format whose schema ids are resolved through the schema registry.
  Position: ``{"last_file": "<name>"}``.
- ``table`` (:class:`TableSourceConfig`): an incremental pull of a tablecore (Hudi) table. Position:
  ``{"instant": "<last consumed instant>"}``.
- ``kafka`` (:class:`~governance.kafka_source.KafkaSourceConfig`): Kafka topics in mini-batches
  (:mod:`governance.kafka_source`). Position: ``{"offsets": {"<topic>": {"<partition>": <next offset>}}}``.

No row reaches the driver: Avro and Confluent files are decoded with fastavro inside executors (Spark's own Avro
source, ``spark-avro``, is an external package that PySpark does not ship).
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from governance import file_tasks
from governance.errors import SourceError
from governance.kafka_source import KafkaSource, KafkaSourceConfig
from governance.source_batch import Batch, PartitionLag, arrow_schema, parse_json, schema_dict, without_meta
from schema_registry import RegistryClient
from schema_registry.errors import SchemaRegistryError
from tablecore import CleanedRangeError, Table, TableCoreError, TableNotFoundError
from tablecore.io import FileInfo, FileIO, file_io_for
from tablecore.spark.schema import arrow_to_spark

__all__ = [
    "Batch",
    "FilesSource",
    "FilesSourceConfig",
    "KafkaSource",
    "KafkaSourceConfig",
    "PartitionLag",
    "Source",
    "SourceConfig",
    "TableSource",
    "TableSourceConfig",
]

logger = logging.getLogger(__name__)

FileFormat = Literal["json", "parquet", "avro", "confluent_avro"]


SERVICE_OPERATIONS = frozenset({"COMPACT", "LOG_COMPACT", "CLUSTER"})
"""Write operations of table services: they rewrite files but add no changes an incremental pull would return."""

_GLOB_CHARS = frozenset("*?[]{}\\")


@runtime_checkable
class Source(Protocol):
    """Where a pipeline's batches come from."""

    def next_batch(self, spark: SparkSession, after: Any | None, *,
                   schema: StructType | None = None) -> Batch | None:
        """The batch following position ``after`` (None: from the beginning), or None when nothing is new.

        Args:
            spark: the session to read with.
            after: a position of an earlier batch of this source, or None.
            schema: the Spark schema to read with, where the format needs one (JSON files); optional.

        Raises:
            SourceError: the source cannot be read, or ``after`` is not a position of this source.
        """
        ...


# ---------------------------------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------------------------------


def _resolve(path: str, base_dir: Path | None) -> str:
    """``path`` resolved against ``base_dir`` (URIs and absolute paths unchanged)."""
    if "://" in path or os.path.isabs(path) or base_dir is None:
        return path
    return str((base_dir / path).resolve())


class FilesSourceConfig(BaseModel):
    """Files of one folder, taken in name order, ``max_files_per_batch`` at a time.

    Attributes:
        kind: ``files``.
        path: the folder (relative paths resolve against the pipeline file's folder); its direct children are read.
        format: ``json`` (JSON lines), ``parquet``, ``avro`` (Avro container files) or ``confluent_avro``
            (length-framed Kafka messages in the Confluent wire format).
        pattern: a glob on file names (``*.json``); hidden (``.``) and ``_``-prefixed files never match.
        max_files_per_batch: files per batch (at least 1).
        subject: registry subject whose latest version is the reader schema (required for ``confluent_avro``,
            optional for ``avro``; without it Avro files are read with the newest writer schema of the batch).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["files"] = "files"
    path: str
    format: FileFormat
    pattern: str = "*"
    max_files_per_batch: int = Field(default=1, ge=1)
    subject: str | None = None

    @model_validator(mode="after")
    def _subject_fits_format(self) -> FilesSourceConfig:
        if self.format == "confluent_avro" and not self.subject:
            raise ValueError("format confluent_avro requires a subject (its latest version is the reader schema)")
        if self.subject is not None and self.format not in ("avro", "confluent_avro"):
            raise ValueError(f"subject is only used by the avro and confluent_avro formats, not {self.format}")
        return self

    def build(self, registry: RegistryClient | None, base_dir: Path | None) -> FilesSource:
        """The source this configuration describes.

        Raises:
            SourceError: the format needs a registry (a ``subject`` is set) and none is given.
        """
        if self.subject is not None and registry is None:
            raise SourceError(f"files source {self.path}: subject {self.subject!r} needs a schema registry "
                              "(configure `registry` in the pipeline)")
        return FilesSource(path=_resolve(self.path, base_dir), format=self.format, pattern=self.pattern,
                           max_files_per_batch=self.max_files_per_batch, subject=self.subject, registry=registry)


class TableSourceConfig(BaseModel):
    """An incremental pull of a tablecore table.

    Attributes:
        kind: ``table``.
        path: the table's base path or URI (relative paths resolve against the pipeline file's folder).
        max_commits_per_batch: at most this many new commits per batch (None: everything new in one batch).
        mode: ``latest`` (the latest state of every changed key; a deleted key is absent) or ``cdc`` (every change
            with its operation: columns ``op`` (``i``, ``u``, ``d``), ``commit_time``, ``completion_time``,
            ``record_key``, ``partition_path``, and ``before_<column>`` / ``after_<column>`` for every data column;
            deletes and corrections flow downstream). A ``cdc`` source needs a transform.
        columns: the data columns to read (default: all). With ``cdc``, the ``before_`` / ``after_`` columns of
            these only: the CDC read's tasks build only them, where a transform's projection could not prune them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["table"] = "table"
    path: str
    max_commits_per_batch: int | None = Field(default=None, ge=1)
    mode: Literal["latest", "cdc"] = "latest"
    columns: list[str] | None = Field(default=None, min_length=1)

    def build(self, registry: RegistryClient | None, base_dir: Path | None) -> TableSource:
        """The source this configuration describes (``registry`` is not used)."""
        return TableSource(path=_resolve(self.path, base_dir), max_commits_per_batch=self.max_commits_per_batch,
                           mode=self.mode, columns=tuple(self.columns) if self.columns else None)


SourceConfig = Annotated[FilesSourceConfig | TableSourceConfig | KafkaSourceConfig, Field(discriminator="kind")]
"""The source of a pipeline, discriminated by ``kind``."""


# ---------------------------------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilesSource:
    """Files of one folder in name order (see :class:`FilesSourceConfig` for the fields)."""

    path: str
    format: FileFormat
    pattern: str = "*"
    max_files_per_batch: int = 1
    subject: str | None = None
    registry: RegistryClient | None = None

    def pending(self, after: Any | None) -> list[FileInfo]:
        """Every matching file whose name sorts after the position ``after``, in name order.

        Raises:
            SourceError: the folder does not exist, or ``after`` is not a files position.
        """
        last = _last_file(after)
        fio = file_io_for(self.path)
        try:
            listed = fio.list(fio.base) if fio.exists(fio.base) else None
        except (NotADirectoryError, OSError):  # a file, not a folder
            listed = None
        if listed is None:
            raise SourceError(f"files source {self.path}: no such folder")
        files = sorted((f for f in listed if self._matches(f.name)), key=lambda f: f.name)
        return [f for f in files if last is None or f.name > last]

    def _matches(self, name: str) -> bool:
        return not name.startswith((".", "_")) and fnmatch.fnmatchcase(name, self.pattern)

    def next_batch(self, spark: SparkSession, after: Any | None, *,
                   schema: StructType | None = None) -> Batch | None:
        """The next up to ``max_files_per_batch`` files after ``after`` (see :meth:`Source.next_batch`).

        ``schema`` is used by the ``json`` format only (Parquet and Avro files carry their schema, Confluent messages
        are read with the subject's latest version).
        """
        chosen = self.pending(after)[: self.max_files_per_batch]
        if not chosen:
            logger.debug("files source %s: nothing after %s", self.path, after)
            return None
        for f in chosen:
            if _GLOB_CHARS & set(f.name):
                raise SourceError(f"files source {self.path}: file name {f.name!r} holds a glob character "
                                  f"({''.join(sorted(_GLOB_CHARS))}); rename it")
        fio = file_io_for(self.path)
        paths = [fio.uri_of(f.path) for f in chosen]
        names = [f.name for f in chosen]
        extra = ""
        # storage Spark cannot open (s3:// without a Hadoop connector): executors read the files through the FileIO
        native = fio.hadoop_compatible
        if self.format == "json":
            if native:
                df = spark.read.json(paths, schema=schema) if schema is not None else spark.read.json(paths)
            else:
                df = _json_lines(spark, file_tasks.binary_through_io(spark, fio, chosen), schema)
        elif self.format == "parquet":
            df = spark.read.parquet(*paths) if native else file_tasks.parquet_through_io(spark, fio, chosen, self.path)
        else:
            binary = (spark.read.format("binaryFile").load(paths) if native
                      else file_tasks.binary_through_io(spark, fio, chosen))
            if self.format == "avro":
                df = self._read_avro(spark, fio, chosen, binary)
            else:
                df, messages = self._read_confluent(binary)
                extra = f", {messages} messages"
        span = names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"
        description = f"files {span} ({len(names)} file{'s' if len(names) != 1 else ''}{extra})"
        logger.info("files source %s: batch %s", self.path, description)
        return Batch(df=df, position={"last_file": names[-1]}, description=description)

    # --- avro container files ----------------------------------------------------------------------------------
    def _reader_schema(self) -> dict[str, Any]:
        assert self.registry is not None and self.subject is not None
        try:
            registered = self.registry.latest(self.subject)
        except SchemaRegistryError as e:
            raise SourceError(f"files source {self.path}: cannot get the latest schema of subject "
                              f"{self.subject!r}: {e}") from e
        return schema_dict(registered.schema, f"subject {self.subject!r}")

    def _read_avro(self, spark: SparkSession, fio: FileIO, chosen: list[FileInfo], binary: DataFrame) -> DataFrame:
        if self.subject is not None:
            reader = self._reader_schema()
        else:
            # the newest file's writer schema; only the header of the file is read
            newest = chosen[-1]
            try:
                import fastavro

                with fio.open_input(newest.path) as f:
                    text = fastavro.reader(f).metadata["avro.schema"]
            except Exception as e:  # any decoding failure of a foreign file
                raise SourceError(f"files source {self.path}: {newest.name} is not an Avro container file: {e}") \
                    from e
            reader = schema_dict(text, newest.name)
        arrow = arrow_schema(reader, f"files source {self.path}")
        return binary.select("path", "content").mapInArrow(file_tasks.decode_container_files(reader, arrow),
                                                           arrow_to_spark(arrow))

    # --- Confluent wire format ----------------------------------------------------------------------------------
    def _read_confluent(self, binary: DataFrame) -> tuple[DataFrame, int]:
        assert self.registry is not None
        binary = binary.select("path", "content")
        # a first, small job: frame structure, magic bytes and the distinct schema ids; no row data comes back
        scan = binary.mapInArrow(file_tasks.scan_frames, file_tasks.SCAN_DDL).collect()
        errors = sorted((r["path"], r["offset"], r["error"]) for r in scan if r["error"] is not None)
        if errors:
            path, offset, message = errors[0]
            raise SourceError(f"files source {self.path}: {_base_name(path)} at byte offset {offset}: {message}")
        first_use: dict[int, tuple[str, int]] = {}
        messages = 0
        for r in sorted(scan, key=lambda r: (r["path"], r["offset"])):
            messages += r["messages"]
            if r["schema_id"] is not None:
                first_use.setdefault(r["schema_id"], (r["path"], r["offset"]))
        writers: dict[int, dict[str, Any]] = {}
        for schema_id, (path, offset) in sorted(first_use.items()):
            try:
                registered = self.registry.schema(schema_id)
            except SchemaRegistryError as e:
                raise SourceError(f"files source {self.path}: {_base_name(path)} at byte offset {offset}: unknown "
                                  f"schema id {schema_id} ({e})") from e
            if registered.references:
                raise SourceError(f"files source {self.path}: schema id {schema_id} has references, which the "
                                  "files source does not resolve")
            writers[schema_id] = schema_dict(registered.schema, f"schema id {schema_id}")
        reader = self._reader_schema()
        arrow = arrow_schema(reader, f"files source {self.path}")
        logger.debug("files source %s: %d messages, writer schema ids %s", self.path, messages, sorted(writers))
        # the schema texts travel with the task closure (a few KB): the executors never call the registry
        decode = file_tasks.decode_confluent_files(writers, reader, arrow)
        return binary.mapInArrow(decode, arrow_to_spark(arrow)), messages


def _json_lines(spark: SparkSession, binary: DataFrame, schema: StructType | None) -> DataFrame:
    """The JSON-lines records of ``(path, content)`` rows, parsed by Spark's own ``from_json`` as ``spark.read.json``
    parses them; without ``schema``, the schema is inferred from the batch's first record."""
    lines = (binary.select(F.explode(F.split(F.decode("content", "UTF-8"), "\r?\n")).alias("value"))
             .where(F.trim("value") != ""))
    parsed = parse_json(lines, "value", schema)
    return parsed if parsed is not None else spark.createDataFrame([], StructType())


def _last_file(after: Any | None) -> str | None:
    if after is None:
        return None
    if isinstance(after, Mapping) and isinstance(after.get("last_file"), str) and set(after) == {"last_file"}:
        return str(after["last_file"])
    raise SourceError(f"not a files source position: {after!r} (expected {{\"last_file\": name}})")


def _base_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


# ---------------------------------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSource:
    """An incremental pull of a tablecore table (see :class:`TableSourceConfig` for the fields)."""

    path: str
    max_commits_per_batch: int | None = None
    mode: str = "latest"
    columns: tuple[str, ...] | None = None

    def pending(self, table: Table, after: str | None) -> list[tuple[str, str]]:
        """(position, instant) of the completed data-writing instants after the position ``after``, in the order
        they became visible (table services such as compaction and clustering add no changes and are skipped). The
        position is the completion time from table version 8 (so a commit published late is still ahead of a
        consumer), the instant time on version 6."""
        done = [(i.completed or i.instant, i.instant) for i in table.timeline()
                if i.state == "completed" and i.action in ("commit", "deltacommit", "replacecommit")
                and (i.operation or "").upper() not in SERVICE_OPERATIONS]
        return sorted(p for p in done if after is None or p[0] > after)

    def next_batch(self, spark: SparkSession, after: Any | None, *,
                   schema: StructType | None = None) -> Batch | None:
        """The changes of the commits after ``after`` (see :meth:`Source.next_batch`; ``schema`` is not used).

        Raises:
            SourceError: the table does not exist, ``after`` is not a table position, or the changes after it are
                no longer readable (cleaned or archived).
        """
        start = _instant(after)
        try:
            table = Table.open(self.path, spark=spark)
        except TableNotFoundError as e:
            raise SourceError(f"table source {self.path}: no table there ({e})") from e
        except TableCoreError as e:
            raise SourceError(f"table source {self.path}: cannot open the table: {e}") from e
        new = self.pending(table, start)
        if not new:
            logger.debug("table source %s: nothing after %s", self.path, start)
            return None
        chosen = new[: self.max_commits_per_batch] if self.max_commits_per_batch else new
        end, end_instant = chosen[-1]
        try:
            changes = self._changes(table, start, end)
        except CleanedRangeError as e:
            raise SourceError(
                f"table source {self.path}: the changes in ({start or 'the beginning'}, {end}] are no longer "
                f"readable ({e}); the earliest readable instant is {e.earliest_readable}. The consumer fell behind "
                "the source table's clean/archival retention: re-bootstrap the target from a snapshot of the source "
                "or raise the source's retention") from e
        except TableCoreError as e:
            raise SourceError(f"table source {self.path}: cannot read the changes in ({start}, {end}]: {e}") from e
        description = (f"table {table.name} commits {chosen[0][1]}..{end_instant} ({len(chosen)} commit"
                       f"{'s' if len(chosen) != 1 else ''}{f' of {len(new)} new' if len(new) > len(chosen) else ''})")
        logger.info("table source %s: batch %s", self.path, description)
        return Batch(df=changes, position={"instant": end}, description=description, end_instant=end_instant,
                     commits=len(chosen))

    def _changes(self, table: Table, start: str | None, end: str) -> DataFrame:
        """The batch's rows without meta columns: the changed records, or (``cdc``) the flattened changes."""
        if self.mode == "cdc":
            changes = table.read_cdc(start, end, flatten=True, columns=self.columns)
            return without_meta(changes, prefixes=("before_", "after_"))
        df = without_meta(table.read_changes(start=start, end=end))
        if self.columns is None:
            return df
        unknown = [c for c in self.columns if c not in df.columns]
        if unknown:
            raise SourceError(f"table source {self.path}: no column {', '.join(map(repr, unknown))} in the table "
                              f"(it has {', '.join(df.columns)})")
        return df.select(*self.columns)


def _instant(after: Any | None) -> str | None:
    if after is None:
        return None
    if isinstance(after, Mapping) and isinstance(after.get("instant"), str) and set(after) == {"instant"}:
        return str(after["instant"])
    raise SourceError(f"not a table source position: {after!r} (expected {{\"instant\": time}})")
