"""Commit metadata (``HoodieCommitMetadata`` / ``HoodieReplaceCommitMetadata``), field for field as Hudi writes it:
JSON in table version 6 (Hudi 0.14/0.15, format reference §3), Avro with the same field names in versions 8 and 9
(docs/hudi-v8-format.md)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import fastavro

SCHEMA_KEY = "schema"
AVRO_MAGIC = b"Obj\x01"
LOG_CRC_KEY = "lakegate.logCrc32"
"""Extra-metadata key of Avro commit metadata (versions 8 and 9, whose write-stat schema has no field for it): a
JSON object of log file path -> CRC-32 of the bytes that write appended."""


@dataclass(frozen=True)
class WriteStat:
    """What one write did to one file group (a Hudi ``HoodieWriteStat``)."""

    file_id: str
    path: str | None
    partition_path: str
    prev_commit: str = "null"
    num_writes: int = 0
    num_deletes: int = 0
    num_update_writes: int = 0
    num_inserts: int = 0
    total_write_bytes: int = 0
    file_size_in_bytes: int = 0
    total_upsert_time_ms: int = 0
    total_create_time_ms: int = 0
    # delta write stats (a MOR log append, Hudi's HoodieDeltaWriteStat); log_version is None for base-file writes
    base_file: str | None = None
    log_files: tuple[str, ...] = ()
    log_version: int | None = None
    log_offset: int | None = None
    # CRC-32 of the bytes a log write appended (lakegate's ``lakegateCrc32``; Hudi's readers ignore the field)
    crc32: int | None = None
    # CDC log files the write left beside its base file: path relative to the table -> size (Hudi's ``cdcStats``)
    cdc_stats: Mapping[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """The Jackson-shaped dict, keys in Hudi's order."""
        out: dict[str, Any] = {
            "fileId": self.file_id,
            "path": self.path,
            "cdcStats": dict(self.cdc_stats) if self.cdc_stats else None,
            "prevCommit": self.prev_commit,
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": 0,
            "tempPath": None,
            "partitionPath": self.partition_path,
            "totalLogRecords": 0,
            "totalLogFilesCompacted": 0,
            "totalLogSizeCompacted": 0,
            "totalUpdatedRecordsCompacted": 0,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": self.file_size_in_bytes,
            "minEventTime": None,
            "maxEventTime": None,
            "runtimeStats": {
                "totalScanTime": 0,
                "totalUpsertTime": self.total_upsert_time_ms,
                "totalCreateTime": self.total_create_time_ms,
            },
        }
        if self.log_version is not None:
            out.update({"logVersion": self.log_version, "logOffset": self.log_offset or 0,
                        "baseFile": self.base_file or "", "logFiles": list(self.log_files), "recordsStats": None})
        if self.crc32 is not None:
            out["lakegateCrc32"] = self.crc32
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any], partition_path: str) -> WriteStat:
        """Parse one write stat; tolerant of the missing fields Java's inflight files have."""
        runtime = d.get("runtimeStats") or {}
        return cls(
            file_id=d.get("fileId") or "",
            path=d.get("path"),
            partition_path=str(d["partitionPath"]) if d.get("partitionPath") is not None else partition_path,
            prev_commit=str(d.get("prevCommit", "null")),
            num_writes=int(d.get("numWrites") or 0),
            num_deletes=int(d.get("numDeletes") or 0),
            num_update_writes=int(d.get("numUpdateWrites") or 0),
            num_inserts=int(d.get("numInserts") or 0),
            total_write_bytes=int(d.get("totalWriteBytes") or 0),
            file_size_in_bytes=int(d.get("fileSizeInBytes") or 0),
            total_upsert_time_ms=int(runtime.get("totalUpsertTime") or 0),
            total_create_time_ms=int(runtime.get("totalCreateTime") or 0),
            base_file=d.get("baseFile") or None,
            log_files=tuple(d.get("logFiles") or ()),
            log_version=int(d["logVersion"]) if d.get("logVersion") is not None else None,
            log_offset=int(d["logOffset"]) if d.get("logOffset") is not None else None,
            crc32=int(d["lakegateCrc32"]) if d.get("lakegateCrc32") is not None else None,
            cdc_stats={str(k): int(v) for k, v in d["cdcStats"].items()} if d.get("cdcStats") else None,
        )

    @property
    def file_name(self) -> str | None:
        """The bare file name of ``path``."""
        return self.path.rsplit("/", 1)[-1] if self.path else None


@dataclass(frozen=True)
class CommitMetadata:
    """The content of a completed (or inflight) commit / replacecommit file."""

    operation_type: str
    write_stats: tuple[WriteStat, ...] = ()
    extra_metadata: dict[str, str] = field(default_factory=dict)
    replaced_file_ids: dict[str, tuple[str, ...]] | None = None  # replacecommit only
    compacted: bool = False

    @property
    def schema(self) -> str | None:
        """The Avro schema string this commit wrote with, if recorded."""
        return self.extra_metadata.get(SCHEMA_KEY)

    def partitions(self) -> set[str]:
        """Partitions this commit wrote to or replaced in."""
        out = {s.partition_path for s in self.write_stats}
        out.update((self.replaced_file_ids or {}).keys())
        return out

    def touched_file_ids(self) -> set[tuple[str, str]]:
        """(partition, fileId) of every file group written or replaced."""
        out = {(s.partition_path, s.file_id) for s in self.write_stats if s.file_id}
        for p, ids in (self.replaced_file_ids or {}).items():
            out.update((p, i) for i in ids)
        return out

    def with_extra(self, extra: dict[str, str]) -> CommitMetadata:
        """A copy with more extra metadata merged in."""
        return replace(self, extra_metadata={**self.extra_metadata, **extra})

    def to_json(self) -> dict[str, Any]:
        """The Jackson-shaped dict."""
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for s in self.write_stats:
            by_partition.setdefault(s.partition_path, []).append(s.to_json())
        out: dict[str, Any] = {"partitionToWriteStats": by_partition, "compacted": self.compacted,
                               "extraMetadata": dict(self.extra_metadata), "operationType": self.operation_type}
        if self.replaced_file_ids is not None:
            out["partitionToReplaceFileIds"] = {p: list(ids) for p, ids in self.replaced_file_ids.items()}
        return out

    def to_bytes(self) -> bytes:
        """Pretty UTF-8 JSON, as Jackson writes it."""
        return json.dumps(self.to_json(), indent=2).encode()

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CommitMetadata:
        """Parse a commit metadata dict."""
        stats: list[WriteStat] = []
        for p, lst in (d.get("partitionToWriteStats") or {}).items():
            stats.extend(WriteStat.from_json(s, p) for s in lst or [])
        replaced = d.get("partitionToReplaceFileIds")
        return cls(
            operation_type=d.get("operationType") or "UNKNOWN",
            write_stats=tuple(stats),
            extra_metadata={k: str(v) for k, v in (d.get("extraMetadata") or {}).items()},
            replaced_file_ids=None if replaced is None else {p: tuple(v) for p, v in replaced.items()},
            compacted=bool(d.get("compacted", False)),
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> CommitMetadata:
        """Parse commit metadata file content: JSON (table version 6) or an Avro object container holding one
        ``HoodieCommitMetadata`` / ``HoodieReplaceCommitMetadata`` record (versions 8 and 9), whose fields carry the
        JSON's names. Raises ValueError if it is neither."""
        if data.startswith(AVRO_MAGIC):
            records = list(fastavro.reader(io.BytesIO(data)))
            if len(records) != 1 or not isinstance(records[0], dict):
                raise ValueError(f"an Avro commit metadata file holds {len(records)} records, not one")
            record = records[0]
            crcs = json.loads((record.get("extraMetadata") or {}).get(LOG_CRC_KEY) or "{}")
            if crcs:  # the stats carry them as in a version-6 file's JSON
                for stats in (record.get("partitionToWriteStats") or {}).values():
                    for st in stats or ():
                        if st.get("path") in crcs:
                            st["lakegateCrc32"] = int(crcs[st["path"]])
            return cls.from_json(record)
        return cls.from_json(json.loads(data.decode()))


def placeholder_inflight(operation_type: str, partitions: Iterable[str], file_ids: Iterable[tuple[str, str]],
                         extra: dict[str, str] | None = None) -> CommitMetadata:
    """The inflight 'workload profile': one placeholder stat per partition and one per planned file group."""
    stats = [WriteStat(file_id="", path=None, partition_path=p) for p in sorted(set(partitions))]
    stats += [WriteStat(file_id=fid, path=None, partition_path=p) for p, fid in sorted(set(file_ids))]
    return CommitMetadata(operation_type=operation_type, write_stats=tuple(stats), extra_metadata=extra or {})
