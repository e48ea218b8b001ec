"""The Avro schemas of Hudi's service instant files (table version 6 / Hudi 0.14-0.15), in the exact JSON Java
writes into the file header.

Reading. Any Avro OCF with one record is read with the schema embedded in it (Java does the same). The typed
readers resolve it against this module's schema, so older or newer variants of a schema (fields added with
defaults) come out in one shape.

Schemas. Hudi 0.14/0.15, ``hudi-common/src/main/avro``, reproduced as format facts (field names, order, types,
defaults, union branch order, namespaces). Provenance:

- confirmed byte for byte against files written by Hudi 0.14/0.15: ``HoodieRollbackPlan``,
  ``HoodieRollbackMetadata``, ``HoodieRequestedReplaceMetadata`` (with the whole clustering plan: group, slice,
  strategy) and so ``HoodieInstantInfo``;
- ``HoodieCompactionPlan`` (+ operation, strategy): the schema Hudi 1.0 embeds in its compaction plans minus the
  1.x-only ``missingSchedulePartitions``;
- cleaner plan, clean metadata, savepoint, restore plan and restore metadata: from the avsc sources of that
  release line, without the ``extraMetadata`` fields Hudi added to the clean plan/metadata and restore metadata
  after 0.15. No 0.14/0.15 file of these kinds was available to compare with.

Where a detail is uncertain it cannot break Java: a Java reader resolves our (embedded) writer schema against its
own, matching fields by name and union branches by type; a field it has and we lack takes its default, and a
field we write that it lacks is skipped.

"""

from __future__ import annotations

import json
from typing import Any

import fastavro

NAMESPACE = "org.apache.hudi.avro.model"

# plan / metadata versions Hudi 0.14/0.15 writes
COMPACTION_PLAN_VERSION = 2  # v2: bare file names in deltaFilePaths / dataFilePath
CLEAN_PLAN_VERSION = 2
CLEAN_METADATA_VERSION = 2
ROLLBACK_PLAN_VERSION = 1
ROLLBACK_METADATA_VERSION = 1
SAVEPOINT_METADATA_VERSION = 1
RESTORE_PLAN_VERSION = 2
RESTORE_METADATA_VERSION = 1
CLUSTERING_PLAN_VERSION = 1

# operationType of a clustering replacecommit.requested (Java: WriteOperationType.CLUSTER.name())
CLUSTER_OPERATION = "CLUSTER"

_NO_DEFAULT = object()

# ---------------------------------------------------------------------------------------------------------------
# Schemas, in the JSON shape Java's Schema.toString() gives Hudi's generated classes (key order matters: it is
# the exact text of the OCF header). Small constructors keep the many repeated shapes identical.
# ---------------------------------------------------------------------------------------------------------------


def _str() -> dict[str, Any]:
    return {"type": "string", "avro.java.string": "String"}


def _array(items: Any, **props: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, **props}


def _map(values: Any, **props: Any) -> dict[str, Any]:
    return {"type": "map", "values": values, "avro.java.string": "String", **props}


def _field(name: str, type_: Any, default: Any = _NO_DEFAULT, doc: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": type_}
    if doc is not None:
        out["doc"] = doc
    if default is not _NO_DEFAULT:
        out["default"] = default
    return out


def _record(name: str, fields: list[dict[str, Any]], top_level: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "record", "name": name}
    if top_level:
        out["namespace"] = NAMESPACE
    out["fields"] = fields
    return out


def _opt(type_: Any) -> list[Any]:
    return ["null", type_]


def _version(default: int) -> dict[str, Any]:
    return _field("version", ["int", "null"], default)


def _instant_info() -> dict[str, Any]:
    return _record("HoodieInstantInfo", [_field("commitTime", _str()), _field("action", _str())])


def _rollback_metadata(top_level: bool) -> dict[str, Any]:
    partition = _record(
        "HoodieRollbackPartitionMetadata",
        [
            _field("partitionPath", _str()),
            _field("successDeleteFiles", _array(_str())),
            _field("failedDeleteFiles", _array(_str())),
            _field("rollbackLogFiles", _opt(_map("long")), None),
            _field("logFilesFromFailedCommit", _opt(_map("long")), None),
        ],
    )
    return _record(
        "HoodieRollbackMetadata",
        [
            _field("startRollbackTime", _str()),
            _field("timeTakenInMillis", "long"),
            _field("totalFilesDeleted", "int"),
            _field("commitsRollback", _array(_str())),
            _field("partitionMetadata", _map(partition)),
            _version(1),
            _field("instantsRollback", _array(_instant_info(), default=[]), []),
        ],
        top_level,
    )


def _compaction_plan() -> dict[str, Any]:
    operation = _record(
        "HoodieCompactionOperation",
        [
            _field("baseInstantTime", _opt(_str())),
            _field("deltaFilePaths", _opt(_array(_str())), None),
            _field("dataFilePath", _opt(_str()), None),
            _field("fileId", _opt(_str())),
            _field("partitionPath", _opt(_str()), None),
            _field("metrics", _opt(_map("double")), None),
            _field("bootstrapFilePath", _opt(_str()), None),
        ],
    )
    strategy = _record(
        "HoodieCompactionStrategy",
        [
            _field(
                "compactorClassName",
                _opt(_str()),
                None,
                "The class name that is provided here should extend CompactionExecutionStrategy abstract class, "
                "idea is that the plan generator will also provide the execution strategy to use.",
            ),
            _field(
                "strategyParams",
                _opt(_map(_str())),
                None,
                "These parameters play a key role in determining which action type it is i.e. compaction or "
                "logcompaction and it will also include configs that determine how compaction needs to be executed.",
            ),
            _version(1),
        ],
    )
    return _record(
        "HoodieCompactionPlan",
        [
            _field("operations", _opt(_array(operation)), None),
            _field("extraMetadata", _opt(_map(_str())), None),
            _version(1),
            _field("strategy", _opt(strategy), None),
            _field("preserveHoodieMetadata", ["boolean", "null"], False),
        ],
        True,
    )


def _cleaner_plan() -> dict[str, Any]:
    action_instant = _record(
        "HoodieActionInstant", [_field("timestamp", _str()), _field("action", _str()), _field("state", _str())]
    )
    file_info = _record(
        "HoodieCleanFileInfo",
        [_field("filePath", _opt(_str()), None), _field("isBootstrapBaseFile", _opt("boolean"), None)],
    )
    return _record(
        "HoodieCleanerPlan",
        [
            _field("earliestInstantToRetain", _opt(action_instant), None),
            _field("lastCompletedCommitTimestamp", _str(), ""),
            _field("policy", _str()),
            _field("filesToBeDeletedPerPartition", _opt(_map(_array(_str()))), None),
            _version(1),
            _field(
                "filePathsToBeDeletedPerPartition",
                _opt(_map(_array(file_info))),
                None,
                "This field replaces the field filesToBeDeletedPerPartition",
            ),
            _field("partitionsToBeDeleted", _opt(_array(_str())), None, "partitions to be deleted"),
        ],
        True,
    )


def _clean_metadata() -> dict[str, Any]:
    partition = _record(
        "HoodieCleanPartitionMetadata",
        [
            _field("partitionPath", _str()),
            _field("policy", _str()),
            _field("deletePathPatterns", _array(_str())),
            _field("successDeleteFiles", _array(_str())),
            _field("failedDeleteFiles", _array(_str())),
            _field("isPartitionDeleted", _opt("boolean"), None),
        ],
    )
    return _record(
        "HoodieCleanMetadata",
        [
            _field("startCleanTime", _str()),
            _field("timeTakenInMillis", "long"),
            _field("totalFilesDeleted", "int"),
            _field("earliestCommitToRetain", _str()),
            _field("lastCompletedCommitTimestamp", _str(), ""),
            _field("partitionMetadata", _map(partition)),
            _version(1),
            _field("bootstrapPartitionMetadata", _opt(_map("HoodieCleanPartitionMetadata", default=None)), None),
        ],
        True,
    )


def _rollback_plan() -> dict[str, Any]:
    request = _record(
        "HoodieRollbackRequest",
        [
            _field("partitionPath", _str()),
            _field("fileId", _opt(_str()), None),
            _field("latestBaseInstant", _opt(_str()), None),
            _field("filesToBeDeleted", _array(_str(), default=[]), []),
            _field("logBlocksToBeDeleted", _opt(_map("long")), None),
        ],
    )
    return _record(
        "HoodieRollbackPlan",
        [
            _field("instantToRollback", _opt(_instant_info()), None, "Hoodie instant that needs to be rolled back"),
            _field("RollbackRequests", _opt(_array(request)), None),
            _version(1),
        ],
        True,
    )


def _savepoint_metadata() -> dict[str, Any]:
    partition = _record(
        "HoodieSavepointPartitionMetadata",
        [_field("partitionPath", _str()), _field("savepointDataFile", _array(_str()))],
    )
    return _record(
        "HoodieSavepointMetadata",
        [
            _field("savepointedBy", _str()),
            _field("savepointedAt", "long"),
            _field("comments", _str()),
            _field("partitionMetadata", _map(partition)),
            _version(1),
        ],
        True,
    )


def _restore_plan() -> dict[str, Any]:
    return _record(
        "HoodieRestorePlan",
        [
            _field("instantsToRollback", _array(_instant_info(), default=None), []),
            _version(2),
            _field("savepointToRestoreTimestamp", [_str(), "null"], None),
        ],
        True,
    )


def _restore_metadata() -> dict[str, Any]:
    return _record(
        "HoodieRestoreMetadata",
        [
            _field("startRestoreTime", _str()),
            _field("timeTakenInMillis", "long"),
            _field("instantsToRollback", _array(_str())),
            _field("hoodieRestoreMetadata", _map(_array(_opt(_rollback_metadata(False)), default=None))),
            _version(1),
            _field("restoreInstantInfo", _array("HoodieInstantInfo", default=None), []),
        ],
        True,
    )


def _requested_replace_metadata() -> dict[str, Any]:
    slice_info = _record(
        "HoodieSliceInfo",
        [
            _field("dataFilePath", _opt(_str()), None),
            _field("deltaFilePaths", _opt(_array(_str())), None),
            _field("fileId", _opt(_str())),
            _field("partitionPath", _opt(_str()), None),
            _field("bootstrapFilePath", _opt(_str()), None),
            _version(1),
        ],
    )
    group = _record(
        "HoodieClusteringGroup",
        [
            _field("slices", _opt(_array(slice_info)), None),
            _field("metrics", _opt(_map("double")), None),
            _field("numOutputFileGroups", ["int", "null"], 1),
            _field("extraMetadata", _opt(_map(_str())), None),
            _version(1),
        ],
    )
    strategy = _record(
        "HoodieClusteringStrategy",
        [
            _field("strategyClassName", _opt(_str()), None),
            _field("strategyParams", _opt(_map(_str())), None),
            _version(1),
        ],
    )
    plan = _record(
        "HoodieClusteringPlan",
        [
            _field("inputGroups", _opt(_array(group)), None),
            _field("strategy", _opt(strategy), None),
            _field("extraMetadata", _opt(_map(_str())), None),
            _version(1),
            _field("preserveHoodieMetadata", _opt("boolean"), None),
        ],
    )
    return _record(
        "HoodieRequestedReplaceMetadata",
        [
            _field("operationType", _opt(_str()), None),
            _field("clusteringPlan", _opt(plan), None),
            _field("extraMetadata", _opt(_map(_str())), None),
            _version(1),
        ],
        True,
    )


SCHEMAS: dict[str, dict[str, Any]] = {
    "compaction_plan": _compaction_plan(),
    "cleaner_plan": _cleaner_plan(),
    "clean_metadata": _clean_metadata(),
    "rollback_plan": _rollback_plan(),
    "rollback_metadata": _rollback_metadata(True),
    "savepoint_metadata": _savepoint_metadata(),
    "restore_plan": _restore_plan(),
    "restore_metadata": _restore_metadata(),
    "requested_replace_metadata": _requested_replace_metadata(),
}
"""Kind -> Avro schema (Hudi 0.14/0.15) in the JSON shape Java embeds in the file header."""

KIND_BY_RECORD_NAME: dict[str, str] = {f"{NAMESPACE}.{schema['name']}": kind for kind, schema in SCHEMAS.items()}

_SCHEMA_TEXT: dict[str, str] = {kind: json.dumps(s, separators=(",", ":")) for kind, s in SCHEMAS.items()}
_PARSED: dict[str, Any] = {}


def parsed_schema(kind: str) -> Any:
    """The fastavro-parsed schema of ``kind`` (cached)."""
    if kind not in SCHEMAS:
        raise ValueError(f"unknown instant kind {kind!r}; expected one of {sorted(SCHEMAS)}")
    if kind not in _PARSED:
        # parse a copy: fastavro annotates the dict it is given
        _PARSED[kind] = fastavro.parse_schema(json.loads(_SCHEMA_TEXT[kind]))
    return _PARSED[kind]


def schema_json(kind: str) -> str:
    """The schema of ``kind`` exactly as it is written into the file header (compact JSON)."""
    parsed_schema(kind)
    return _SCHEMA_TEXT[kind]


