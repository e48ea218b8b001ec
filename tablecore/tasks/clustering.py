"""Clustering work done in executors: merge the slices of one clustering group, sort, split into new base files.

One task per group. Its slices are read whole (base file merged with its logs, as compaction does), concatenated,
optionally sorted, and cut into ``len(file_ids)`` files of about equal row counts, one per new file group. Rows keep
their meta columns (commit time, sequence number, key, partition) except the file name, as Hudi clustering does
with ``preserveHoodieMetadata``; so incremental reads see no new rows.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tablecore.format.file_view import relative_path
from tablecore.tasks import mor
from tablecore.tasks import write as ex

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusteringJob:
    """A clustering: the merge rules to read slices with, the base-file settings, and the sort columns."""

    read: mor.SliceJob
    write: ex.WriteJob  # instant, base, schema and footer settings of the new base files
    sort_by: tuple[str, ...] = ()


def group_descriptors(groups: list[tuple[str, list[tuple[str | None, list[str]]], list[str]]]) -> pa.Table:
    """The Arrow table a clustering job runs over: one row per group (partition, its slices as base path and log
    paths, the file ids of the groups it writes)."""
    return pa.table({
        "partition": pa.array([g[0] for g in groups], pa.string()),
        "base_paths": pa.array([[b for b, _ in g[1]] for g in groups], pa.list_(pa.string())),
        "log_paths": pa.array([[lg for _, lg in g[1]] for g in groups], pa.list_(pa.list_(pa.string()))),
        "file_ids": pa.array([g[2] for g in groups], pa.list_(pa.string())),
    })


def _split(n_rows: int, parts: int) -> list[tuple[int, int]]:
    """(offset, length) of ``parts`` consecutive chunks of about equal size (empty chunks dropped)."""
    size, extra = divmod(n_rows, parts)
    out, offset = [], 0
    for i in range(parts):
        length = size + (1 if i < extra else 0)
        if length:
            out.append((offset, length))
        offset += length
    return out


def cluster_group(desc: dict[str, Any], job: ClusteringJob, token: str) -> pa.Table:
    """Rewrite one clustering group into new base files; returns their write stats (STAT_SCHEMA)."""
    started = time.monotonic()
    fs = job.read.filesystem()
    parts = [mor.slice_rows(fs, base, list(logs), job.read)[0]
             for base, logs in zip(desc["base_paths"], desc["log_paths"], strict=True)]
    rows = pa.concat_tables(parts)
    if job.sort_by:
        rows = rows.sort_by([(c, "ascending") for c in job.sort_by] + [(mor.KEY_COL, "ascending")])
    partition = desc["partition"]
    stats = []
    file_ids: list[str] = list(desc["file_ids"])
    for fid, (offset, length) in zip(file_ids, _split(rows.num_rows, len(file_ids)), strict=False):
        name = f"{fid}_{token}_{job.write.instant}.parquet"
        rel = relative_path(partition, name)
        chunk = rows.slice(offset, length)
        chunk = chunk.set_column(chunk.schema.get_field_index("_hoodie_file_name"), "_hoodie_file_name",
                                 ex.constant(name, chunk.num_rows))
        size = ex.write_base_file(fs, f"{job.write.base}/{rel}", chunk, job.write)
        stats.append({
            "file_id": fid, "path": rel, "partition_path": partition, "prev_commit": "null",
            "num_writes": chunk.num_rows, "num_deletes": 0, "num_update_writes": 0, "num_inserts": chunk.num_rows,
            "total_write_bytes": size, "upsert_ms": 0, "create_ms": int((time.monotonic() - started) * 1000),
            "log_version": None, "base_file": None,
        })
    logger.debug("clustered %d slices of %s into %d files", len(parts), partition, len(stats))
    return pa.Table.from_pylist(stats, schema=ex.STAT_SCHEMA)
