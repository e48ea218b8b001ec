"""A Spark data source: ``spark.read.format("tablecore").load(path)``.

Options (all optional): ``as_of`` (time travel to a completed instant), ``start`` / ``end`` (incremental read of
``(start, end]``; giving either selects an incremental read), ``view`` (``snapshot`` or ``read_optimized``), and
S3 storage options (``aws_endpoint_url``, ``aws_region``...). One input partition per file slice; executors read
with pyarrow, merge log files into their base rows (merge-on-read), and return Arrow batches in the table schema.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from tablecore.io import FileIO
from tablecore.read_planning import ReadPlan
from tablecore.spark.schema import arrow_to_spark
from tablecore.tasks.read import read_slice


class _SlicePartition(InputPartition):
    def __init__(self, base_path: str | None, log_paths: list[str]) -> None:
        super().__init__((base_path, log_paths))
        self.base_path = base_path
        self.log_paths = log_paths


class TableReader(DataSourceReader):
    """Reads the planned file slices in executors: base files, merged with their log files (merge-on-read)."""

    def __init__(self, plan: ReadPlan, io: FileIO) -> None:
        self.plan = plan
        self.io = io

    def partitions(self) -> list[InputPartition]:
        """One partition per file slice."""
        with_logs = {(s.partition, s.file_id) for s in self.plan.log_slices}
        parts: list[InputPartition] = [_SlicePartition(f.path, []) for f in self.plan.files
                                       if (f.partition, f.file_id) not in with_logs]
        parts += [_SlicePartition(s.base.path if s.base else None, [lg.path for lg in s.logs])
                  for s in self.plan.log_slices]
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one slice, conformed to the table schema and filtered to the commit range."""
        if not isinstance(partition, _SlicePartition):  # Spark asks for one partition even when there are none
            return
        table = read_slice(self.io, self.plan, partition.base_path, partition.log_paths)
        if table is not None:
            yield from table.to_batches(max_chunksize=65536)


class TableDataSource(DataSource):
    """``format("tablecore")``: snapshot, ``as_of`` and incremental reads of a table."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "tablecore"

    def _plan(self) -> tuple[FileIO, ReadPlan]:
        from tablecore.commit import CommitProtocol
        from tablecore.exceptions import TableNotFoundError
        from tablecore.io import file_io_for
        from tablecore.read_planning import plan_incremental, plan_snapshot
        from tablecore.table_properties import read_config

        path = self.options.get("path")
        if not path:
            raise TableNotFoundError("format('tablecore') needs a path: .load(path) or .option('path', ...)")
        io = file_io_for(path, {k: v for k, v in self.options.items() if k.lower().startswith("aws_")})
        config = read_config(io, path)
        timeline = CommitProtocol(io, table_version=config.table_version).load_timeline()
        start, end, as_of = self.options.get("start"), self.options.get("end"), self.options.get("as_of")
        if start is not None or end is not None:
            plan = plan_incremental(io, timeline, config, start=start, end=end)
        else:
            plan = plan_snapshot(io, timeline, config, as_of=as_of, view=self.options.get("view", "snapshot"))
        return io, plan

    def schema(self) -> StructType:
        """The table schema with meta columns."""
        _, plan = self._plan()
        return arrow_to_spark(plan.schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        """A reader over the planned files."""
        io, plan = self._plan()
        return TableReader(plan, io)


_REGISTERED: set[int] = set()


def register(spark: SparkSession) -> None:
    """Register ``format("tablecore")`` with a session (idempotent)."""
    key = id(spark)
    if key in _REGISTERED:
        return
    spark.dataSource.register(TableDataSource)
    _REGISTERED.add(key)
