"""Clustering: rewrite the small file groups of a partition into fewer, target-size ones, optionally sorted.

Timeline, as Hudi writes it: ``T.replacecommit.requested`` (Avro ``HoodieRequestedReplaceMetadata``, operation type
``CLUSTER``, the clustering plan) -> ``T.replacecommit.inflight`` (empty) -> executors write new file groups ->
``T.replacecommit`` (``operationType: CLUSTER``, ``partitionToReplaceFileIds`` = the rewritten groups). Readers see
the same rows before and after: the replaced groups leave every view at ``T``, and rows keep their commit times
(``preserveHoodieMetadata``), so incremental reads see nothing new. The replaced files stay until a clean removes
them.

Plan: per partition, the latest slices below ``small_file_limit`` (base file plus log files) are packed, largest
first, into groups of at most ``max_bytes_per_group``; each group becomes ``ceil(bytes / target_file_size)`` new
file groups. A partition with a single small slice is left alone unless the rows are to be sorted. Sorting is
within a group (as Hudi's sort-and-size execution does); merge-on-read slices are merged with their logs first.

Like a compaction, a clustering is never left pending: a failure rolls it back at once, a crashed one is rolled
back by the next write or service run, and a write that completes meanwhile on a clustered file group makes it
fail with :class:`CommitConflictError` (that write's changes would otherwise be hidden).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from tablecore.exceptions import ConfigError, InvalidInputError
from tablecore.format.avro_schema import canonical_json
from tablecore.format.commit_metadata import SCHEMA_KEY, CommitMetadata, WriteStat
from tablecore.format.file_integrity import check_slices
from tablecore.format.file_naming import new_file_id
from tablecore.format.file_view import FileSlice, latest_file_slices, list_table_files
from tablecore.format.instant import Action
from tablecore.format.service_metadata import ClusteringGroup, SliceInfo, clustering_requested_replace
from tablecore.format.table_schema import table_arrow_schema
from tablecore.read_planning import written_files
from tablecore.results import CommitResult
from tablecore.services.slice_rewrite import rewrite_jobs
from tablecore.tasks import clustering as cx
from tablecore.transaction import Transaction

if TYPE_CHECKING:
    from tablecore.context import TableContext

logger = logging.getLogger(__name__)

# the Java execution strategy this plan corresponds to (sort columns as its parameter), recorded in the plan
EXECUTION_STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
SORT_COLUMNS_PARAM = "hoodie.clustering.plan.strategy.sort.columns"


@dataclass(frozen=True)
class ClusteringOptions:
    """What to cluster and how (sizes in bytes; None: the table's ``small_file_limit`` / ``target_file_size``)."""

    partitions: tuple[str, ...] | None = None
    sort_by: tuple[str, ...] = ()
    small_file_limit: int | None = None
    target_file_size: int | None = None
    max_bytes_per_group: int | None = None  # default: 4 x target_file_size


def _slice_bytes(s: FileSlice) -> int:
    return (s.base.size if s.base is not None else 0) + sum(lg.size for lg in s.logs)


def plan_groups(slices: Sequence[FileSlice], *, small_file_limit: int, target_file_size: int,
                max_bytes_per_group: int, sort: bool) -> list[ClusteringGroup]:
    """The clustering groups of the given latest slices (see the module docstring)."""
    by_partition: dict[str, list[FileSlice]] = {}
    for s in slices:
        if _slice_bytes(s) < small_file_limit:
            by_partition.setdefault(s.partition, []).append(s)
    groups: list[ClusteringGroup] = []
    for partition in sorted(by_partition):
        small = sorted(by_partition[partition], key=lambda s: (-_slice_bytes(s), s.file_id))
        if len(small) < 2 and not sort:
            continue
        bins: list[list[FileSlice]] = [[]]
        size = 0
        for s in small:
            if bins[-1] and size + _slice_bytes(s) > max_bytes_per_group:
                bins.append([])
                size = 0
            bins[-1].append(s)
            size += _slice_bytes(s)
        for b in bins:
            if len(b) < 2 and not sort:
                continue
            total = sum(_slice_bytes(s) for s in b)
            groups.append(ClusteringGroup(
                slices=[SliceInfo(s.partition, s.file_id, s.base.path if s.base else None, [lg.path for lg in s.logs])
                        for s in b],
                num_output_file_groups=max(1, math.ceil(total / target_file_size)),
                metrics={"TOTAL_FILE_SIZE": float(total), "NUM_SLICES": float(len(b))}))
    return groups


def _check(ctx: TableContext, options: ClusteringOptions) -> None:
    if ctx.config.index_type == "BUCKET":
        raise ConfigError("clustering is not supported with the bucket index: it maps every key to a fixed file "
                          "group, and clustering writes new file groups")
    avro = ctx.meta.load_timeline().latest_schema() or ctx.config.create_schema
    if avro is None:  # no data yet: nothing to cluster
        return
    columns = {f.name: f.type for f in table_arrow_schema(avro, with_meta=False)}
    for c in options.sort_by:
        if c not in columns:
            raise InvalidInputError(f"cannot cluster by {c!r}: no such column (columns: {', '.join(columns)})")
        t = columns[c]
        if pa.types.is_nested(t):
            raise InvalidInputError(f"cannot cluster by {c!r}: a {t} column has no sort order")
    for name, value in (("small_file_limit", options.small_file_limit),
                        ("target_file_size", options.target_file_size),
                        ("max_bytes_per_group", options.max_bytes_per_group)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1 byte, got {value}")


def cluster(ctx: TableContext, options: ClusteringOptions) -> CommitResult | None:
    """Plan and execute one clustering; returns None when no partition has small file groups to rewrite."""
    _check(ctx, options)
    io, config = ctx.io, ctx.config
    timeline = ctx.meta.load_timeline()
    latest = timeline.latest_completed()
    if latest is None:
        return None
    listing = list_table_files(io, set(options.partitions) if options.partitions is not None else None)
    slices = latest_file_slices(listing, timeline)
    written = written_files(timeline)
    check_slices(slices, written, join=io.base)  # never rewrite a damaged slice
    if options.partitions is not None:
        unknown = sorted(set(options.partitions) - {s.partition for s in slices})
        if unknown:
            raise InvalidInputError(f"cannot cluster partitions {unknown}: they hold no file groups")
    target = options.target_file_size or config.target_file_size
    groups = plan_groups(slices, small_file_limit=options.small_file_limit or config.small_file_limit,
                         target_file_size=target, max_bytes_per_group=options.max_bytes_per_group or 4 * target,
                         sort=bool(options.sort_by))
    if not groups:
        return None
    params = {SORT_COLUMNS_PARAM: ",".join(options.sort_by)} if options.sort_by else {}
    partitions = {s.partition_path for g in groups for s in g.slices}
    started = time.monotonic()
    plan = clustering_requested_replace(groups, EXECUTION_STRATEGY, params)
    # version 8 keeps a pending clustering under its own action; it completes as a replacecommit either way
    action = Action.CLUSTERING if ctx.config.completion_times else Action.REPLACE_COMMIT
    with Transaction(ctx, action, plan=plan) as tx:
        tx.mark_inflight()
        instant = tx.instant.time
        avro, read_job, write_job = rewrite_jobs(ctx, timeline, instant, written)
        stats = _run(ctx, groups, cx.ClusteringJob(read_job, write_job, options.sort_by))
        ctx.meta.remove_unlisted_files(instant, partitions, {s.file_name for s in stats if s.file_name})
        replaced: dict[str, list[str]] = {}
        for g in groups:
            for s in g.slices:
                replaced.setdefault(s.partition_path, []).append(s.file_id)
        metadata = CommitMetadata(operation_type="CLUSTER", write_stats=tuple(stats),
                                  extra_metadata={SCHEMA_KEY: canonical_json(json.loads(avro))},
                                  replaced_file_ids={p: tuple(sorted(ids)) for p, ids in sorted(replaced.items())})
        tx.publish(metadata, base_instant=latest.time, pending_at_start=[i.time for i in timeline.pending()])
    n_replaced = sum(len(g.slices) for g in groups)
    logger.info("clustered %d file groups into %d at %s in %.1fs", n_replaced, len(stats), instant,
                time.monotonic() - started)
    return CommitResult(instant=instant, operation="CLUSTER", inserted=0, updated=0, deleted=0,
                        files_written=len(stats), bytes_written=sum(s.total_write_bytes for s in stats),
                        replaced_file_groups=n_replaced)


def _run(ctx: TableContext, groups: list[ClusteringGroup], job: cx.ClusteringJob) -> list[WriteStat]:
    # the new file ids are chosen here, so a retried task rewrites the same file groups
    desc = cx.group_descriptors([
        (g.slices[0].partition_path, [(s.data_file_path, s.delta_file_paths) for s in g.slices],
         [new_file_id() for _ in range(g.num_output_file_groups)])
        for g in groups])
    return ctx.engine.run_tasks(desc, lambda d, token: cx.cluster_group(d, job, token))
