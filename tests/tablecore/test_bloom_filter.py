"""Hudi's record-key bloom filters (tablecore.format.bloom_filter): byte-identical to the filters Hadoop and Hudi
serialize (Hudi's own test vectors) and to the footers of the Hudi-written fixture tables; the vectorized hash agrees
with a line-by-line port of Java's MurmurHash on keys of every length and on non-ASCII bytes."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablecore.format.bloom_filter import (
    BLOOM_FILTER_KEY,
    DYNAMIC_V0,
    MAX_KEY,
    MIN_KEY,
    SIMPLE,
    TYPE_CODE_KEY,
    BloomFilter,
    BloomFilterError,
    bit_positions,
    bloom_parameters,
    key_footer,
    key_range,
    read_footer_filter,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
VECTORS = FIXTURES / "bloom-filter"


def last_line(name: str) -> str:
    return (VECTORS / name).read_text().strip().splitlines()[-1]


KEYS = last_line("all_10000.keys.data").split(",")


@pytest.mark.parametrize(("name", "type_code", "entries", "max_entries"), [
    ("simple_1000_000001_murmur.bf.data", SIMPLE, 1000, -1),
    ("simple_10000_000001_murmur.bf.data", SIMPLE, 10000, -1),
    ("dynamic_200_000001_murmur_1000.bf.data", DYNAMIC_V0, 200, 1000),  # 5 rows, then round robin
    ("dynamic_1000_000001_murmur_5000.bf.data", DYNAMIC_V0, 1000, 5000),
])
def test_filters_are_byte_identical_to_hudis_test_vectors(name: str, type_code: str, entries: int,
                                                          max_entries: int) -> None:
    expected = last_line(name)
    mine = BloomFilter.create(type_code, entries, 0.000001, max_entries)
    mine.add(KEYS[:3333])
    mine.add(pa.array(KEYS[3333:]))  # in two calls, the second from Arrow: the rows fill the same way
    assert mine.serialize() == expected
    theirs = BloomFilter.parse(expected, type_code)
    assert theirs.might_contain(KEYS).all()
    assert theirs.might_contain(pa.array(KEYS[:10])).all()
    if entries >= len(KEYS):  # not overfull: the false-positive rate holds
        assert theirs.might_contain([f"not-a-key-{i}" for i in range(2000)]).sum() <= 1


def test_hudi_sizes_its_default_filter_as_expected() -> None:
    assert bloom_parameters(60_000, 1e-9) == (2_587_966, 30)
    with pytest.raises(ValueError, match="num_entries"):
        bloom_parameters(0, 0.1)


def test_the_footers_of_hudi_written_files_are_reproduced_byte_for_byte(tmp_path: Path) -> None:
    checked = 0
    for archive in sorted((FIXTURES / "hudi-v6").glob("*.zip")):
        with zipfile.ZipFile(archive) as z:
            z.extractall(tmp_path / archive.stem)
    for f in sorted(tmp_path.rglob("*.parquet")):
        if "__MACOSX" in f.parts:
            continue
        parquet = pq.ParquetFile(f)
        footer = parquet.metadata.metadata
        keys = parquet.read(columns=["_hoodie_record_key"]).column(0)
        mine = key_footer(keys, bloom=True)
        assert set(mine) == {BLOOM_FILTER_KEY, TYPE_CODE_KEY, MIN_KEY, MAX_KEY}
        for k, v in mine.items():
            assert footer[k.encode()].decode() == v, (f, k)
        found = read_footer_filter(footer)
        assert found is not None and found.type_code == DYNAMIC_V0
        assert found.might_contain(keys).all()
        checked += 1
    assert checked >= 15


def _java_murmur(data: bytes, seed: int) -> int:
    """Hudi's MurmurHash.hash, line by line, with Java's 32-bit ints (the reference for the vectorized one)."""
    def i32(x: int) -> int:
        x &= 0xFFFFFFFF
        return x - (1 << 32) if x >= 1 << 31 else x

    def sbyte(b: int) -> int:
        return b - 256 if b >= 128 else b

    m, r, length = 0x5BD1E995, 24, len(data)
    h = i32(seed ^ length)
    for i in range(length >> 2):
        k = sbyte(data[4 * i + 3])
        k = i32(k << 8) | data[4 * i + 2]
        k = i32(k << 8) | data[4 * i + 1]
        k = i32(k << 8) | data[4 * i]
        k = i32(k * m)
        k ^= (k & 0xFFFFFFFF) >> r
        k = i32(k * m)
        h = i32(h * m)
        h = i32(h ^ k)
    left = length & 3
    if left:
        if left >= 3:
            h = i32(h ^ i32(sbyte(data[length - 3]) << 16))
        if left >= 2:
            h = i32(h ^ i32(sbyte(data[length - 2]) << 8))
        h = i32(h ^ sbyte(data[length - 1]))
        h = i32(h * m)
    h = i32(h ^ ((h & 0xFFFFFFFF) >> 13))
    h = i32(h * m)
    return i32(h ^ ((h & 0xFFFFFFFF) >> 15))


def test_the_vectorized_hash_agrees_with_javas_on_any_length_and_non_ascii_bytes() -> None:
    rng = np.random.default_rng(7)
    keys = [bytes(rng.integers(0, 256, size=n, dtype=np.uint8)) for n in (1, 2, 3, 4, 5, 6, 7, 8, 13, 36, 37)
            for _ in range(5)] + ["é".encode(), "日本".encode(), b"\xff\xfe\x80"]
    vector, hashes = 2_587_980, 30
    got = bit_positions(keys, hashes, vector)
    for row, key in zip(got, keys, strict=True):
        seed, want = 0, []
        for _ in range(hashes):
            seed = _java_murmur(key, seed)
            r = abs(seed) % vector if seed >= 0 else -(abs(seed) % vector)  # Java's truncated remainder
            want.append(abs(r))
        assert row.tolist() == want, key


def test_java_string_order_for_the_key_range() -> None:
    assert key_range(pa.array(["b", "a", "c"])) == ("a", "c")
    # U+FF5E sorts after U+1F600 in UTF-8 (code points) but before it in UTF-16 (a surrogate, 0xD83D, is smaller)
    assert key_range(pa.array(["\uff5e", "\U0001f600"])) == ("\U0001f600", "\uff5e")
    assert key_range(pa.array([], pa.string())) is None
    assert key_footer(pa.array(["k"]), bloom=False) == {MIN_KEY: "k", MAX_KEY: "k"}


def test_bad_filters_and_keys_are_refused_with_a_clear_error() -> None:
    with pytest.raises(BloomFilterError, match="unreadable DYNAMIC_V0 bloom filter"):
        BloomFilter.parse("bm90IGEgZmlsdGVy", DYNAMIC_V0)
    good = BloomFilter.create(SIMPLE, 10, 0.01)
    good.add(["a"])
    cut = good.serialize()[:24]
    with pytest.raises(BloomFilterError, match="bytes of bits"):
        BloomFilter.parse(cut + "=" * (-len(cut) % 4), SIMPLE)
    with pytest.raises(ValueError, match="empty"):
        good.add([""])
    with pytest.raises(ValueError, match="unknown bloom filter type"):
        BloomFilter.create("GLOBAL", 10, 0.01)
    assert read_footer_filter({b"other": b"x"}) is None
