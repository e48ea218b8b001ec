"""Tests of tablecore.format.log_format (pure, no Spark): real log files, block framing, file names.

Real log files come from the MOR fixtures written by Apache Hudi 0.14/0.15 (tests/fixtures/hudi-v6).
"""

from __future__ import annotations

import json
import logging
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tablecore.format.avro_schema import META_FIELDS, avro_to_arrow
from tablecore.format.avro_values import arrow_to_datums, datums_to_arrow
from tablecore.format.log_content import (
    DeleteRecord,
    decode_avro_data,
    decode_delete,
    decode_parquet_data,
    encode_avro_data,
    encode_delete,
)
from tablecore.format.log_format import (
    MAGIC,
    BlockType,
    HeaderKey,
    LogBlock,
    LogFileName,
    LogFormatError,
    TruncatedBlockError,
    encode_block,
    encode_rollback_command,
    iter_blocks,
    read_blocks,
)
from tests.conftest import FIXTURES
from tests.tablecore.oracle import rows

HUDI = FIXTURES / "hudi-v6"
MOR = sorted(p.stem for p in HUDI.glob("mor_*.zip"))

# Block types of every log file of each MOR fixture, by log file name (these fixtures hold one block per file).
EXPECTED_BLOCKS: dict[str, dict[str, list[BlockType]]] = {
    "mor_avrolog_trips_deletes": {
        ".6d3d1d6e-2298-4080-a0c1-494877d6f40a-0_20250618054711154.log.1_0-26-85": [BlockType.DELETE],
    },
    "mor_parquetlog_nonpartitioned": {
        ".d206069c-22c8-4532-b9ea-3cf4282342c4-0_20250117083125837.log.1_0-33-43": [BlockType.PARQUET_DATA],
    },
    "mor_parquetlog_simplekeygen_nonhivestyle": {
        ".26e33b7b-aa9f-4f2e-b683-a90ef0d5861d-0_20250121000547796.log.1_0-33-47": [BlockType.PARQUET_DATA],
    },
}


@pytest.fixture(scope="module")
def fixture_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each MOR fixture extracted once: zip name -> table base path."""
    out = {}
    for name in MOR:
        dest = tmp_path_factory.mktemp(name)
        with zipfile.ZipFile(HUDI / f"{name}.zip") as z:
            z.extractall(dest)
        props = [p for p in dest.rglob(".hoodie/hoodie.properties") if "__MACOSX" not in p.parts]
        assert len(props) == 1
        out[name] = props[0].parent.parent
    return out


def log_files(base: Path) -> list[Path]:
    return sorted(p for p in base.rglob(".*.log.*") if "__MACOSX" not in p.parts)


def expected(name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((HUDI / "expected" / f"{name}.json").read_text())
    return result


# ---------------------------------------------------------------------------------------------------------------------
# real Hudi-written log files
# ---------------------------------------------------------------------------------------------------------------------


def test_fixture_names_match_expected_block_table() -> None:
    assert sorted(EXPECTED_BLOCKS) == MOR


@pytest.mark.parametrize("name", MOR)
def test_fixture_log_files_parse_and_reframe_byte_for_byte(name: str, fixture_tables: dict[str, Path]) -> None:
    base = fixture_tables[name]
    files = log_files(base)
    assert {p.name: None for p in files}.keys() == EXPECTED_BLOCKS[name].keys()
    completed = {p.name.split(".")[0] for p in (base / ".hoodie").glob("*.deltacommit")}
    for path in files:
        data = path.read_bytes()
        blocks = list(iter_blocks(data))
        assert [b.block_type for b in blocks] == EXPECTED_BLOCKS[name][path.name]
        ends = [b.offset for b in blocks[1:]] + [len(data)]
        for block, end in zip(blocks, ends, strict=True):
            raw = data[block.offset:end]
            block_size = struct.unpack(">q", raw[6:14])[0]
            assert raw[:6] == MAGIC
            assert block_size == len(raw) - 14
            assert struct.unpack(">q", raw[-8:])[0] == block_size + 6
            assert block.footer == {}
            assert block.instant in completed
            assert block.to_bytes() == raw
            schema = json.loads(block.schema or "")
            assert [f["name"] for f in schema["fields"][:5]] == list(META_FIELDS)
        name_parsed = LogFileName.parse(path.name)
        assert name_parsed is not None and name_parsed.name == path.name
        assert any(path.parent.glob(f"{name_parsed.file_id}_*_{name_parsed.base_instant}.parquet"))


def test_fixture_delete_block_matches_expected_rows(fixture_tables: dict[str, Path]) -> None:
    name = "mor_avrolog_trips_deletes"
    [path] = log_files(fixture_tables[name])
    data = path.read_bytes()
    [block] = read_blocks(data)
    assert block.block_type is BlockType.DELETE
    assert list(block.header) == [HeaderKey.SCHEMA, HeaderKey.INSTANT_TIME]  # Java's order for a delete block
    assert (block.instant, len(data), len(block.content)) == ("20250618054714114", 1098, 190)
    deletes = decode_delete(block.content)

    exp = expected(name)
    before, after = exp["completed_instants"]
    gone = {r["_hoodie_record_key"]: r["_hoodie_partition_path"] for r in exp["as_of"][before]}
    for r in exp["snapshot"]:
        del gone[r["_hoodie_record_key"]]
    assert block.instant == after
    assert {d.record_key: d.partition_path for d in deletes} == gone
    assert len(deletes) == len(gone) == 3
    assert all(d.natural_order and d.ordering_value == 0 for d in deletes)

    # re-encoded byte for byte: content, then the whole block with the header order as read
    assert encode_delete(deletes, None) == block.content
    assert encode_block(block.block_type, list(block.header.items()), encode_delete(deletes, "long")) == data


@pytest.mark.parametrize("name", ["mor_parquetlog_nonpartitioned", "mor_parquetlog_simplekeygen_nonhivestyle"])
def test_fixture_parquet_block_rows_match_expected_snapshot(name: str, fixture_tables: dict[str, Path]) -> None:
    [path] = log_files(fixture_tables[name])
    [block] = read_blocks(path.read_bytes())
    assert list(block.header) == [HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA]
    table = decode_parquet_data(block.content)
    assert table.column_names[:5] == list(META_FIELDS)
    assert set(table.column("_hoodie_commit_time").to_pylist()) == {block.instant}
    snapshot = {r["_hoodie_record_key"]: r for r in expected(name)["snapshot"]}
    block_rows = rows(table)
    assert block_rows
    for row in block_rows:
        assert row == snapshot[row["_hoodie_record_key"]]


@pytest.mark.parametrize("name", ["mor_parquetlog_nonpartitioned", "mor_parquetlog_simplekeygen_nonhivestyle"])
def test_fixture_parquet_rows_through_avro_block_with_hudi_schema(name: str, fixture_tables: dict[str, Path]) -> None:
    """The rows of a Hudi PARQUET_DATA block survive an AVRO_DATA block written with Hudi's own SCHEMA header."""
    [path] = log_files(fixture_tables[name])
    [block] = read_blocks(path.read_bytes())
    assert block.schema is not None
    table = decode_parquet_data(block.content)
    header = [(HeaderKey.INSTANT_TIME, block.instant or ""), (HeaderKey.SCHEMA, block.schema)]
    data = encode_block(BlockType.AVRO_DATA, header, encode_avro_data(arrow_to_datums(table, block.schema),
                                                                       block.schema))
    [avro_block] = read_blocks(data)
    assert avro_block.header == dict(header)
    back = datums_to_arrow(decode_avro_data(avro_block.content, avro_block.schema or ""),
                           avro_to_arrow(block.schema))
    assert rows(back) == rows(table)


def test_fixture_log_names_parse() -> None:
    name = ".6d3d1d6e-2298-4080-a0c1-494877d6f40a-0_20250618054711154.log.1_0-26-85"
    parsed = LogFileName.parse(name)
    assert parsed == LogFileName("6d3d1d6e-2298-4080-a0c1-494877d6f40a-0", "20250618054711154", 1, "0-26-85")
    assert parsed is not None and parsed.name == name


# ---------------------------------------------------------------------------------------------------------------------
# block framing
# ---------------------------------------------------------------------------------------------------------------------


def test_rollback_command_block_is_105_bytes_and_parses() -> None:
    data = encode_rollback_command("20250102000000000", "20250101000000000")
    assert len(data) == 105
    assert struct.unpack(">q", data[6:14])[0] == 91
    assert struct.unpack(">q", data[-8:])[0] == 97
    [block] = iter_blocks(data)
    assert block == LogBlock(
        BlockType.COMMAND,
        {HeaderKey.INSTANT_TIME: "20250102000000000", HeaderKey.TARGET_INSTANT_TIME: "20250101000000000",
         HeaderKey.COMMAND_BLOCK_TYPE: "0"},
        b"",
        {},
    )
    assert list(block.header) == [HeaderKey.INSTANT_TIME, HeaderKey.TARGET_INSTANT_TIME, HeaderKey.COMMAND_BLOCK_TYPE]
    assert (block.instant, block.target_instant, block.schema) == ("20250102000000000", "20250101000000000", None)
    assert block.is_rollback
    assert block.to_bytes() == data
    # the exact layout, field by field
    assert data == b"".join([
        b"#HUDI#", struct.pack(">q", 91), struct.pack(">ii", 1, 0),
        struct.pack(">i", 3),
        struct.pack(">ii", 0, 17), b"20250102000000000",
        struct.pack(">ii", 1, 17), b"20250101000000000",
        struct.pack(">ii", 3, 1), b"0",
        struct.pack(">q", 0), struct.pack(">i", 0), struct.pack(">q", 97),
    ])


def test_encode_block_keeps_header_order_and_footer() -> None:
    header = [(HeaderKey.SCHEMA, "{}"), (HeaderKey.INSTANT_TIME, "20250101000000000")]
    footer = {HeaderKey.BLOCK_IDENTIFIER: "7"}
    data = encode_block(BlockType.AVRO_DATA, header, b"xyz", footer=footer) + encode_block(
        BlockType.DELETE, dict(reversed(header)), b"")
    first, second = iter_blocks(data)
    assert list(first.header.items()) == header and first.footer == footer and first.content == b"xyz"
    assert list(second.header.items()) == list(reversed(header)) and second.offset == len(first.to_bytes())
    with pytest.raises(ValueError, match="duplicate"):
        encode_block(BlockType.COMMAND, [(HeaderKey.INSTANT_TIME, "1"), (HeaderKey.INSTANT_TIME, "2")], b"")


def test_header_values_are_utf8() -> None:
    data = encode_block(BlockType.AVRO_DATA, [(HeaderKey.SCHEMA, '{"doc":"café ☕"}')], b"")
    [block] = iter_blocks(data)
    assert block.schema == '{"doc":"café ☕"}'


def two_blocks() -> bytes:
    return encode_rollback_command("20250102000000000", "20250101000000000") + encode_block(
        BlockType.DELETE, [(HeaderKey.INSTANT_TIME, "20250103000000000")],
        encode_delete([DeleteRecord("k1", "p")], None))


def test_truncated_tail_raises_or_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    data = two_blocks()
    first_len = 105
    for cut in range(first_len + 1, len(data)):
        truncated = data[:cut]
        with pytest.raises(TruncatedBlockError) as info:
            list(iter_blocks(truncated))
        assert info.value.offset == first_len
        assert f"offset {first_len}" in str(info.value)
        with pytest.raises(TruncatedBlockError):
            read_blocks(truncated, tolerate_truncated_tail=False)
        with caplog.at_level(logging.WARNING, logger="tablecore.format.log_format"):
            caplog.clear()
            kept = read_blocks(truncated)
        assert [b.block_type for b in kept] == [BlockType.COMMAND]
        assert "incomplete last log block" in caplog.text
    assert len(read_blocks(data)) == 2
    assert read_blocks(b"") == []
    assert read_blocks(data[:3]) == []


def test_truncated_error_is_a_log_format_error() -> None:
    with pytest.raises(LogFormatError):
        list(iter_blocks(two_blocks()[:-1]))
    assert issubclass(LogFormatError, ValueError)


@pytest.mark.parametrize("offset", [0, 105])
def test_corrupt_magic_raises_with_offset(offset: int) -> None:
    data = bytearray(two_blocks())
    data[offset:offset + 6] = b"#HUDX#"
    with pytest.raises(LogFormatError, match=f"bad magic at offset {offset}") as info:
        list(iter_blocks(bytes(data)))
    assert not isinstance(info.value, TruncatedBlockError)
    with pytest.raises(LogFormatError, match="bad magic"):
        read_blocks(bytes(data))  # corruption is never tolerated


def test_garbage_after_blocks_is_corrupt_not_truncated() -> None:
    with pytest.raises(LogFormatError, match="bad magic at offset 105") as info:
        read_blocks(two_blocks()[:105] + b"\x00\x00\x00")
    assert not isinstance(info.value, TruncatedBlockError)


def corrupt(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value):]


@pytest.mark.parametrize(
    ("position", "value", "match"),
    [
        (-8, struct.pack(">q", 96), "total block length 96 does not match blockSize 91"),
        (14, struct.pack(">i", 0), "unsupported log format version 0"),
        (18, struct.pack(">i", 9), "unknown block type 9"),
        (22, struct.pack(">i", 4), "header value length overruns|overruns the block end"),
        (26, struct.pack(">i", 12), "unknown header key 12"),
        (30, struct.pack(">i", 99), "overruns the block end"),
        (6, struct.pack(">q", 20), "blockSize 20 is too small"),
        (-20, struct.pack(">q", 1), "overruns the block end"),
        (-12, struct.pack(">i", 1), "overruns the block end"),
    ],
)
def test_corrupt_block_fields_raise(position: int, value: bytes, match: str) -> None:
    data = encode_rollback_command("20250102000000000", "20250101000000000")
    bad = corrupt(data, position % len(data), value)
    with pytest.raises(LogFormatError, match=match) as info:
        list(iter_blocks(bad))
    assert "offset" in str(info.value)
    assert not isinstance(info.value, TruncatedBlockError)


def test_block_size_smaller_than_fields_is_corrupt() -> None:
    data = encode_rollback_command("20250102000000000", "20250101000000000")
    shrunk = corrupt(data, 6, struct.pack(">q", 80))[:94]
    with pytest.raises(LogFormatError, match="corrupt log block at offset 0"):
        list(iter_blocks(shrunk))


# ---------------------------------------------------------------------------------------------------------------------
# log file names
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        (".abc-0_20250101000000000.log.1_0-26-85", LogFileName("abc-0", "20250101000000000", 1, "0-26-85")),
        (".abc-0_20250101000000000.log.12_3-4-5", LogFileName("abc-0", "20250101000000000", 12, "3-4-5")),
        (".abc-0_20250101000000000.log.2", LogFileName("abc-0", "20250101000000000", 2, "")),
        (".abc-0_20250101000000000.log.1_0-26-85.cdc", None),
        (".abc-0_20250101000000000.archive.1_0-26-85", None),
        ("abc-0_0-26-85_20250101000000000.parquet", None),
        ("..abc-0_20250101000000000.log.1_0-26-85.crc", None),
        (".abc-0_20250101000000000.log.x_0-26-85", None),
        (".abc-0_20250101000000000.log.1_0-26", None),
        (".hoodie_partition_metadata", None),
    ],
)
def test_log_file_name_parse(name: str, parsed: LogFileName | None) -> None:
    assert LogFileName.parse(name) == parsed
    if parsed is not None:
        assert parsed.name == name


def test_log_file_name_sort_key_is_hudi_order() -> None:
    names = [
        LogFileName("f-0", "20250102000000000", 1, "0-1-1"),
        LogFileName("f-0", "20250101000000000", 10, "0-1-1"),
        LogFileName("f-0", "20250101000000000", 2, "1-1-1"),
        LogFileName("f-0", "20250101000000000", 2, "0-9-9"),
    ]
    ordered = sorted(names, key=lambda n: n.sort_key)
    assert [(n.base_instant[:8], n.version, n.write_token) for n in ordered] == [
        ("20250101", 2, "0-9-9"), ("20250101", 2, "1-1-1"), ("20250101", 10, "0-1-1"), ("20250102", 1, "0-1-1")]
    assert sorted(names) == ordered  # same file id: dataclass order agrees
