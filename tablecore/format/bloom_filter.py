"""Hudi's record-key bloom filters, as Hudi writes them into base-file footers.

Every base file Hudi writes carries, in its Parquet footer's key-value metadata:

- ``org.apache.hudi.bloomfilter``: a bloom filter of the file's record keys, serialized as Hadoop's ``Filter``
  ``write(DataOutput)`` bytes (big-endian), then base64;
- ``hoodie_bloom_filter_type_code``: ``DYNAMIC_V0`` (the default) or absent for a ``SIMPLE`` filter;
- ``hoodie_min_record_key`` / ``hoodie_max_record_key``: the smallest and largest key (Java ``String`` order).

Hudi's bloom index prunes a file by the key range first, then probes the filter; a Hudi writer configured with the
bloom index (the default before 0.14) refuses a base file without them.

Bytes: ``int -1`` (version), ``int nbHash``, ``byte hashType`` (1 = murmur), ``int vectorSize``; a ``SIMPLE`` filter
then has ``ceil(vectorSize / 8)`` bytes of bits (bit ``i`` is ``1 << (i % 8)`` of byte ``i // 8``). ``DYNAMIC_V0``
(Hadoop's ``DynamicBloomFilter``) has the same header, then ``int nr`` (keys per row), ``int currentNbRecord``,
``int rows`` and each row as a ``SIMPLE`` filter. A key's bit positions are a chain of Hadoop's MurmurHash2 over its
UTF-8 bytes, seeded by the previous hash: ``h_i = murmur(key, h_{i-1})``, ``pos_i = abs(h_i % vectorSize)``.

The hashing is vectorized with numpy over keys of equal length, so a file's filter costs numpy passes, not a Python
loop per key. Checked byte for byte against Hudi's serialized filters and the fixtures' footers
(``tests/tablecore/test_bloom_filter.py``).
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from tablecore.exceptions import TableCoreError

BLOOM_FILTER_KEY = "org.apache.hudi.bloomfilter"
OLD_BLOOM_FILTER_KEY = "com.uber.hoodie.bloomfilter"
TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"
MIN_KEY = "hoodie_min_record_key"
MAX_KEY = "hoodie_max_record_key"

SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
MURMUR_HASH = 1

# Hudi's defaults (hoodie.index.bloom.num_entries, .fpp, hoodie.bloom.index.filter.dynamic.max.entries)
DEFAULT_NUM_ENTRIES = 60_000
DEFAULT_FPP = 1e-9
DEFAULT_MAX_ENTRIES = 100_000

_VERSION = -1
_M = np.uint32(0x5BD1E995)
_HEADER = struct.Struct(">iiBi")
_DYNAMIC_HEADER = struct.Struct(">iii")


class BloomFilterError(TableCoreError, ValueError):
    """A footer's bloom filter that does not parse (the message says what was found)."""


def bloom_parameters(num_entries: int, fpp: float) -> tuple[int, int]:
    """``(vector size in bits, number of hashes)`` for ``num_entries`` keys at false-positive rate ``fpp``."""
    if num_entries <= 0 or not 0.0 < fpp < 1.0:
        raise ValueError(f"a bloom filter needs num_entries > 0 and 0 < fpp < 1, got {num_entries}, {fpp}")
    bits = math.ceil(num_entries * (-math.log(fpp) / (math.log(2) * math.log(2))))
    return bits, math.ceil(math.log(2) * bits / num_entries)


KeysLike: TypeAlias = "Iterable[str | bytes] | pa.Array | pa.ChunkedArray"
"""Record keys: Python strings or bytes, or an Arrow string / binary array."""


def _mixed_blocks(rows: npt.NDArray[np.uint8], words: int) -> npt.NDArray[np.uint32]:
    """MurmurHash2's per-word mixing (``k *= m; k ^= k >>> 24; k *= m``) of each key's little-endian words: it does
    not depend on the seed, so the chain of ``nb_hash`` hashes computes it once."""
    k = np.ascontiguousarray(rows[:, :words * 4]).view("<u4").reshape(len(rows), words).astype(np.uint32)
    k *= _M
    k ^= k >> np.uint32(24)
    k *= _M
    return np.ascontiguousarray(k.T)


def _murmur(mixed: npt.NDArray[np.uint32], tail: npt.NDArray[np.uint32] | None, length: int,
            seed: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """Hadoop's MurmurHash2 of keys of one ``length``: ``mixed`` their words (:func:`_mixed_blocks`, word-major),
    ``tail`` the last ``length % 4`` bytes folded (sign-extended as Java does), ``seed`` one per key."""
    h = seed ^ np.uint32(length)
    for k in mixed:
        h *= _M
        h ^= k
    if tail is not None:
        h ^= tail
        h *= _M
    h ^= h >> np.uint32(13)
    h *= _M
    h ^= h >> np.uint32(15)
    return h


def _fold_tail(data: npt.NDArray[np.uint8], length: int) -> npt.NDArray[np.uint32] | None:
    left = length % 4
    if not left:
        return None
    signed = data[:, length - left:].view(np.int8).astype(np.int32)
    folded = np.zeros(len(data), dtype=np.int32)
    for i in range(left):  # data[len-3] << 16, data[len-2] << 8, data[len-1]: each sign-extended first
        folded ^= signed[:, i] << np.int32(8 * (left - 1 - i))
    return folded.view(np.uint32)


def bit_positions(keys: KeysLike, nb_hash: int, vector_size: int) -> npt.NDArray[np.int32]:
    """The ``(len(keys), nb_hash)`` bit positions (``int32``) of ``keys`` (UTF-8; order kept).

    Keys are grouped by byte length and each group hashed in numpy passes, straight from the Arrow buffers."""
    arr = _binary(keys)
    n = len(arr)
    out = np.empty((n, nb_hash), dtype=np.int32)
    if not n:
        return out
    if arr.null_count:
        raise ValueError("a bloom filter key must not be null")
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=n + 1, offset=arr.offset * 8)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    lengths = np.diff(offsets)
    if int(lengths.min()) == 0:
        raise ValueError("a bloom filter key must not be empty")
    for length in np.unique(lengths).tolist():
        idx = np.flatnonzero(lengths == length)
        rows = data[offsets[idx][:, None] + np.arange(length)]
        mixed = _mixed_blocks(rows, length // 4)
        tail = _fold_tail(rows, length)
        h = np.zeros(len(idx), dtype=np.uint32)
        hashes = np.empty((nb_hash, len(idx)), dtype=np.uint32)
        for i in range(nb_hash):
            h = _murmur(mixed, tail, length, h)
            hashes[i] = h
        # Java: Math.abs(h % vectorSize), a remainder truncated toward zero
        out[idx] = np.abs(np.fmod(hashes.view(np.int32), np.int32(vector_size))).T
    return out


def _binary(keys: KeysLike) -> pa.LargeBinaryArray:
    """``keys`` as one large-binary Arrow array (strings as their UTF-8 bytes)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks else pa.array([], pa.string())
    if not isinstance(keys, pa.Array):
        items = list(keys)
        keys = pa.array([k.encode("utf-8") if isinstance(k, str) else k for k in items], pa.binary())
    return keys.cast(pa.large_binary()) if keys.type != pa.large_binary() else keys


@dataclass
class BloomFilter:
    """A Hudi bloom filter: ``rows`` of bit vectors (one for ``SIMPLE``, one or more for ``DYNAMIC_V0``)."""

    type_code: str
    vector_size: int
    nb_hash: int
    nr: int = 0  # keys per row (DYNAMIC_V0)
    max_entries: int = 0  # DYNAMIC_V0: rows stop being added once rows * nr >= max_entries
    current: int = 0  # DYNAMIC_V0's currentNbRecord, as Hadoop counts it
    rows: list[npt.NDArray[np.bool_]] = field(default_factory=list)
    _round_robin: int = 0
    _reached_max: bool = False

    @classmethod
    def create(cls, type_code: str = DYNAMIC_V0, num_entries: int = DEFAULT_NUM_ENTRIES, fpp: float = DEFAULT_FPP,
               max_entries: int = DEFAULT_MAX_ENTRIES) -> BloomFilter:
        """An empty filter sized as Hudi sizes it."""
        if type_code not in (SIMPLE, DYNAMIC_V0):
            raise ValueError(f"unknown bloom filter type {type_code!r} (expected {SIMPLE} or {DYNAMIC_V0})")
        bits, hashes = bloom_parameters(num_entries, fpp)
        return cls(type_code, bits, hashes, nr=num_entries, max_entries=max_entries,
                   rows=[np.zeros(bits, dtype=np.bool_)])

    def add(self, keys: KeysLike) -> None:
        """Adds keys in order (for ``DYNAMIC_V0`` the order decides which row a key lands in, as in Hudi)."""
        pos = bit_positions(keys, self.nb_hash, self.vector_size)
        count = len(pos)
        if not count:
            return
        if self.type_code == SIMPLE:
            self.rows[0][pos.ravel()] = True
            return
        start = 0
        while start < count:
            if self._reached_max:  # Hadoop: matrix[curMatrixIndex++ % rows], one key each
                row_of = (self._round_robin + np.arange(count - start)) % len(self.rows)
                for r in range(len(self.rows)):
                    self.rows[r][pos[start:][row_of == r].ravel()] = True
                self._round_robin += count - start
                self.current += count - start
                return
            if self.current >= self.nr:
                if len(self.rows) * self.nr < self.max_entries:
                    self.rows.append(np.zeros(self.vector_size, dtype=np.bool_))
                    self.current = 0
                else:  # this key goes to row 0, the round robin starts after it
                    self._reached_max = True
                    self.rows[0][pos[start]] = True
                    self.current += 1
                    start += 1
                    continue
            take = min(count - start, self.nr - self.current)
            self.rows[-1][pos[start:start + take].ravel()] = True
            self.current += take
            start += take

    def might_contain(self, keys: KeysLike) -> npt.NDArray[np.bool_]:
        """For each key: could it be in the filter (``False`` means certainly not)."""
        pos = bit_positions(keys, self.nb_hash, self.vector_size)
        hit = np.zeros(len(pos), dtype=np.bool_)
        for row in self.rows:
            hit |= row[pos].all(axis=1)
        return hit

    def serialize(self) -> str:
        """Base64 of the Hadoop ``write(DataOutput)`` bytes, as ``serializeToString()``."""
        header = _HEADER.pack(_VERSION, self.nb_hash, MURMUR_HASH, self.vector_size)
        bits = [header + np.packbits(row, bitorder="little").tobytes() for row in self.rows]
        if self.type_code == SIMPLE:
            raw = bits[0]
        else:
            raw = header + _DYNAMIC_HEADER.pack(self.nr, self.current, len(self.rows)) + b"".join(bits)
        return base64.b64encode(raw).decode("ascii")

    @classmethod
    def parse(cls, text: str | bytes, type_code: str | None) -> BloomFilter:
        """A filter from a footer's base64 text; ``type_code`` ``None`` means ``SIMPLE`` (Hudi's old files)."""
        kind = type_code or SIMPLE
        try:
            raw = base64.b64decode(text, validate=True)
            version, nb_hash, hash_type, vector_size = _HEADER.unpack_from(raw, 0)
            if version != _VERSION or hash_type != MURMUR_HASH:
                raise ValueError(f"version {version}, hash type {hash_type} (expected -1 and murmur)")
            if kind == SIMPLE:
                return cls(SIMPLE, vector_size, nb_hash, rows=[_bits(raw, _HEADER.size, vector_size)])
            if kind != DYNAMIC_V0:
                raise ValueError(f"unknown bloom filter type {kind!r}")
            nr, current, count = _DYNAMIC_HEADER.unpack_from(raw, _HEADER.size)
            offset, rows = _HEADER.size + _DYNAMIC_HEADER.size, []
            for _ in range(count):
                rows.append(_bits(raw, offset + _HEADER.size, vector_size))
                offset += _HEADER.size + (vector_size + 7) // 8
            return cls(DYNAMIC_V0, vector_size, nb_hash, nr=nr, current=current, rows=rows)
        except (ValueError, struct.error) as exc:
            raise BloomFilterError(f"unreadable {kind} bloom filter: {exc}") from exc


def _bits(raw: bytes, offset: int, vector_size: int) -> npt.NDArray[np.bool_]:
    size = (vector_size + 7) // 8
    if offset + size > len(raw):
        raise ValueError(f"{len(raw) - offset} bytes of bits, {size} expected for {vector_size} bits")
    packed = np.frombuffer(raw, dtype=np.uint8, count=size, offset=offset)
    return np.unpackbits(packed, bitorder="little")[:vector_size].astype(np.bool_)


def key_range(keys: pa.Array | pa.ChunkedArray) -> tuple[str, str] | None:
    """``(min, max)`` of string ``keys`` in Java ``String`` order (UTF-16 code units), ``None`` if empty.

    Arrow compares UTF-8 bytes (code points), which is Java's order unless a key holds both a character above
    U+FFFF and one in U+E000..U+FFFF; only keys that are not all ASCII take the slower exact path."""
    if len(keys) == 0 or keys.null_count == len(keys):
        return None
    if pc.all(pc.string_is_ascii(keys)).as_py() is not False:
        bounds = pc.min_max(keys).as_py()
        return bounds["min"], bounds["max"]
    ordered = sorted((k for k in keys.to_pylist() if k is not None), key=lambda k: k.encode("utf-16-be"))
    return ordered[0], ordered[-1]


def key_footer(keys: pa.Array | pa.ChunkedArray, *, bloom: bool, type_code: str = DYNAMIC_V0,
               num_entries: int = DEFAULT_NUM_ENTRIES, fpp: float = DEFAULT_FPP,
               max_entries: int = DEFAULT_MAX_ENTRIES) -> dict[str, str]:
    """The footer entries Hudi writes for a base file holding ``keys`` (in file order): the key range always, the
    bloom filter if ``bloom``."""
    out: dict[str, str] = {}
    if bloom and len(keys):
        bloom_filter = BloomFilter.create(type_code, num_entries, fpp, max_entries)
        bloom_filter.add(keys)
        out[BLOOM_FILTER_KEY] = bloom_filter.serialize()
        if type_code == DYNAMIC_V0:
            out[TYPE_CODE_KEY] = type_code
    bounds = key_range(keys)
    if bounds is not None:
        out[MIN_KEY], out[MAX_KEY] = bounds
    return out


def read_footer_filter(metadata: dict[bytes, bytes] | None) -> BloomFilter | None:
    """The bloom filter of a Parquet footer's key-value metadata, ``None`` when it has none."""
    if not metadata:
        return None
    text = metadata.get(BLOOM_FILTER_KEY.encode()) or metadata.get(OLD_BLOOM_FILTER_KEY.encode())
    if text is None:
        return None
    code = metadata.get(TYPE_CODE_KEY.encode())
    return BloomFilter.parse(text, code.decode() if code else None)
