"""The record-level index's records (tablecore.format.record_index) against the metadata table of a table Apache
Hudi 1.0 wrote (tests/fixtures/hudi-v8/mor_v8_trips_8i3u1d.zip, from apache/hudi-rs's test data)."""

from __future__ import annotations

import io
import json
import random
import zipfile
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from tablecore.format import hfile_reader
from tablecore.format import record_index as record_index_format
from tablecore.format.file_naming import new_file_id
from tablecore.format.hfile import HFileError, read_hfile
from tablecore.format.log_format import BlockType, read_blocks
from tablecore.format.record_index import (
    RECORD_INDEX_SCHEMA_JSON,
    Location,
    decode_location,
    encode_location,
    encode_record_index,
    file_group_index,
    file_group_indexes,
    location_values,
    lookup_hfile,
    parse_file_group_id,
)
from tests.conftest import FIXTURES


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("fx8ri")
    with zipfile.ZipFile(FIXTURES / "hudi-v8" / "mor_v8_trips_8i3u1d.zip") as z:
        z.extractall(dest)
    return dest / "v8_trips_8i3u1d"


def hudi_entries(table: Path) -> list[tuple[str, str, bytes, str]]:
    """(file name, key, value, writer schema) of every record index entry Hudi wrote, base files and log blocks."""
    out = []
    for path in sorted((table / ".hoodie" / "metadata" / "record_index").iterdir()):
        if path.name.endswith(".hfile"):
            hfile = read_hfile(path.read_bytes())
            assert hfile.schema is not None
            out += [(path.name, k, v, hfile.schema) for k, v in hfile.entries]
        elif ".log." in path.name:
            for block in read_blocks(path.read_bytes()):
                if block.block_type is BlockType.HFILE_DATA:
                    hfile = read_hfile(block.content)
                    out += [(path.name, k, v, block.schema or hfile.schema or "") for k, v in hfile.entries]
    return out


def test_every_key_hudi_indexed_is_in_the_file_group_hudis_mapping_gives(table: Path) -> None:
    entries = hudi_entries(table)
    assert len({k for _, k, _, _ in entries}) == 8  # the 8 inserted trips (3 updated, 1 deleted)
    for name, key, _, _ in entries:
        group = parse_file_group_id(name.lstrip(".").split("_")[0])
        assert group is not None and file_group_index(key, 10) == group, (name, key)
    keys = [k for _, k, _, _ in entries]
    assert list(file_group_indexes(pa.array(keys), 10)) == [file_group_index(k, 10) for k in keys]


def test_the_locations_hudi_wrote_name_the_tables_file_groups(table: Path) -> None:
    data_files = {(p.parent.name, p.name.split("_")[0]) for p in table.glob("city=*/*.parquet")}
    for _, key, value, schema in hudi_entries(table):
        loc = decode_location(value, schema)
        assert (loc.partition, loc.file_id) in data_files, (key, loc)
        assert loc.instant == "20251220210108078"  # the insert's instant, from epoch milliseconds (UTC)


def test_an_encoded_location_is_the_avro_datum_of_its_schema_and_resolves_against_hudis(table: Path) -> None:
    hudi_schema = json.loads(hudi_entries(table)[0][3])
    ours = fastavro.parse_schema(json.loads(RECORD_INDEX_SCHEMA_JSON))
    for loc in (Location("city=chennai", new_file_id(), "20251220210108078"),
                Location("", "bucket-7", "20240101000000000"),
                Location("dt=2024-01-01/h=ü", "00000003-1111-2222-3333-444455556666-12", "20991231235959999")):
        value = encode_location(loc)
        datum = fastavro.schemaless_reader(io.BytesIO(value), ours, None)
        again = io.BytesIO()
        fastavro.schemaless_writer(again, ours, datum)
        assert again.getvalue() == value
        assert decode_location(value, RECORD_INDEX_SCHEMA_JSON) == loc  # lakegate's own values: decoded by hand
        assert decode_location(value, json.dumps(json.loads(RECORD_INDEX_SCHEMA_JSON), indent=1)) == loc  # fastavro
        resolved = fastavro.schemaless_reader(io.BytesIO(value), ours, fastavro.parse_schema(hudi_schema))
        assert resolved["type"] == 5 and resolved["recordIndexMetadata"]["partitionName"] == loc.partition
        assert resolved["ColumnStatsMetadata"] is None


def test_the_hash_matches_java_on_any_text() -> None:
    rng = random.Random(7)
    alphabet = "abcXYZ019-_:/ éü漢字😀"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    # Java's String.hashCode of known strings ("polygenelubricants" hashes to Integer.MIN_VALUE)
    assert file_group_index("polygenelubricants", 10) == (1 << 31) % 10
    assert file_group_index("", 10) == 0 and file_group_index("a", 10) == 97 % 10
    ascii_keys = [k.encode("ascii", "ignore").decode() for k in keys] + ["polygenelubricants"]
    for batch in (keys, ascii_keys):
        assert list(file_group_indexes(pa.array(batch), 13)) == [file_group_index(k, 13) for k in batch]


def test_a_lookup_decompresses_only_what_it_needs_and_finds_every_key() -> None:
    rng = random.Random(3)
    keys = sorted({f"trip-{rng.randrange(10**9):09d}" for _ in range(20_000)})
    fid = new_file_id()
    data = encode_record_index([(k, encode_location(Location(f"d={i % 7}", fid, "20240101000000000")))
                                for i, k in enumerate(keys)], block_size=4096)
    wanted = [*rng.sample(keys, 300), "absent", "trip-", "zzz", keys[0], keys[-1]]
    found = lookup_hfile(data, wanted)
    assert set(found) == {k for k in wanted if k in set(keys)}
    index = {k: i for i, k in enumerate(keys)}
    assert all(loc == Location(f"d={index[k] % 7}", fid, "20240101000000000") for k, loc in found.items())
    assert lookup_hfile(encode_record_index([]), ["x"]) == {}


def test_a_lookup_in_an_input_file_reads_only_the_ranges_its_keys_fall_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on object storage: a few keys read the tail and a few block ranges; most of the blocks, the file once."""
    monkeypatch.setattr(hfile_reader, "TAIL_READ", 8192)  # a 2 MB file's load-on-open section is read separately
    monkeypatch.setattr(hfile_reader, "GAP", 8192)
    rng = random.Random(5)
    keys = sorted({f"trip-{rng.randrange(10**9):09d}" for _ in range(100_000)})
    fid = new_file_id()
    data = encode_record_index([(k, encode_location(Location("d=1", fid, "20240101000000000"))) for k in keys],
                               block_size=4096)
    assert len(data) > 500_000

    def lookup(wanted: list[str]) -> tuple[dict[str, Location], hfile_reader.HFileReader]:
        reader = hfile_reader.HFileReader(pa.BufferReader(data))
        monkeypatch.setattr(record_index_format, "open_hfile", lambda _: reader)
        return lookup_hfile(pa.BufferReader(data), wanted), reader

    few = [*rng.sample(keys, 20), "trip-absent"]
    found, reader = lookup(few)
    assert found == lookup_hfile(data, few) and set(found) == set(few) - {"trip-absent"}
    assert reader.bytes_read < len(data) // 10 and 3 <= reader.requests <= 22
    many = rng.sample(keys, 20_000)
    found, reader = lookup(many)
    assert set(found) == set(many)
    assert reader.bytes_read < 2 * len(data) and reader.requests == 3  # tail, load-on-open, then the whole file
    with pytest.raises(HFileError, match="too few"):
        hfile_reader.HFileReader(pa.BufferReader(b"x" * 100))
    with pytest.raises(HFileError, match=r"cut short|trailer"):
        hfile_reader.HFileReader(pa.BufferReader(data[: len(data) // 2] + data[-5000:]))


def test_the_locations_of_many_rows_are_each_rows_location() -> None:
    rng = random.Random(11)
    fids = [new_file_id() for _ in range(7)]
    rows = [(f"d={rng.randrange(5)}", rng.choice(fids), rng.choice(["20240101000000000", "20250606121212121"]))
            for _ in range(3000)]
    parts, files, instants = (pa.array(list(c)) for c in zip(*rows, strict=True))
    assert location_values(parts, files, instants).to_pylist() == [encode_location(Location(*r)) for r in rows]
