"""Typed builders and readers of Hudi's service instant files (table version 6 / Hudi 0.14-0.15, format reference
§2 and §9): compaction plans, cleaner plans and clean metadata, rollback plans and metadata, savepoints, restore
plans and metadata, clustering (requested replace) plans. The container encoding is in
:mod:`tablecore.format.instant_avro`, the schemas in :mod:`tablecore.format.service_schemas`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tablecore.format.instant_avro import decode_instant_avro, encode_instant_avro
from tablecore.format.service_schemas import (
    CLEAN_METADATA_VERSION,
    CLEAN_PLAN_VERSION,
    CLUSTER_OPERATION,
    CLUSTERING_PLAN_VERSION,
    COMPACTION_PLAN_VERSION,
    RESTORE_METADATA_VERSION,
    RESTORE_PLAN_VERSION,
    ROLLBACK_METADATA_VERSION,
    ROLLBACK_PLAN_VERSION,
    SAVEPOINT_METADATA_VERSION,
)

Instant = tuple[str, str]
"""(instant time, action), e.g. ``("20250126040826878", "deltacommit")``."""


def _instant_infos(instants: Iterable[Instant]) -> list[dict[str, str]]:
    return [{"commitTime": t, "action": a} for t, a in instants]


@dataclass
class CompactionOperation:
    """One file group to compact (``HoodieCompactionOperation``, plan version 2: bare file names)."""

    base_instant: str
    file_id: str
    partition_path: str
    data_file_name: str | None
    delta_file_names: list[str]
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class RollbackRequest:
    """What to undo in one file group (``HoodieRollbackRequest``); paths as Hudi writes them (full paths)."""

    partition_path: str
    file_id: str
    latest_base_instant: str
    files_to_delete: list[str]
    log_blocks_to_delete: dict[str, int] = field(default_factory=dict)


@dataclass
class RollbackPartition:
    """What a rollback did in one partition (``HoodieRollbackPartitionMetadata``)."""

    deleted_files: list[str]
    failed_files: list[str] = field(default_factory=list)
    rollback_log_files: dict[str, int] = field(default_factory=dict)
    log_files_from_failed_commit: dict[str, int] = field(default_factory=dict)


@dataclass
class SliceInfo:
    """One file slice in a clustering group (``HoodieSliceInfo``); file paths are full paths, as Hudi writes."""

    partition_path: str
    file_id: str
    data_file_path: str | None
    delta_file_paths: list[str] = field(default_factory=list)


@dataclass
class ClusteringGroup:
    """A set of file slices rewritten together into ``num_output_file_groups`` new groups."""

    slices: list[SliceInfo]
    num_output_file_groups: int = 1
    metrics: dict[str, float] = field(default_factory=dict)


def _bare_name(name: str) -> str:
    if "/" in name:
        raise ValueError(f"compaction plan version 2 takes bare file names, not paths: {name!r}")
    return name


def compaction_plan(
    operations: Sequence[CompactionOperation],
    *,
    extra_metadata: Mapping[str, str] | None = None,
    preserve_hoodie_metadata: bool = True,
) -> bytes:
    """A ``T.compaction.requested`` file: a ``HoodieCompactionPlan`` of version 2 (bare file names).

    ``preserve_hoodie_metadata`` says the compacted base files keep each record's meta columns (Hudi's behaviour
    since 0.13). No strategy is recorded (Java leaves it null for plain compaction).
    """
    record = {
        "operations": [
            {
                "baseInstantTime": op.base_instant,
                "deltaFilePaths": [_bare_name(n) for n in op.delta_file_names],
                "dataFilePath": None if op.data_file_name is None else _bare_name(op.data_file_name),
                "fileId": op.file_id,
                "partitionPath": op.partition_path,
                "metrics": {k: float(v) for k, v in op.metrics.items()},
                "bootstrapFilePath": None,
            }
            for op in operations
        ],
        "extraMetadata": None if extra_metadata is None else dict(extra_metadata),
        "version": COMPACTION_PLAN_VERSION,
        "strategy": None,
        "preserveHoodieMetadata": preserve_hoodie_metadata,
    }
    return encode_instant_avro("compaction_plan", record)


def read_compaction_plan(data: bytes) -> list[CompactionOperation]:
    """The operations of a compaction plan (``T.compaction.requested`` or a non-empty ``.inflight``).

    Plans of version 1 and older hold paths; they are reduced to file names, which is what version 2 means.
    """
    plan = decode_instant_avro(data, "compaction_plan")
    out = []
    for op in plan["operations"] or []:
        data_file = op["dataFilePath"]
        out.append(
            CompactionOperation(
                base_instant=op["baseInstantTime"],
                file_id=op["fileId"],
                partition_path=op["partitionPath"] or "",
                data_file_name=posixpath.basename(data_file) if data_file else None,
                delta_file_names=[posixpath.basename(p) for p in op["deltaFilePaths"] or []],
                metrics=dict(op["metrics"] or {}),
            )
        )
    return out


def cleaner_plan(
    earliest_instant_to_retain: Instant | None,
    last_completed_commit: str,
    policy: str,
    files_by_partition: Mapping[str, Sequence[str]],
    partitions_to_delete: Sequence[str] = (),
) -> bytes:
    """A ``T.clean.requested`` (and ``T.clean.inflight``) file: a ``HoodieCleanerPlan`` of version 2.

    ``files_by_partition`` maps a partition path to the full paths of the files to delete; ``policy`` is a Hudi
    cleaning policy name such as ``KEEP_LATEST_COMMITS``. The deprecated ``filesToBeDeletedPerPartition`` is
    written as an empty map, as Java does.
    """
    record = {
        "earliestInstantToRetain": None
        if earliest_instant_to_retain is None
        else {
            "timestamp": earliest_instant_to_retain[0],
            "action": earliest_instant_to_retain[1],
            "state": "COMPLETED",
        },
        "lastCompletedCommitTimestamp": last_completed_commit,
        "policy": policy,
        "filesToBeDeletedPerPartition": {},
        "version": CLEAN_PLAN_VERSION,
        "filePathsToBeDeletedPerPartition": {
            p: [{"filePath": f, "isBootstrapBaseFile": False} for f in files] for p, files in files_by_partition.items()
        },
        "partitionsToBeDeleted": list(partitions_to_delete),
    }
    return encode_instant_avro("cleaner_plan", record)


def read_cleaner_plan_files(data: bytes) -> dict[str, list[str]]:
    """Partition path -> paths of the files a clean plan deletes (falls back to the pre-version-2 field)."""
    plan = decode_instant_avro(data, "cleaner_plan")
    by_path = plan["filePathsToBeDeletedPerPartition"]
    if by_path:
        return {p: [i["filePath"] for i in infos if i["filePath"]] for p, infos in by_path.items()}
    return {p: list(files) for p, files in (plan["filesToBeDeletedPerPartition"] or {}).items()}


def clean_metadata(
    start_clean_time: str,
    time_taken_ms: int,
    earliest_commit_to_retain: str,
    last_completed_commit: str,
    policy: str,
    deleted_by_partition: Mapping[str, Sequence[str]],
    failed_by_partition: Mapping[str, Sequence[str]] | None = None,
    *,
    deleted_partitions: Iterable[str] = (),
) -> bytes:
    """A completed ``T.clean`` file: a ``HoodieCleanMetadata`` of version 2.

    Hudi records file names (not paths) in ``deletePathPatterns`` / ``successDeleteFiles`` /
    ``failedDeleteFiles``; paths given here are reduced to their last component. ``deleted_partitions`` marks
    partitions removed as a whole (``isPartitionDeleted``).
    """
    failed = failed_by_partition or {}
    gone = set(deleted_partitions)
    partitions = sorted(set(deleted_by_partition) | set(failed) | gone)
    meta = {}
    total = 0
    for p in partitions:
        ok = [posixpath.basename(f) for f in deleted_by_partition.get(p, ())]
        bad = [posixpath.basename(f) for f in failed.get(p, ())]
        total += len(ok)
        meta[p] = {
            "partitionPath": p,
            "policy": policy,
            "deletePathPatterns": ok + bad,
            "successDeleteFiles": ok,
            "failedDeleteFiles": bad,
            "isPartitionDeleted": p in gone,
        }
    record = {
        "startCleanTime": start_clean_time,
        "timeTakenInMillis": time_taken_ms,
        "totalFilesDeleted": total,
        "earliestCommitToRetain": earliest_commit_to_retain,
        "lastCompletedCommitTimestamp": last_completed_commit,
        "partitionMetadata": meta,
        "version": CLEAN_METADATA_VERSION,
        "bootstrapPartitionMetadata": {},
    }
    return encode_instant_avro("clean_metadata", record)


def read_clean_metadata(data: bytes) -> tuple[dict[str, list[str]], set[str]]:
    """What a completed clean deleted: the file names by partition, and the partitions it removed as a whole."""
    meta = decode_instant_avro(data, "clean_metadata")
    parts = meta.get("partitionMetadata") or {}
    files = {partition: list(p.get("successDeleteFiles") or ()) for partition, p in parts.items()}
    return files, {partition for partition, p in parts.items() if p.get("isPartitionDeleted")}


def rollback_plan(instant_time: str, action: str, requests: Sequence[RollbackRequest]) -> bytes:
    """A ``T.rollback.requested`` file: the ``HoodieRollbackPlan`` to undo instant ``instant_time`` of ``action``."""
    record = {
        "instantToRollback": {"commitTime": instant_time, "action": action},
        "RollbackRequests": [
            {
                "partitionPath": r.partition_path,
                "fileId": r.file_id,
                "latestBaseInstant": r.latest_base_instant,
                "filesToBeDeleted": list(r.files_to_delete),
                "logBlocksToBeDeleted": dict(r.log_blocks_to_delete),
            }
            for r in requests
        ],
        "version": ROLLBACK_PLAN_VERSION,
    }
    return encode_instant_avro("rollback_plan", record)


def read_rollback_plan(data: bytes) -> tuple[Instant | None, list[RollbackRequest]]:
    """The instant a rollback plan undoes and its per-file-group requests."""
    plan = decode_instant_avro(data, "rollback_plan")
    target = plan["instantToRollback"]
    requests = [
        RollbackRequest(
            partition_path=r["partitionPath"],
            file_id=r["fileId"] or "",
            latest_base_instant=r["latestBaseInstant"] or "",
            files_to_delete=list(r["filesToBeDeleted"]),
            log_blocks_to_delete=dict(r["logBlocksToBeDeleted"] or {}),
        )
        for r in plan["RollbackRequests"] or []
    ]
    return (None if target is None else (target["commitTime"], target["action"])), requests


def rollback_metadata_record(
    start_rollback_time: str,
    time_taken_ms: int,
    rolled_back: Sequence[Instant],
    partitions: Mapping[str, RollbackPartition],
) -> dict[str, Any]:
    """The ``HoodieRollbackMetadata`` record (a dict), as written by :func:`rollback_metadata` and nested in
    :func:`restore_metadata`."""
    return {
        "startRollbackTime": start_rollback_time,
        "timeTakenInMillis": time_taken_ms,
        "totalFilesDeleted": sum(len(p.deleted_files) for p in partitions.values()),
        "commitsRollback": [t for t, _ in rolled_back],
        "partitionMetadata": {
            path: {
                "partitionPath": path,
                "successDeleteFiles": list(p.deleted_files),
                "failedDeleteFiles": list(p.failed_files),
                "rollbackLogFiles": dict(p.rollback_log_files),
                "logFilesFromFailedCommit": dict(p.log_files_from_failed_commit),
            }
            for path, p in partitions.items()
        },
        "version": ROLLBACK_METADATA_VERSION,
        "instantsRollback": _instant_infos(rolled_back),
    }


def rollback_metadata(
    start_rollback_time: str,
    time_taken_ms: int,
    rolled_back: Sequence[Instant],
    partitions: Mapping[str, RollbackPartition],
) -> bytes:
    """A completed ``T.rollback`` file: the ``HoodieRollbackMetadata`` of what the rollback did."""
    record = rollback_metadata_record(start_rollback_time, time_taken_ms, rolled_back, partitions)
    return encode_instant_avro("rollback_metadata", record)


def read_rollback_metadata(data: bytes) -> tuple[list[Instant], dict[str, RollbackPartition]]:
    """The instants a completed rollback undid and what it did per partition."""
    meta = decode_instant_avro(data, "rollback_metadata")
    instants = [(i["commitTime"], i["action"]) for i in meta["instantsRollback"]]
    if not instants:  # files from before instantsRollback existed
        instants = [(t, "") for t in meta["commitsRollback"]]
    return instants, {path: _rollback_partition(p) for path, p in meta["partitionMetadata"].items()}


def _rollback_partition(p: Mapping[str, Any]) -> RollbackPartition:
    """One partition of a ``HoodieRollbackMetadata`` record."""
    return RollbackPartition(
        deleted_files=list(p.get("successDeleteFiles") or ()),
        failed_files=list(p.get("failedDeleteFiles") or ()),
        rollback_log_files=dict(p.get("rollbackLogFiles") or {}),
        log_files_from_failed_commit=dict(p.get("logFilesFromFailedCommit") or {}),
    )


def savepoint_metadata(
    saved_by: str, time_ms: int, comments: str, files_by_partition: Mapping[str, Sequence[str]]
) -> bytes:
    """A completed ``T.savepoint`` file: ``HoodieSavepointMetadata`` listing the latest base file names per
    partition; ``time_ms`` is epoch milliseconds (Java: ``System.currentTimeMillis()``)."""
    record = {
        "savepointedBy": saved_by,
        "savepointedAt": time_ms,
        "comments": comments,
        "partitionMetadata": {
            p: {"partitionPath": p, "savepointDataFile": list(files)} for p, files in files_by_partition.items()
        },
        "version": SAVEPOINT_METADATA_VERSION,
    }
    return encode_instant_avro("savepoint_metadata", record)


def read_savepoint_files(data: bytes) -> dict[str, list[str]]:
    """Partition path -> file names a savepoint keeps."""
    meta = decode_instant_avro(data, "savepoint_metadata")
    return {p: list(m["savepointDataFile"]) for p, m in meta["partitionMetadata"].items()}


def restore_plan(instants_to_rollback: Sequence[Instant], *, savepoint_to_restore: str | None = None) -> bytes:
    """A ``T.restore.requested`` file: the ``HoodieRestorePlan`` listing the instants to roll back (newest first,
    as Hudi orders them) and optionally the savepoint being restored."""
    record = {
        "instantsToRollback": _instant_infos(instants_to_rollback),
        "version": RESTORE_PLAN_VERSION,
        "savepointToRestoreTimestamp": savepoint_to_restore,
    }
    return encode_instant_avro("restore_plan", record)


def restore_metadata(
    start_restore_time: str,
    time_taken_ms: int,
    instants_to_rollback: Sequence[str],
    rollback_metadata_by_instant: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    restore_instant_info: Sequence[Instant] | None = None,
) -> bytes:
    """A completed ``T.restore`` file: ``HoodieRestoreMetadata``.

    ``rollback_metadata_by_instant`` maps each rolled-back instant time to its ``HoodieRollbackMetadata`` records
    (see :func:`rollback_metadata_record`). ``restore_instant_info`` ((time, action) pairs) defaults to the
    instants named in those records' ``instantsRollback``, in the order of ``instants_to_rollback``.
    """
    if restore_instant_info is None:
        actions = {
            i["commitTime"]: i["action"]
            for records in rollback_metadata_by_instant.values()
            for r in records
            for i in r.get("instantsRollback", [])
        }
        restore_instant_info = [(t, actions[t]) for t in instants_to_rollback if t in actions]
    record = {
        "startRestoreTime": start_restore_time,
        "timeTakenInMillis": time_taken_ms,
        "instantsToRollback": list(instants_to_rollback),
        "hoodieRestoreMetadata": {t: [dict(r) for r in rs] for t, rs in rollback_metadata_by_instant.items()},
        "version": RESTORE_METADATA_VERSION,
        "restoreInstantInfo": _instant_infos(restore_instant_info),
    }
    return encode_instant_avro("restore_metadata", record)


def read_restore_metadata(data: bytes) -> tuple[list[str], list[tuple[str, RollbackPartition]]]:
    """The instants a completed restore rolled back, and what each of its rollbacks did, as (partition, what)
    pairs (a partition appears once per rollback that touched it)."""
    meta = decode_instant_avro(data, "restore_metadata")
    parts = [(partition, _rollback_partition(p))
             for records in (meta.get("hoodieRestoreMetadata") or {}).values() for record in records or ()
             for partition, p in (record.get("partitionMetadata") or {}).items()]
    return [str(t) for t in meta.get("instantsToRollback") or ()], parts


def read_restore_plan(data: bytes) -> list[str]:
    """The instant times a pending restore's plan rolls back."""
    plan = decode_instant_avro(data, "restore_plan")
    return [str(i["commitTime"]) for i in plan.get("instantsToRollback") or ()]


def clustering_requested_replace(
    groups: Sequence[ClusteringGroup],
    strategy_class: str,
    params: Mapping[str, str],
    *,
    preserve_hoodie_metadata: bool = True,
) -> bytes:
    """A ``T.replacecommit.requested`` file for clustering: ``HoodieRequestedReplaceMetadata`` with operation type
    ``CLUSTER`` (Java compares it with ``WriteOperationType.CLUSTER.name()``) and the clustering plan."""
    plan = {
        "inputGroups": [
            {
                "slices": [
                    {
                        "dataFilePath": s.data_file_path if s.data_file_path is not None else "",
                        "deltaFilePaths": list(s.delta_file_paths),
                        "fileId": s.file_id,
                        "partitionPath": s.partition_path,
                        "bootstrapFilePath": "",
                        "version": 1,
                    }
                    for s in g.slices
                ],
                "metrics": {k: float(v) for k, v in g.metrics.items()},
                "numOutputFileGroups": g.num_output_file_groups,
                "extraMetadata": None,
                "version": 1,
            }
            for g in groups
        ],
        "strategy": {"strategyClassName": strategy_class, "strategyParams": dict(params), "version": 1},
        "extraMetadata": {},
        "version": CLUSTERING_PLAN_VERSION,
        "preserveHoodieMetadata": preserve_hoodie_metadata,
    }
    record = {"operationType": CLUSTER_OPERATION, "clusteringPlan": plan, "extraMetadata": {}, "version": 1}
    return encode_instant_avro("requested_replace_metadata", record)


def empty_requested_replace() -> bytes:
    """The ``T.replacecommit.requested`` of an insert_overwrite / delete_partition: every field null, which is
    what Hudi 0.14/0.15 writes there (its ``version`` is null too)."""
    record = {"operationType": None, "clusteringPlan": None, "extraMetadata": None, "version": None}
    return encode_instant_avro("requested_replace_metadata", record)


def read_clustering_plan(data: bytes) -> list[ClusteringGroup]:
    """The input groups of a clustering ``replacecommit.requested`` (empty when it holds no clustering plan)."""
    meta = decode_instant_avro(data, "requested_replace_metadata")
    plan = meta["clusteringPlan"]
    if plan is None:
        return []
    return [
        ClusteringGroup(
            slices=[
                SliceInfo(
                    partition_path=s["partitionPath"] or "",
                    file_id=s["fileId"] or "",
                    data_file_path=s["dataFilePath"] or None,
                    delta_file_paths=list(s["deltaFilePaths"] or []),
                )
                for s in g["slices"] or []
            ],
            num_output_file_groups=g["numOutputFileGroups"] if g["numOutputFileGroups"] is not None else 1,
            metrics=dict(g["metrics"] or {}),
        )
        for g in plan["inputGroups"] or []
    ]
