"""A Spark data source: ``spark.read.format("tablecore").load(path)``.

Options (all optional): ``as_of`` (time travel to a completed instant), ``start`` / ``end`` (incremental read of
``(start, end]``; giving either selects an incremental read). One input partition per base file; executors read
with pyarrow and return Arrow batches in the table schema.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from tablecore.spark.schema import arrow_to_spark


class _FilePartition(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class TableReader(DataSourceReader):
    """Reads the planned base files in executors."""

    def __init__(self, files: list[str], schema: pa.Schema, fs_uri: str, start: str | None,
                 end: str | None) -> None:
        self.files = files
        self.arrow_schema = schema
        self.fs_uri = fs_uri
        self.start = start
        self.end = end

    def partitions(self) -> list[InputPartition]:
        """One partition per base file."""
        return [_FilePartition(f) for f in self.files]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one base file, conformed to the table schema and filtered to the commit range."""
        from tablecore.spark.executor import conform

        fs = pafs.LocalFileSystem() if not self.fs_uri else pafs.FileSystem.from_uri(self.fs_uri)[0]
        if not isinstance(partition, _FilePartition):  # Spark asks for one partition even when there are none
            return
        table = conform(pq.read_table(partition.path, filesystem=fs), self.arrow_schema)
        if self.start is not None:
            table = table.filter(pc.greater(table.column("_hoodie_commit_time"), self.start))
        if self.end is not None:
            table = table.filter(pc.less_equal(table.column("_hoodie_commit_time"), self.end))
        yield from table.to_batches(max_chunksize=65536)


class TableDataSource(DataSource):
    """``format("tablecore")``: snapshot, ``as_of`` and incremental reads of a table."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "tablecore"

    def _plan(self):  # type: ignore[no-untyped-def]
        from tablecore.commit import CommitProtocol
        from tablecore.config import TableConfig
        from tablecore.exceptions import TableNotFoundError
        from tablecore.io import FileIO
        from tablecore.spark.reader import plan_incremental, plan_snapshot

        path = self.options.get("path")
        if not path:
            raise TableNotFoundError("format('tablecore') needs a path: .load(path) or .option('path', ...)")
        io = FileIO(path)
        props = io.join(".hoodie/hoodie.properties")
        if not io.exists(props):
            raise TableNotFoundError(f"no table at {path}: .hoodie/hoodie.properties not found")
        config = TableConfig.from_properties_text(io.read_bytes(props).decode())
        timeline = CommitProtocol(io).load_timeline()
        start, end, as_of = self.options.get("start"), self.options.get("end"), self.options.get("as_of")
        if start is not None or end is not None:
            plan = plan_incremental(io, timeline, start=start, end=end, create_schema=config.create_schema)
        else:
            plan = plan_snapshot(io, timeline, as_of=as_of, create_schema=config.create_schema)
        return io, plan

    def schema(self) -> StructType:
        """The table schema with meta columns."""
        _, plan = self._plan()
        return arrow_to_spark(plan.schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        """A reader over the planned files."""
        io, plan = self._plan()
        return TableReader([f.path for f in plan.files], plan.schema, "" if io.is_local else io.uri,
                           plan.start, plan.end)


_REGISTERED: set[int] = set()


def register(spark: SparkSession) -> None:
    """Register ``format("tablecore")`` with a session (idempotent)."""
    key = id(spark)
    if key in _REGISTERED:
        return
    spark.dataSource.register(TableDataSource)
    _REGISTERED.add(key)
