"""Avro instant files of table services (tablecore.format.service_metadata): the container format, a round trip
of every kind, and real files written by Apache Hudi 0.14/0.15 decoded, re-encoded byte for byte and compared
schema for schema."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import fastavro
import pytest

from tablecore.format import instant_avro as ia
from tablecore.format import service_metadata as sm
from tablecore.format import service_schemas as schemas
from tests.conftest import FIXTURES

HUDI = FIXTURES / "hudi-v6"

# Avro instant files written by Apache Hudi 0.14/0.15 (hoodie.table.version=6, timeline layout 1), taken unchanged
# from the apache/hudi-rs test tables (Apache-2.0) crates/test/data/sample_table/mor/parquet/
# v6_nonpartitioned_rollback.zip and .../cow/v6_simplekeygen_nonhivestyle_overwritetable.zip: the rollback of
# deltacommit 20250126040826878 (plan, empty inflight, completed) and the replacecommit.requested of an
# insert_overwrite_table. The fixture zips under tests/fixtures/hudi-v6 hold no Avro instant file, so these four
# timeline files are kept here, as a zip, and scanned exactly like the fixture zips.
REAL_V6_TIMELINE_FILES_ZIP = base64.b64decode(
    "UEsDBBQAAAAIADIhOlqLIyk9awIAAJgHAAA9AAAAdjZfbm9ucGFydGl0aW9uZWRfcm9sbGJhY2svLmhvb2RpZS8yMDI1MDEyNjA0MDkzNjU3OC"
    "5yb2xsYmFja8VVu47TQBRNTEG/RSoKZFHGjl9xnLSgiCBWrGC7KIpuPNfJ7I5ngmcSsVql2QLxFXT8AyXiE/gFGloahCgQ4zyMdxNW7MJC57m+"
    "Puf43HPtJ6OjqlGDeSZsGU8whbPaqalOpmh2zAxjkRGzbnJI8/NDIQjFp4KxEcTH+6iAgIL1fTmFOG8S2dgGfT1BezIj1F5Cp4Ig040JRUak2e"
    "mfbjClgkxtIA+prtXX9IUMqTLKx7q+hDqCOdjrUsd8trpYLOoFotIgh3CMvMf3KWNUFogmE3lvqVUoYF3KUD5AhgrJz1bKVbkzFmlKldwI3RYJ"
    "WQYnukwVpvKq4ktEU20HVVTwkr0XqFKY6uIc2AzLTJdP62AH7vY0CvYDUJM/noScxTHKtbdLm2/OtwQ0PvknVNna0sdifJ6pb/IZ0zH/xaRW8b"
    "uUZlA3CSYwY8rs5FglVrZm62Yi7S5f9v4ykzfJPlj87qjnmEkdm5KYfIHqK0llXLf0EOV6+/l1tmp31nsrvB5PxM50r5b4r3xkIFbl170aTG5r"
    "YUj/4mmwqLz6+OXz3qP3X/vy9d69N3fvGO9um57jNR3XC53AafthsxW9vGUY5WrkhVErqhiVivGt2hBT1cjXvIEvFGYc2FDBSMenMQ+HXPBi0Z"
    "EMN3luxMT32iRKLCfGwArCZmBFAYwsL2mFbQBsOn5gOUPX8n0rCIZb3LZGfT5DpRUY36uJzmjnWjpsp+V6o3bStohHmlYQA1qjONFqEtJygxAS"
    "rUQLOSfAD73I1ktie1qgY7kfqlrFmfG/VLhDZ2mT/+lttZIbsj2qmv4nKliFcmvkPwBQSwMEFAAAAAgAMiE6Wrz7aNhBAgAAHgYAAEcAAAB2Nl"
    "9ub25wYXJ0aXRpb25lZF9yb2xsYmFjay8uaG9vZGllLzIwMjUwMTI2MDQwOTM2NTc4LnJvbGxiYWNrLnJlcXVlc3RlZLVUPY/TQBBNLGiRaK6i"
    "MFvHjr/iOCkjCk5CIjoiUUSRNfaOE9+tvcG7sTid0vAzaPkT/CCKEy0dFevECVE+jnAIudnd2X3z3psZv42um9oFlAU3RTzDDL4/vyPydo6kTw"
    "qMeUFJi+SQVfvXnNMUrzhjEcQ3QwZ5HRNziKsLvJiaoNYzNGcLmpor2IxTZOpikiKjgvTHdxu8NBcScjniG0h1a516TPIFU4/+QOVyDXCZJ/xo"
    "gphnWSpHqdpskLeIQhZpPlXnK5LXUIJZH/XJu/ViuWxtoSCWKc8fCTNZTlqE8nhLXK+l63IGUs8RqdAl1yPUC2UFUr12g2ICCyZJv7Jjh83GsC"
    "v8sEAhxWnjoCjgVoVTiZnY4f1wbWvco6bOoZBpZcYQ5OyffU1Shpf0NP9z4CanjWIglY4BiE2v/LdMlRAx4gN8hQwl0kNnTpXinMQ7eceT/d1v"
    "tXw6YDy+OcrjQHAGcxUsgalSrx7/tfrJ8iFHSizE7syM1cBX/q9o7L6zFVDj8wvt/sf7Z4MvL0tBhpnQvj3ViGM5Hct2fMuzAscPusGF+pdIWM"
    "+19qShVd/PZpvPZZuChDZ+lFjkwEIJkapHu/TDnOfblkUaFnWLt2PqOj0aJIYVo2d4fsczAg8iw0m6fg8AO5brGVZoG65reF54QMVUqGpKpKLQ"
    "0N5YXduJeknPoA7tGF4MaERxoiAT2rU9HxIFZ1h7ilzfCRqa9kmrmqf/KBXmeYnDg7ymahbTDq2VPPf+a7OhZOwX4RdQSwMEFAAAAAgAMiE6Wg"
    "AAAAACAAAAAAAAAEYAAAB2Nl9ub25wYXJ0aXRpb25lZF9yb2xsYmFjay8uaG9vZGllLzIwMjUwMTI2MDQwOTM2NTc4LnJvbGxiYWNrLmluZmxp"
    "Z2h0AwBQSwMEFAAAAAgAMiE6WpHjVtnHAQAA2gkAAF0AAAB2Nl9zaW1wbGVrZXlnZW5fbm9uaGl2ZXN0eWxlX292ZXJ3cml0ZXRhYmxlLy5ob2"
    "9kaWUvMjAyNDA3MDcwMDEzMDMwODgucmVwbGFjZWNvbW1pdC5yZXF1ZXN0ZWTdVblOAzEQDan4Auhd0BCtRJsWiaMAogQKhCgm69nEyGsvPhai"
    "KCU9H8IXUFHzL3Q0dIxzkBU5FAIRgs47nnlvjufZk+bVWnkDcqMjG7cxhaetLnOdDFmVGYy14azCFKTh+0BrLrCO1x6tQ17HTEKMR+iAg4Ohn8"
    "3IRs7atCKgcxujtuci6lOkmqMkx0Sg5JZVL7ojbJ2hASe0Og3clWEKF0x5SQEfKVlnhGrRfR/uCnKIhqYqawwOvcsK45iAl45VQ3iv8sESS0+Z"
    "B7eaBDWbZnrlu5+jJ8sQKvNu32if2dnoYAx06Fo4TCl6YdY+7lRaK0WMP8bYCGiHKtFTucKs94TEGrj2ygZFMhmzLFHYIvTz+BOiPuTfLK+Al4"
    "FxIsh7pV1rau3IH7KVzydHY6maAr5QLugosBTjdqgN84BSJLJ4zoRTCJLPQdLSCcLQvilx6byVT0+8ozcaOjTxTmfWMAbAW+pvYeUtlPWXuv7r"
    "IwkKctjqLL8eG2OEKbtqeLkrwdrjYFuVSEdMNTCQ2r87rDk4/0KOhTVp0KLJcSComXWFRSeRfsET/P+/WZe90ubbzcv5/d0Zf318Sh6et8vrpV"
    "Kp/Nn6DlBLAQIUAxQAAAAIADIhOlqLIyk9awIAAJgHAAA9AAAAAAAAAAAAAACAAQAAAAB2Nl9ub25wYXJ0aXRpb25lZF9yb2xsYmFjay8uaG9v"
    "ZGllLzIwMjUwMTI2MDQwOTM2NTc4LnJvbGxiYWNrUEsBAhQDFAAAAAgAMiE6Wrz7aNhBAgAAHgYAAEcAAAAAAAAAAAAAAIABxgIAAHY2X25vbn"
    "BhcnRpdGlvbmVkX3JvbGxiYWNrLy5ob29kaWUvMjAyNTAxMjYwNDA5MzY1Nzgucm9sbGJhY2sucmVxdWVzdGVkUEsBAhQDFAAAAAgAMiE6WgAA"
    "AAACAAAAAAAAAEYAAAAAAAAAAAAAAIABbAUAAHY2X25vbnBhcnRpdGlvbmVkX3JvbGxiYWNrLy5ob29kaWUvMjAyNTAxMjYwNDA5MzY1Nzgucm"
    "9sbGJhY2suaW5mbGlnaHRQSwECFAMUAAAACAAyITpakeNW2ccBAADaCQAAXQAAAAAAAAAAAAAAgAHSBQAAdjZfc2ltcGxla2V5Z2VuX25vbmhp"
    "dmVzdHlsZV9vdmVyd3JpdGV0YWJsZS8uaG9vZGllLzIwMjQwNzA3MDAxMzAzMDg4LnJlcGxhY2Vjb21taXQucmVxdWVzdGVkUEsFBgAAAAAEAA"
    "QA3wEAABQIAAAAAA=="
)

SERVICE_SUFFIXES = (
    ".rollback",
    ".rollback.requested",
    ".rollback.inflight",
    ".clean",
    ".clean.requested",
    ".clean.inflight",
    ".compaction.requested",
    ".compaction.inflight",
    ".logcompaction.requested",
    ".logcompaction.inflight",
    ".savepoint",
    ".savepoint.inflight",
    ".restore",
    ".restore.requested",
    ".restore.inflight",
    ".replacecommit.requested",
)


def _extract_timelines(source: Path | bytes, dest: Path) -> list[Path]:
    """Extract the .hoodie/ service instant files of a table zip (ignoring __MACOSX), return them."""
    data = source.read_bytes() if isinstance(source, Path) else source
    out = []
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for member in z.namelist():
            parts = member.split("/")
            if "__MACOSX" in parts or len(parts) < 2 or parts[-2] != ".hoodie":
                continue
            if member.endswith(SERVICE_SUFFIXES):
                out.append(Path(z.extract(member, dest)))
    return out


def _real_avro_instant_files(tmp_path: Path) -> list[Path]:
    found = _extract_timelines(REAL_V6_TIMELINE_FILES_ZIP, tmp_path / "embedded")
    for zip_path in sorted(HUDI.glob("*.zip")):
        found += _extract_timelines(zip_path, tmp_path / zip_path.stem)
    return [p for p in found if ia.is_avro_instant(p.read_bytes())]


def _without_docs(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_docs(v) for k, v in node.items() if k != "doc"}
    if isinstance(node, list):
        return [_without_docs(v) for v in node]
    return node


def _header_metadata(data: bytes) -> dict[str, bytes]:
    """Parse the OCF header by hand: magic, then one map block of (string, bytes) entries, then 0."""

    def read_long(pos: int) -> tuple[int, int]:
        shift = result = 0
        while True:
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1), pos

    assert data[:4] == b"Obj\x01"
    meta = {}
    count, pos = read_long(4)
    assert count > 0
    for _ in range(count):
        n, pos = read_long(pos)
        key = data[pos : pos + n].decode()
        pos += n
        n, pos = read_long(pos)
        meta[key] = data[pos : pos + n]
        pos += n
    end, pos = read_long(pos)
    assert end == 0
    sync = data[pos : pos + 16]
    assert data.endswith(sync), "the single block ends with the header's sync marker"
    return meta


# ------------------------------------------------------------------------------------------------------------------
# container format
# ------------------------------------------------------------------------------------------------------------------


def test_header_holds_only_the_schema_and_no_codec() -> None:
    data = sm.savepoint_metadata("alice", 1_700_000_000_000, "before backfill", {"2024/01/01": ["a.parquet"]})
    meta = _header_metadata(data)
    assert list(meta) == ["avro.schema"]
    assert meta["avro.schema"].decode() == schemas.schema_json("savepoint_metadata")
    reader = fastavro.reader(io.BytesIO(data))
    assert list(reader.metadata) == ["avro.schema"]
    assert reader.codec == "null"
    assert len(list(reader)) == 1


def test_sync_marker_is_random_unless_given() -> None:
    plan = sm.restore_plan([("20240101000000000", "commit")])
    again = sm.restore_plan([("20240101000000000", "commit")])
    assert plan[-16:] != again[-16:]
    fixed = ia.encode_instant_avro("restore_plan", ia.decode_instant_avro(plan), sync_marker=plan[-16:])
    assert fixed == plan


@pytest.mark.parametrize("kind", sorted(schemas.SCHEMAS))
def test_every_schema_is_valid_avro_in_the_hudi_namespace(kind: str) -> None:
    schema = json.loads(schemas.schema_json(kind))
    assert schema["namespace"] == "org.apache.hudi.avro.model"
    fastavro.parse_schema(schema)
    assert schemas.KIND_BY_RECORD_NAME[f"org.apache.hudi.avro.model.{schema['name']}"] == kind


# ------------------------------------------------------------------------------------------------------------------
# round trips
# ------------------------------------------------------------------------------------------------------------------


def _rollback_partition() -> sm.RollbackPartition:
    return sm.RollbackPartition(
        deleted_files=["/t/2024/01/01/f1-0_1-2-3_20240102000000000.parquet"],
        failed_files=[],
        rollback_log_files={"/t/2024/01/01/.f2-0_20240101000000000.log.2_1-0-1": 105},
        log_files_from_failed_commit={"/t/2024/01/01/.f2-0_20240101000000000.log.1_0-1-2": 4096},
    )


def _builders() -> dict[str, bytes]:
    return {
        "compaction_plan": sm.compaction_plan(
            [
                sm.CompactionOperation(
                    "20240101000000000",
                    "f1-0",
                    "2024/01/01",
                    "f1-0_0-1-2_20240101000000000.parquet",
                    [".f1-0_20240101000000000.log.1_0-3-4"],
                    {"TOTAL_LOG_FILES": 1.0},
                ),
                sm.CompactionOperation("20240101000000000", "f2-0", "", None, [".f2-0_20240101000000000.log.1_0-1-1"]),
            ]
        ),
        "cleaner_plan": sm.cleaner_plan(
            ("20240103000000000", "commit"),
            "20240104000000000",
            "KEEP_LATEST_COMMITS",
            {"2024/01/01": ["/t/2024/01/01/f1-0_0-1-2_20240101000000000.parquet"]},
            ["2023/12/31"],
        ),
        "clean_metadata": sm.clean_metadata(
            "20240105000000000",
            42,
            "20240103000000000",
            "20240104000000000",
            "KEEP_LATEST_COMMITS",
            {"2024/01/01": ["/t/2024/01/01/f1-0_0-1-2_20240101000000000.parquet"]},
            {"2024/01/02": ["f9-0_0-1-2_20240101000000000.parquet"]},
        ),
        "rollback_plan": sm.rollback_plan(
            "20240102000000000",
            "deltacommit",
            [
                sm.RollbackRequest("2024/01/01", "f1-0", "20240101000000000", ["/t/2024/01/01/f1-0_x.parquet"]),
                sm.RollbackRequest("2024/01/01", "f2-0", "20240101000000000", [], {"/t/.f2-0_1.log.1_0-1-2": 4096}),
            ],
        ),
        "rollback_metadata": sm.rollback_metadata(
            "20240103000000000", 195, [("20240102000000000", "deltacommit")], {"2024/01/01": _rollback_partition()}
        ),
        "savepoint_metadata": sm.savepoint_metadata(
            "alice", 1_700_000_000_000, "keep", {"2024/01/01": ["f1-0_0-1-2_20240101000000000.parquet"], "": []}
        ),
        "restore_plan": sm.restore_plan(
            [("20240103000000000", "commit"), ("20240102000000000", "deltacommit")],
            savepoint_to_restore="20240101000000000",
        ),
        "restore_metadata": sm.restore_metadata(
            "20240104000000000",
            77,
            ["20240103000000000"],
            {
                "20240103000000000": [
                    sm.rollback_metadata_record(
                        "20240104000000000", 5, [("20240103000000000", "commit")], {"2024/01/01": _rollback_partition()}
                    )
                ]
            },
        ),
        "requested_replace_metadata": sm.clustering_requested_replace(
            [
                sm.ClusteringGroup(
                    [
                        sm.SliceInfo("2024/01/01", "f1-0", "/t/2024/01/01/f1-0_0-1-2_20240101000000000.parquet"),
                        sm.SliceInfo("2024/01/01", "f2-0", None, ["/t/2024/01/01/.f2-0_20240101000000000.log.1_0-1-1"]),
                    ],
                    2,
                )
            ],
            "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy",
            {"hoodie.clustering.plan.strategy.sort.columns": "id"},
        ),
    }


def test_every_kind_has_a_builder() -> None:
    assert set(_builders()) == set(schemas.SCHEMAS)


@pytest.mark.parametrize("kind", sorted(schemas.SCHEMAS))
def test_round_trip_every_kind(kind: str) -> None:
    data = _builders()[kind]
    assert ia.instant_kind(data) == kind
    assert ia.embedded_schema(data) == schemas.SCHEMAS[kind]
    record = ia.decode_instant_avro(data)
    assert ia.decode_instant_avro(data, kind) == record
    assert ia.encode_instant_avro(kind, record, sync_marker=data[-16:]) == data


def test_compaction_plan_fields() -> None:
    data = _builders()["compaction_plan"]
    plan = ia.decode_instant_avro(data)
    assert plan["version"] == 2
    assert plan["strategy"] is None
    assert plan["preserveHoodieMetadata"] is True
    op = plan["operations"][0]
    assert op["dataFilePath"] == "f1-0_0-1-2_20240101000000000.parquet"
    assert op["bootstrapFilePath"] is None
    ops = sm.read_compaction_plan(data)
    assert ops[0] == sm.CompactionOperation(
        "20240101000000000",
        "f1-0",
        "2024/01/01",
        "f1-0_0-1-2_20240101000000000.parquet",
        [".f1-0_20240101000000000.log.1_0-3-4"],
        {"TOTAL_LOG_FILES": 1.0},
    )
    assert ops[1].data_file_name is None
    assert ops[1].partition_path == ""


def test_compaction_plan_v2_rejects_paths() -> None:
    op = sm.CompactionOperation("1", "f", "p", "p/f_0-1-2_1.parquet", [])
    with pytest.raises(ValueError, match="bare file names"):
        sm.compaction_plan([op])


def test_cleaner_plan_fields() -> None:
    data = _builders()["cleaner_plan"]
    plan = ia.decode_instant_avro(data, "cleaner_plan")
    assert plan["earliestInstantToRetain"] == {
        "timestamp": "20240103000000000",
        "action": "commit",
        "state": "COMPLETED",
    }
    assert plan["lastCompletedCommitTimestamp"] == "20240104000000000"
    assert plan["version"] == 2
    assert plan["filesToBeDeletedPerPartition"] == {}
    assert plan["partitionsToBeDeleted"] == ["2023/12/31"]
    assert sm.read_cleaner_plan_files(data) == {"2024/01/01": ["/t/2024/01/01/f1-0_0-1-2_20240101000000000.parquet"]}
    no_retain = sm.cleaner_plan(None, "", "KEEP_LATEST_FILE_VERSIONS", {})
    assert ia.decode_instant_avro(no_retain)["earliestInstantToRetain"] is None


def test_clean_metadata_fields() -> None:
    meta = ia.decode_instant_avro(_builders()["clean_metadata"], "clean_metadata")
    assert meta["totalFilesDeleted"] == 1
    assert meta["version"] == 2
    assert meta["bootstrapPartitionMetadata"] == {}
    p1 = meta["partitionMetadata"]["2024/01/01"]
    assert p1["successDeleteFiles"] == ["f1-0_0-1-2_20240101000000000.parquet"]
    assert p1["deletePathPatterns"] == ["f1-0_0-1-2_20240101000000000.parquet"]
    assert p1["isPartitionDeleted"] is False
    assert meta["partitionMetadata"]["2024/01/02"]["failedDeleteFiles"] == ["f9-0_0-1-2_20240101000000000.parquet"]


def test_rollback_plan_and_metadata_readers() -> None:
    builders = _builders()
    target, requests = sm.read_rollback_plan(builders["rollback_plan"])
    assert target == ("20240102000000000", "deltacommit")
    assert requests[1] == sm.RollbackRequest(
        "2024/01/01", "f2-0", "20240101000000000", [], {"/t/.f2-0_1.log.1_0-1-2": 4096}
    )
    instants, partitions = sm.read_rollback_metadata(builders["rollback_metadata"])
    assert instants == [("20240102000000000", "deltacommit")]
    assert partitions == {"2024/01/01": _rollback_partition()}
    assert ia.decode_instant_avro(builders["rollback_metadata"])["totalFilesDeleted"] == 1


def test_savepoint_and_restore_fields() -> None:
    builders = _builders()
    assert sm.read_savepoint_files(builders["savepoint_metadata"]) == {
        "2024/01/01": ["f1-0_0-1-2_20240101000000000.parquet"],
        "": [],
    }
    plan = ia.decode_instant_avro(builders["restore_plan"])
    assert plan["version"] == 2
    assert plan["savepointToRestoreTimestamp"] == "20240101000000000"
    assert [i["commitTime"] for i in plan["instantsToRollback"]] == ["20240103000000000", "20240102000000000"]
    meta = ia.decode_instant_avro(builders["restore_metadata"])
    assert meta["restoreInstantInfo"] == [{"commitTime": "20240103000000000", "action": "commit"}]
    nested = meta["hoodieRestoreMetadata"]["20240103000000000"][0]
    assert nested["commitsRollback"] == ["20240103000000000"]
    assert nested["partitionMetadata"]["2024/01/01"]["rollbackLogFiles"] == {
        "/t/2024/01/01/.f2-0_20240101000000000.log.2_1-0-1": 105
    }


def test_clustering_plan_fields() -> None:
    data = _builders()["requested_replace_metadata"]
    meta = ia.decode_instant_avro(data)
    assert meta["operationType"] == "CLUSTER"
    plan = meta["clusteringPlan"]
    assert plan["strategy"]["strategyParams"] == {"hoodie.clustering.plan.strategy.sort.columns": "id"}
    assert plan["preserveHoodieMetadata"] is True
    assert plan["inputGroups"][0]["slices"][1]["dataFilePath"] == ""
    groups = sm.read_clustering_plan(data)
    assert groups[0].num_output_file_groups == 2
    assert groups[0].slices[1] == sm.SliceInfo(
        "2024/01/01", "f2-0", None, ["/t/2024/01/01/.f2-0_20240101000000000.log.1_0-1-1"]
    )
    assert sm.read_clustering_plan(sm.empty_requested_replace()) == []


def test_typed_read_resolves_a_newer_schema_variant() -> None:
    """A plan written with one more field (as Hudi 1.x adds missingSchedulePartitions) reads in our shape."""
    newer = json.loads(schemas.schema_json("compaction_plan"))
    newer["fields"].append(
        {"name": "missingSchedulePartitions", "type": ["null", {"type": "array", "items": "string"}], "default": None}
    )
    record = ia.decode_instant_avro(_builders()["compaction_plan"]) | {"missingSchedulePartitions": ["p"]}
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(newer), [record], codec="null")
    data = buf.getvalue()
    assert "missingSchedulePartitions" in ia.decode_instant_avro(data)
    assert "missingSchedulePartitions" not in ia.decode_instant_avro(data, "compaction_plan")
    assert sm.read_compaction_plan(data) == sm.read_compaction_plan(_builders()["compaction_plan"])


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="empty"):
        ia.decode_instant_avro(b"")
    with pytest.raises(ValueError, match="not an Avro"):
        ia.decode_instant_avro(b'{"partitionToWriteStats": {}}')
    with pytest.raises(ValueError, match="expected a compaction_plan"):
        sm.read_compaction_plan(_builders()["cleaner_plan"])
    with pytest.raises(ValueError, match="unknown instant kind"):
        ia.encode_instant_avro("commit", {})
    with pytest.raises(ValueError, match="does not match"):
        ia.encode_instant_avro("restore_plan", {"instantsToRollback": [{"commitTime": 1}]})


# ------------------------------------------------------------------------------------------------------------------
# real files written by Hudi 0.14/0.15
# ------------------------------------------------------------------------------------------------------------------


def test_real_files_decode_and_match_our_schemas_exactly(tmp_path: Path) -> None:
    files = _real_avro_instant_files(tmp_path)
    assert len(files) >= 3
    for path in files:
        data = path.read_bytes()
        kind = ia.instant_kind(data)
        assert kind is not None, f"{path.name}: unknown record {ia.embedded_schema(data).get('name')}"
        # the writer schema embedded by Java is ours: as JSON without docs, and as the exact header text
        ours = _without_docs(json.loads(schemas.schema_json(kind)))
        assert _without_docs(ia.embedded_schema(data)) == ours, path.name
        assert _header_metadata(data)["avro.schema"].decode() == schemas.schema_json(kind), path.name
        assert list(_header_metadata(data)) == ["avro.schema"]
        record = ia.decode_instant_avro(data, kind)
        assert record == ia.decode_instant_avro(data)
        # and our writer reproduces the file byte for byte given its sync marker
        assert ia.encode_instant_avro(kind, record, sync_marker=data[-16:]) == data, path.name


def test_real_rollback_files(tmp_path: Path) -> None:
    files = {p.name: p.read_bytes() for p in _extract_timelines(REAL_V6_TIMELINE_FILES_ZIP, tmp_path)}
    assert files["20250126040936578.rollback.inflight"] == b""
    assert not ia.is_avro_instant(files["20250126040936578.rollback.inflight"])

    target, requests = sm.read_rollback_plan(files["20250126040936578.rollback.requested"])
    assert target == ("20250126040826878", "deltacommit")
    assert len(requests) == 2
    base_request, log_request = requests
    assert base_request.partition_path == ""
    assert base_request.files_to_delete == [
        "/opt/data/external_tables/v6_nonpartitioned_rollback/"
        "cd329d8f-0ce4-4654-84ab-2f769aae5034-0_1-33-44_20250126040826878.parquet"
    ]
    assert log_request.file_id == "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0"
    assert log_request.latest_base_instant == "20250126040823628"
    assert log_request.log_blocks_to_delete == {
        "file:/opt/data/external_tables/v6_nonpartitioned_rollback/"
        ".0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628.log.1_0-33-43": 11828
    }

    meta = ia.decode_instant_avro(files["20250126040936578.rollback"], "rollback_metadata")
    assert meta["startRollbackTime"] == "20250126040936578"
    assert meta["commitsRollback"] == ["20250126040826878"]
    assert meta["totalFilesDeleted"] == 1
    assert meta["version"] == 1
    instants, partitions = sm.read_rollback_metadata(files["20250126040936578.rollback"])
    assert instants == [("20250126040826878", "deltacommit")]
    assert list(partitions) == [""]
    assert partitions[""].deleted_files == base_request.files_to_delete
    # the rollback command block went into a new log version with write token 1-0-1 (format reference §2)
    assert partitions[""].rollback_log_files == {
        "file:/opt/data/external_tables/v6_nonpartitioned_rollback/"
        ".0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628.log.2_1-0-1": 105
    }
    assert partitions[""].log_files_from_failed_commit == log_request.log_blocks_to_delete


def test_our_rollback_builders_reproduce_the_real_files(tmp_path: Path) -> None:
    files = {p.name: p.read_bytes() for p in _extract_timelines(REAL_V6_TIMELINE_FILES_ZIP, tmp_path)}
    real_plan = files["20250126040936578.rollback.requested"]
    target, requests = sm.read_rollback_plan(real_plan)
    assert target is not None
    ours = sm.rollback_plan(target[0], target[1], requests)
    assert ia.decode_instant_avro(ours) == ia.decode_instant_avro(real_plan)
    real_meta = files["20250126040936578.rollback"]
    instants, partitions = sm.read_rollback_metadata(real_meta)
    ours = sm.rollback_metadata("20250126040936578", 195, instants, partitions)
    resynced = ia.encode_instant_avro("rollback_metadata", ia.decode_instant_avro(ours), sync_marker=real_meta[-16:])
    assert resynced == real_meta


def test_real_insert_overwrite_requested_replace(tmp_path: Path) -> None:
    files = {p.name: p.read_bytes() for p in _extract_timelines(REAL_V6_TIMELINE_FILES_ZIP, tmp_path)}
    real = files["20240707001303088.replacecommit.requested"]
    assert ia.decode_instant_avro(real) == {
        "operationType": None,
        "clusteringPlan": None,
        "extraMetadata": None,
        "version": None,
    }
    ours = sm.empty_requested_replace()
    assert (
        ia.encode_instant_avro("requested_replace_metadata", ia.decode_instant_avro(ours), sync_marker=real[-16:])
        == real
    )


def test_clean_and_restore_readers() -> None:
    builders = _builders()
    deleted, gone = sm.read_clean_metadata(builders["clean_metadata"])
    assert deleted == {"2024/01/01": ["f1-0_0-1-2_20240101000000000.parquet"], "2024/01/02": []}
    assert gone == set()
    whole = sm.clean_metadata("20240105000000000", 1, "20240103000000000", "20240104000000000",
                              "KEEP_LATEST_COMMITS", {}, deleted_partitions=["2024/01/03"])
    assert sm.read_clean_metadata(whole) == ({"2024/01/03": []}, {"2024/01/03"})
    assert sm.read_restore_plan(builders["restore_plan"]) == ["20240103000000000", "20240102000000000"]
    targets, parts = sm.read_restore_metadata(builders["restore_metadata"])
    assert targets == ["20240103000000000"]
    assert parts == [("2024/01/01", _rollback_partition())]
