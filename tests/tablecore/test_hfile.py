"""HFile version 3 (tablecore.format.hfile) against the metadata table of a table Apache Hudi 1.0 wrote
(tests/fixtures/hudi-v8/mor_v8_trips_8i3u1d.zip, from apache/hudi-rs's test data)."""

from __future__ import annotations

import random
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from tablecore.format.hfile import HFileError, read_hfile, write_hfile, write_hfile_columns
from tablecore.format.hfile_reader import read_hfile_columns
from tablecore.format.log_format import BlockType, read_blocks
from tests.conftest import FIXTURES

COMPUTED = {"hfile.LASTKEY", "hfile.AVG_KEY_LEN", "hfile.AVG_VALUE_LEN", "hfile.CREATE_TIME_TS", "KEY_VALUE_VERSION",
            "MAX_MEMSTORE_TS_KEY"}


@pytest.fixture(scope="module")
def metadata_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("fx8")
    with zipfile.ZipFile(FIXTURES / "hudi-v8" / "mor_v8_trips_8i3u1d.zip") as z:
        z.extractall(dest)
    return dest / "v8_trips_8i3u1d" / ".hoodie" / "metadata"


def log_block_hfiles(metadata: Path) -> list[tuple[str, bytes]]:
    out = []
    for log in sorted(metadata.glob("*/.*.log.*")):
        for block in read_blocks(log.read_bytes()):
            if block.block_type is BlockType.HFILE_DATA:
                out.append((f"{log.parent.name}/{log.name}@{block.offset}", block.content))
    return out


def test_the_hfiles_hudi_wrote_in_log_blocks_are_written_again_byte_for_byte(metadata_table: Path) -> None:
    found = log_block_hfiles(metadata_table)
    assert len(found) >= 10 and {name.split("/")[0] for name, _ in found} >= {"files", "record_index"}
    for name, data in found:
        hfile = read_hfile(data)
        extra = {k: v for k, v in hfile.file_info.items() if k not in COMPUTED}
        assert set(extra) == {"schema"}, name
        assert write_hfile(hfile.entries, extra) == data, name


def test_the_base_hfiles_hudi_wrote_read_with_their_keys_in_order(metadata_table: Path) -> None:
    bases = sorted(metadata_table.glob("*/*.hfile"))
    assert len(bases) >= 12
    files = {}
    for path in bases:
        hfile = read_hfile(path.read_bytes())
        keys = [k for k, _ in hfile.entries]
        assert [k.encode() for k in keys] == sorted(k.encode() for k in keys), path.name
        assert hfile.schema is not None and "HoodieMetadataRecord" in hfile.schema
        if path.parent.name == "files":
            files[path.name] = keys
    assert files == {"files-0000-0_0-955-2690_00000000000000000.hfile": ["__all_partitions__"],  # the table was empty
                     "files-0000-0_23-1133-3302_20251220210130942.hfile":  # compacted: every partition's files
                     ["__all_partitions__", "city=chennai", "city=san_francisco", "city=sao_paulo"]}


@pytest.mark.parametrize(("gzip", "checksums"), [(True, True), (False, True), (True, False), (False, False)])
def test_what_is_written_reads_back_in_key_order_across_many_blocks(gzip: bool, checksums: bool) -> None:
    rng = random.Random(7)
    entries = {f"key-{rng.getrandbits(40):x}-é": rng.randbytes(rng.randint(0, 300)) for _ in range(3000)}
    data = write_hfile(entries.items(), {"schema": b"{}"}, gzip=gzip, checksums=checksums, block_size=4096)
    hfile = read_hfile(data)
    assert hfile.entries == sorted(entries.items(), key=lambda kv: kv[0].encode())
    assert hfile.schema == "{}" and hfile.file_info["hfile.LASTKEY"].endswith(b"\x7f" + b"\xff" * 7 + b"\x04")
    empty = read_hfile(write_hfile([], {"schema": b"{}"}, gzip=gzip, checksums=checksums))
    assert empty.entries == [] and empty.schema == "{}"


def test_damage_is_named() -> None:
    data = bytearray(write_hfile([("a", b"1" * 100), ("b", b"2")], {"schema": b"{}"}, gzip=False))
    data[40] ^= 0xFF
    with pytest.raises(HFileError, match=r"DATABLK.*at offset 0 fails its CRC32C checksum"):
        read_hfile(bytes(data))
    with pytest.raises(HFileError, match="no HFile version 3 trailer"):
        read_hfile(b"PAR1" * 2000)
    with pytest.raises(HFileError, match="too few"):
        read_hfile(b"x")
    with pytest.raises(HFileError, match="'a' given twice"):
        write_hfile([("a", b""), ("a", b"")], {})


@pytest.mark.parametrize("block_size", [1, 300, 4096, 1 << 20])
def test_written_from_columns_it_is_the_same_file(block_size: int) -> None:
    rng = random.Random(block_size)
    keys = list({"".join(rng.choice("ab9_ü漢") for _ in range(rng.randint(1, 30))) for _ in range(3000)})
    values = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))) for _ in keys]
    info = {"schema": b"{}"}
    expected = write_hfile(zip(keys, values, strict=True), info, block_size=block_size)
    assert write_hfile_columns(pa.array(keys), pa.array(values, pa.binary()), info, block_size=block_size) == expected
    assert write_hfile_columns(pa.array([], pa.string()), pa.array([], pa.binary()), info) == write_hfile([], info)
    with pytest.raises(HFileError, match="given twice"):
        write_hfile_columns(pa.array(["a", "b", "a"]), pa.array([b"", b"", b""]), info)


def test_read_into_columns_it_holds_what_the_whole_decode_holds(metadata_table: Path) -> None:
    rng = random.Random(5)
    entries = [(f"k{rng.randrange(10**9)}ü", bytes(rng.randrange(256) for _ in range(rng.randint(0, 30))))
               for _ in range(5000)]
    files = [write_hfile(entries, {"schema": b"{}"}, block_size=2048), write_hfile([], {"schema": b"{}"}),
             *(p.read_bytes() for p in sorted(metadata_table.glob("*/*.hfile")))]
    for data in files:
        whole = read_hfile(data)
        keys, values, info = read_hfile_columns(data)
        assert list(zip(keys.to_pylist(), values.to_pylist(), strict=True)) == whole.entries
        assert info == whole.file_info
