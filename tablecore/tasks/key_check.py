"""The keys two concurrent writes both wrote (engine-neutral; engines run :func:`written_keys` in their tasks).

A record key lives in one file group. Two writes that planned against the same snapshot and did not see each other
can both *insert* a key that the snapshot did not hold — each into a file group of its own, so their file groups do
not overlap and the file-group conflict check passes — and the table would then hold the key twice. Before a write
publishes, the keys it wrote into insert-carrying files are checked against those of every write that completed
meanwhile in the same partitions (:mod:`tablecore.transaction`); any key in both is a conflict.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tablecore.format.commit_metadata import CommitMetadata, WriteStat
from tablecore.format.log_format import BlockType, read_blocks
from tablecore.io import FileIO
from tablecore.tasks.mor import KEY_COL, PART_COL, TIME_COL, block_records
from tablecore.tasks.write import read_base_file

KEYS_DDL = "key string, partition string"
_KEY_SCHEMA = pa.schema([pa.field(KEY_COL, pa.string()), pa.field(PART_COL, pa.string())])


@dataclass(frozen=True)
class WrittenFile:
    """A file an instant wrote (full path), read for the keys that instant wrote into it."""

    path: str
    instant: str


def insert_files(io: FileIO, metadata: CommitMetadata, instant: str, partitions: set[str] | None = None,
                 ) -> dict[str, list[WrittenFile]]:
    """Partition -> the files of a write that took inserts (write stats with ``numInserts`` > 0)."""
    out: dict[str, list[WrittenFile]] = {}
    for s in metadata.write_stats:
        if s.num_inserts > 0 and s.path and (partitions is None or s.partition_path in partitions):
            out.setdefault(s.partition_path, []).append(WrittenFile(io.join(s.path), instant))
    return out


def stats_insert_partitions(stats: Sequence[WriteStat]) -> set[str]:
    """Partitions in which write stats record inserts."""
    return {s.partition_path for s in stats if s.num_inserts > 0}


def written_keys(io: FileIO, f: WrittenFile) -> pa.Table:
    """The (key, partition) of every record ``f.instant`` wrote into file ``f`` (a base file: rows stamped with the
    instant; a log file: records of the instant's data blocks)."""
    name = f.path.rsplit("/", 1)[-1]
    if name.endswith(".parquet"):
        t = read_base_file(io, f.path, [KEY_COL, PART_COL, TIME_COL])
        t = t.filter(pc.equal(t.column(TIME_COL), f.instant))
        return pa.table([t.column(KEY_COL).cast(pa.string()), t.column(PART_COL).cast(pa.string())],
                        schema=_KEY_SCHEMA)
    blocks = read_blocks(io.read_bytes(f.path), tolerate_truncated_tail=True)
    parts = [block_records(b, _KEY_SCHEMA) for b in blocks
             if b.instant == f.instant and b.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA)]
    return pa.concat_tables(parts) if parts else _KEY_SCHEMA.empty_table()


def iter_written_keys(io: FileIO, files: Iterator[dict[str, str]]) -> Iterator[pa.RecordBatch]:
    """Task body: the written keys of every (path, instant) descriptor, as ``key, partition`` batches."""
    for d in files:
        t = written_keys(io, WrittenFile(d["path"], d["instant"]))
        yield from t.rename_columns(["key", "partition"]).to_batches()


def file_descriptors(files: Sequence[WrittenFile]) -> pa.Table:
    """The descriptor rows (path, instant) of a key job."""
    return pa.table({"path": pa.array([f.path for f in files], pa.string()),
                     "instant": pa.array([f.instant for f in files], pa.string())})
