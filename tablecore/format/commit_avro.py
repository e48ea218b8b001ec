"""Commit metadata as table versions 8 and 9 write it: an Avro object container (null codec) holding one
``HoodieCommitMetadata`` or ``HoodieReplaceCommitMetadata`` record whose fields carry the JSON names of version 6
(docs/hudi-v8-format.md).

The two writer schemas below are the schema texts that Apache Hudi 1.0/1.1 embed in these files, as read from the
headers of the completed instants of the hudi-rs test tables (tests/fixtures/hudi-v8): the same text in v8 and v9.
Readers resolve with the writer schema in the file, so the text is reproduced as Hudi writes it.

Write-stat fields of lakegate's own that the schema has no field for (the CRC-32 of a log write) travel in the
extra metadata under :data:`LOG_CRC_KEY`.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro

from tablecore.format.commit_metadata import LOG_CRC_KEY, CommitMetadata

COMMIT_METADATA_SCHEMA_TEXT = (
    '{"type":"record","name":"HoodieCommitMetadata","namespace":"org.apache.hudi.avro.model","fields":[{"'
    'name":"partitionToWriteStats","type":["null",{"type":"map","values":{"type":"array","items":{"type":'
    '"record","name":"HoodieWriteStat","fields":[{"name":"fileId","type":["null",{"type":"string","avro.j'
    'ava.string":"String"}],"default":null},{"name":"path","type":["null",{"type":"string","avro.java.str'
    'ing":"String"}],"default":null},{"name":"prevCommit","type":["null",{"type":"string","avro.java.stri'
    'ng":"String"}],"default":null},{"name":"numWrites","type":["null","long"],"default":null},{"name":"n'
    'umDeletes","type":["null","long"],"default":null},{"name":"numUpdateWrites","type":["null","long"],"'
    'default":null},{"name":"totalWriteBytes","type":["null","long"],"default":null},{"name":"totalWriteE'
    'rrors","type":["null","long"],"default":null},{"name":"partitionPath","type":["null",{"type":"string'
    '","avro.java.string":"String"}],"default":null},{"name":"totalLogRecords","type":["null","long"],"de'
    'fault":null},{"name":"totalLogFiles","type":["null","long"],"default":null},{"name":"totalUpdatedRec'
    'ordsCompacted","type":["null","long"],"default":null},{"name":"numInserts","type":["null","long"],"d'
    'efault":null},{"name":"totalLogBlocks","type":["null","long"],"default":null},{"name":"totalCorruptL'
    'ogBlock","type":["null","long"],"default":null},{"name":"totalRollbackBlocks","type":["null","long"]'
    ',"default":null},{"name":"fileSizeInBytes","type":["null","long"],"default":null},{"name":"logVersio'
    'n","type":["null","int"],"default":null},{"name":"logOffset","type":["null","long"],"default":null},'
    '{"name":"baseFile","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},{"n'
    'ame":"logFiles","type":["null",{"type":"array","items":{"type":"string","avro.java.string":"String"}'
    ',"default":null}],"default":null},{"name":"cdcStats","type":["null",{"type":"map","values":"long","a'
    'vro.java.string":"String","default":null}],"default":null},{"name":"prevBaseFile","type":["null",{"t'
    'ype":"string","avro.java.string":"String"}],"default":null},{"name":"minEventTime","type":["null","l'
    'ong"],"default":null},{"name":"maxEventTime","type":["null","long"],"default":null},{"name":"runtime'
    'Stats","type":["null",{"type":"record","name":"HoodieRuntimeStats","fields":[{"name":"totalScanTime"'
    ',"type":["null","long"],"default":null},{"name":"totalCreateTime","type":["null","long"],"default":n'
    'ull},{"name":"totalUpsertTime","type":["null","long"],"default":null}]}],"default":null},{"name":"to'
    'talLogFilesCompacted","type":["null","long"],"default":null},{"name":"totalLogReadTimeMs","type":["n'
    'ull","long"],"default":null},{"name":"totalLogSizeCompacted","type":["null","long"],"default":null},'
    '{"name":"tempPath","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},{"n'
    'ame":"numUpdates","type":["null","long"],"default":null}]}},"avro.java.string":"String"}],"default":'
    'null},{"name":"compacted","type":["null","boolean"],"default":null},{"name":"extraMetadata","type":['
    '"null",{"type":"map","values":{"type":"string","avro.java.string":"String"},"avro.java.string":"Stri'
    'ng","default":null}],"default":null},{"name":"version","type":["int","null"],"default":1},{"name":"o'
    'perationType","type":["null",{"type":"string","avro.java.string":"String"}],"default":null}]}'
)
REPLACE_COMMIT_METADATA_SCHEMA_TEXT = (
    '{"type":"record","name":"HoodieReplaceCommitMetadata","namespace":"org.apache.hudi.avro.model","fiel'
    'ds":[{"name":"partitionToWriteStats","type":["null",{"type":"map","values":{"type":"array","items":{'
    '"type":"record","name":"HoodieWriteStat","fields":[{"name":"fileId","type":["null",{"type":"string",'
    '"avro.java.string":"String"}],"default":null},{"name":"path","type":["null",{"type":"string","avro.j'
    'ava.string":"String"}],"default":null},{"name":"prevCommit","type":["null",{"type":"string","avro.ja'
    'va.string":"String"}],"default":null},{"name":"numWrites","type":["null","long"],"default":null},{"n'
    'ame":"numDeletes","type":["null","long"],"default":null},{"name":"numUpdateWrites","type":["null","l'
    'ong"],"default":null},{"name":"totalWriteBytes","type":["null","long"],"default":null},{"name":"tota'
    'lWriteErrors","type":["null","long"],"default":null},{"name":"partitionPath","type":["null",{"type":'
    '"string","avro.java.string":"String"}],"default":null},{"name":"totalLogRecords","type":["null","lon'
    'g"],"default":null},{"name":"totalLogFiles","type":["null","long"],"default":null},{"name":"totalUpd'
    'atedRecordsCompacted","type":["null","long"],"default":null},{"name":"numInserts","type":["null","lo'
    'ng"],"default":null},{"name":"totalLogBlocks","type":["null","long"],"default":null},{"name":"totalC'
    'orruptLogBlock","type":["null","long"],"default":null},{"name":"totalRollbackBlocks","type":["null",'
    '"long"],"default":null},{"name":"fileSizeInBytes","type":["null","long"],"default":null},{"name":"lo'
    'gVersion","type":["null","int"],"default":null},{"name":"logOffset","type":["null","long"],"default"'
    ':null},{"name":"baseFile","type":["null",{"type":"string","avro.java.string":"String"}],"default":nu'
    'll},{"name":"logFiles","type":["null",{"type":"array","items":{"type":"string","avro.java.string":"S'
    'tring"},"default":null}],"default":null},{"name":"cdcStats","type":["null",{"type":"map","values":"l'
    'ong","avro.java.string":"String","default":null}],"default":null},{"name":"prevBaseFile","type":["nu'
    'll",{"type":"string","avro.java.string":"String"}],"default":null},{"name":"minEventTime","type":["n'
    'ull","long"],"default":null},{"name":"maxEventTime","type":["null","long"],"default":null},{"name":"'
    'runtimeStats","type":["null",{"type":"record","name":"HoodieRuntimeStats","fields":[{"name":"totalSc'
    'anTime","type":["null","long"],"default":null},{"name":"totalCreateTime","type":["null","long"],"def'
    'ault":null},{"name":"totalUpsertTime","type":["null","long"],"default":null}]}],"default":null},{"na'
    'me":"totalLogFilesCompacted","type":["null","long"],"default":null},{"name":"totalLogReadTimeMs","ty'
    'pe":["null","long"],"default":null},{"name":"totalLogSizeCompacted","type":["null","long"],"default"'
    ':null},{"name":"tempPath","type":["null",{"type":"string","avro.java.string":"String"}],"default":nu'
    'll},{"name":"numUpdates","type":["null","long"],"default":null}]}},"avro.java.string":"String"}],"de'
    'fault":null},{"name":"compacted","type":["null","boolean"],"default":null},{"name":"extraMetadata","'
    'type":["null",{"type":"map","values":{"type":"string","avro.java.string":"String"},"avro.java.string'
    '":"String"}],"default":null},{"name":"version","type":["int","null"],"default":1},{"name":"operation'
    'Type","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},{"name":"partiti'
    'onToReplaceFileIds","type":["null",{"type":"map","values":{"type":"array","items":{"type":"string","'
    'avro.java.string":"String"}},"avro.java.string":"String"}],"default":null}]}'
)

_COMMIT = fastavro.parse_schema(json.loads(COMMIT_METADATA_SCHEMA_TEXT))
_REPLACE = fastavro.parse_schema(json.loads(REPLACE_COMMIT_METADATA_SCHEMA_TEXT))


def _record_fields(schema: dict[str, Any], name: str) -> list[str]:
    for f in schema["fields"]:
        if f["name"] == name:
            branch = next(t for t in f["type"] if t != "null")
            return [x["name"] for x in branch["values"]["items"]["fields"]]
    raise KeyError(name)


_STAT_FIELDS = _record_fields(json.loads(COMMIT_METADATA_SCHEMA_TEXT), "partitionToWriteStats")


def _stat_record(stat: dict[str, Any]) -> dict[str, Any]:
    return {k: stat.get(k) for k in _STAT_FIELDS}


def commit_metadata_to_avro(meta: CommitMetadata) -> bytes:
    """The version-8 bytes of ``meta``: a replace-commit record when it replaces file groups, else a commit record."""
    doc = meta.to_json()
    crcs = {s.path: s.crc32 for s in meta.write_stats if s.crc32 is not None and s.path}
    extra = dict(doc["extraMetadata"])
    if crcs:
        extra[LOG_CRC_KEY] = json.dumps(crcs, sort_keys=True)
    record: dict[str, Any] = {
        "partitionToWriteStats": {p: [_stat_record(s) for s in stats]
                                  for p, stats in doc["partitionToWriteStats"].items()},
        "compacted": doc["compacted"],
        "extraMetadata": extra,
        "version": 1,
        "operationType": doc["operationType"],
    }
    schema = _COMMIT
    if meta.replaced_file_ids is not None:
        schema = _REPLACE
        record["partitionToReplaceFileIds"] = {p: list(ids) for p, ids in meta.replaced_file_ids.items()}
    out = io.BytesIO()
    fastavro.writer(out, schema, [record], codec="null")
    return out.getvalue()
