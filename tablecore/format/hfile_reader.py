"""Reading an HFile (:mod:`tablecore.format.hfile`) other than whole: point lookups that read only what they need,
and a columnar read of every entry.

An :class:`HFileReader` opens a file given whole (bytes) or as a random-access input (``size()`` and
``read_at(nbytes, offset)``, as any ``pyarrow`` input file, an object-store file reading ranges included). From an
input it reads:

1. the file's last :data:`TAIL_READ` bytes: the trailer and, in files of up to a few hundred thousand blocks, the
   whole load-on-open section (root index, meta index, file info); a larger section is read in a second request;
2. only the data blocks the looked-up keys fall in (found by bisecting the root index's first keys): blocks closer
   than :data:`GAP` bytes are read as one range, and when the ranges add up to more than :data:`WHOLE_SHARE` of the
   file, the file is read whole in one request instead.

So a lookup of a few thousand keys in a record-index file of millions reads a few MB, not the file; one of most of
its blocks reads it once. Each block is decompressed only when a key falls in it.

:func:`read_hfile_columns` decodes every entry of a file into Arrow columns at once (the record index's merges).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Protocol

import numpy as np
import pyarrow as pa

from tablecore.format.hfile import (
    _HEADER,
    _NONE,
    _TRAILER_SIZE,
    DATA,
    ROOT_INDEX,
    HFileError,
    _block,
    _file_info,
    _key,
    _trailer,
)

__all__ = ["GAP", "TAIL_READ", "WHOLE_SHARE", "HFileReader", "RangedInput", "open_hfile", "read_hfile_columns"]

TAIL_READ = 256 << 10
"""The bytes read from the end of a file first (the trailer is the last 4096)."""
GAP = 256 << 10
"""Wanted data blocks at most this many bytes apart are read in one request."""
WHOLE_SHARE = 0.5
"""When the ranges to read add up to more than this share of the file, it is read whole (one request)."""


class RangedInput(Protocol):
    """A random-access input file (``pyarrow.NativeFile`` has these)."""

    def size(self) -> int: ...

    def read_at(self, nbytes: int, offset: int) -> bytes: ...


class HFileReader:
    """An HFile opened for point lookups: its trailer, root index and file info are decoded, and a data block is
    read (from an input) and decompressed only when a lookup falls in it.

    Attributes:
        offsets / first_rows: each data block's offset and first row (record key bytes), in order.
        file_info: the file info entries; ``schema`` holds the values' Avro writer schema.
        requests / bytes_read: what was read from an input (0 for bytes given whole).

    Raises:
        HFileError: the bytes are not an HFile this reader understands (as :func:`tablecore.format.hfile.read_hfile`).
    """

    def __init__(self, data: bytes | RangedInput) -> None:
        self.requests = 0
        self.bytes_read = 0
        if isinstance(data, bytes | bytearray | memoryview):
            self._input: RangedInput | None = None
            self.size = len(data)
            self._loaded: list[tuple[int, bytes]] = [(0, bytes(data))]
            tail_start, tail = 0, self._loaded[0][1]
        else:
            self._input = data
            self.size = data.size()
            self._loaded = []
            if self.size < _TRAILER_SIZE:
                raise HFileError(f"{self.size} bytes are too few for an HFile (its trailer alone is {_TRAILER_SIZE})")
            tail_start = max(0, self.size - TAIL_READ)
            tail = self._read(tail_start, self.size - tail_start)
        trailer = _trailer(tail)
        codec, load_on_open, info_offset = trailer.get(12, _NONE), trailer.get(2), trailer.get(1)
        if not isinstance(load_on_open, int) or not isinstance(info_offset, int) or not isinstance(codec, int):
            raise HFileError("the HFile trailer lacks its load-on-open or file info offset")
        if not 0 <= load_on_open <= info_offset < self.size:
            raise HFileError(f"the trailer's offsets {load_on_open} / {info_offset} do not fit {self.size} bytes")
        if load_on_open < tail_start:  # a load-on-open section larger than the first read
            tail = self._read(load_on_open, tail_start - load_on_open) + tail
            tail_start = load_on_open
        self.codec: int = codec
        self.load_on_open = load_on_open
        count = trailer.get(7)
        self.trailer_count = count if isinstance(count, int) else None
        magic, payload, _ = _block(tail, load_on_open - tail_start, self.codec)
        if magic != ROOT_INDEX:
            raise HFileError(f"no root index block at offset {load_on_open} (found {magic!r})")
        self.offsets: list[int] = []
        self.first_rows: list[bytes] = []
        pos = 0
        while pos < len(payload):
            if pos + 12 > len(payload):
                raise HFileError("the root index is cut short")
            offset = struct.unpack_from(">q", payload, pos)[0]
            size, pos = _read_vlong(payload, pos + 12)
            key = payload[pos:pos + size]
            pos += size
            row_size = struct.unpack_from(">h", key)[0] if len(key) >= 2 else -1
            if row_size < 0 or row_size + 2 > len(key):
                raise HFileError(f"a root index key at {pos} is not an HFile key")
            if not 0 <= offset < load_on_open:
                raise HFileError(f"a root index entry points at offset {offset}, outside the data blocks")
            self.offsets.append(offset)
            self.first_rows.append(key[2:2 + row_size])
        self.file_info = _file_info(tail, info_offset - tail_start, self.codec)

    @property
    def schema(self) -> str | None:
        """The Avro writer schema of the values (file info ``schema``), if the file has one."""
        raw = self.file_info.get("schema")
        return None if raw is None else raw.decode("utf-8")

    def _read(self, offset: int, length: int) -> bytes:
        assert self._input is not None
        data = bytes(self._input.read_at(length, offset))
        if len(data) != length:
            raise HFileError(f"{len(data)} bytes at offset {offset}, {length} expected: the file is cut short")
        self.requests += 1
        self.bytes_read += length
        return data

    def _span(self, block: int) -> tuple[int, int]:
        end = self.offsets[block + 1] if block + 1 < len(self.offsets) else self.load_on_open
        return self.offsets[block], end

    def _buffer(self, offset: int) -> tuple[int, bytes] | None:
        for start, buf in self._loaded:
            if start <= offset and offset + _HEADER <= start + len(buf):
                return start, buf
        return None

    def prefetch(self, blocks: Iterable[int]) -> None:
        """Read the data blocks ``blocks`` from the input: nearby ones as one range, all of the file at once when
        the ranges would be most of it (nothing to do for a file given whole)."""
        if self._input is None:
            return
        spans = sorted(self._span(b) for b in set(blocks) if self._buffer(self.offsets[b]) is None)
        if not spans:
            return
        if sum(end - start for start, end in spans) > WHOLE_SHARE * self.size:
            self._loaded = [(0, self._read(0, self.size))]
            return
        merged = [list(spans[0])]
        for start, end in spans[1:]:
            if start - merged[-1][1] <= GAP:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        for start, end in merged:
            self._loaded.append((start, self._read(start, end - start)))

    def get(self, block: int, rows: Iterable[bytes]) -> dict[bytes, bytes]:
        """The values of those of ``rows`` that data block number ``block`` holds."""
        offset = self.offsets[block]
        found = self._buffer(offset)
        if found is None:
            self.prefetch([block])
            found = self._buffer(offset)
        assert found is not None
        start, buf = found
        magic, payload, _ = _block(buf, offset - start, self.codec)
        if magic != DATA:
            raise HFileError(f"the root index points at a {magic!r} block at offset {offset}")
        out: dict[bytes, bytes] = {}
        for row in rows:
            key = _key(row)
            pos = payload.find(key)
            while pos >= 8:
                key_size, value_size = struct.unpack_from(">ii", payload, pos - 8)
                if key_size == len(key) and pos + key_size + value_size < len(payload):
                    out[row] = payload[pos + key_size:pos + key_size + value_size]
                    break
                pos = payload.find(key, pos + 1)
        return out


def _read_vlong(data: bytes, pos: int) -> tuple[int, int]:
    """Hadoop's ``WritableUtils.readVLong`` (non-negative lengths)."""
    first = struct.unpack_from(">b", data, pos)[0]
    if first >= -112:
        return first, pos + 1
    size = -112 - first
    return int.from_bytes(data[pos + 1:pos + 1 + size], "big"), pos + 1 + size


def open_hfile(data: bytes | RangedInput) -> HFileReader:
    """An HFile opened for point lookups (see :class:`HFileReader`)."""
    return HFileReader(data)


def read_hfile_columns(data: bytes) -> tuple[pa.Array, pa.Array, dict[str, bytes]]:
    """An HFile's keys (strings) and values (binary) as Arrow columns, in key order, and its file info: what
    :func:`read_hfile` decodes, without a Python step per entry. The blocks are decompressed into one buffer and
    walked all at once: step ``i`` reads the ``i``-th entry header of every block with numpy.

    Raises:
        HFileError: as :func:`read_hfile`.
    """
    reader = HFileReader(data)
    payloads = []
    for offset in reader.offsets:
        magic, payload, _ = _block(data, offset, reader.codec)
        if magic != DATA:
            raise HFileError(f"the root index points at a {magic!r} block at offset {offset}")
        payloads.append(payload)
    sizes = np.array([len(p) for p in payloads], dtype=np.int64)
    buf = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    ends = np.cumsum(sizes)
    pos = ends - sizes
    block = np.arange(len(payloads), dtype=np.int64)
    found: list[tuple[np.ndarray, ...]] = []
    step = 0
    weights4 = np.array([1 << 24, 1 << 16, 1 << 8, 1], dtype=np.int64)
    while len(pos):
        if np.any(pos + 10 > ends):
            raise HFileError(f"data block at offset {reader.offsets[int(block[np.argmax(pos + 10 > ends)])]}: a "
                             "key/value header is cut short")
        head = buf[pos[:, None] + np.arange(10)].astype(np.int64)
        key_size = head[:, 0:4] @ weights4
        value_size = head[:, 4:8] @ weights4
        row_size = head[:, 8] * 256 + head[:, 9]
        following = pos + 9 + key_size + value_size
        bad = (key_size < 12) | (row_size + 12 > key_size) | (following > ends) | (head[:, 0] >= 0x80) | \
            (head[:, 4] >= 0x80) | (head[:, 8] >= 0x80)
        bad[~bad] = buf[following[~bad] - 1] != 0  # the memstore timestamp: 0
        if np.any(bad):
            where = reader.offsets[int(block[np.argmax(bad)])]
            raise HFileError(f"data block at offset {where}: a key/value does not fit")
        found.append((block, np.full(len(pos), step), pos + 10, row_size, pos + 8 + key_size, value_size))
        more = following < ends
        pos, block, ends = following[more], block[more], ends[more]
        step += 1
    if found:
        blocks, steps, key_at, key_len, value_at, value_len = (np.concatenate(c) for c in zip(*found, strict=True))
        order = np.lexsort((steps, blocks))
        key_at, key_len, value_at, value_len = key_at[order], key_len[order], value_at[order], value_len[order]
    else:
        key_at = key_len = value_at = value_len = np.zeros(0, dtype=np.int64)
    keys = _binary_array([_ranges(buf, key_at, key_len)], key_len, pa.large_string())
    values = _binary_array([_ranges(buf, value_at, value_len)], value_len, pa.large_binary())
    count = reader.trailer_count
    if count is not None and count != len(keys):
        raise HFileError(f"the HFile holds {len(keys)} key/values, its trailer says {count!r}")
    return keys, values, reader.file_info


def _ranges(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The bytes of ``buf`` in the ranges (``starts``, ``lengths``), ascending and apart, concatenated: a mask from a
    difference array (a byte per byte of ``buf``, not an index)."""
    edges = np.zeros(len(buf) + 1, dtype=np.int8)
    edges[starts] += 1
    edges[starts + lengths] -= 1
    return buf[np.cumsum(edges[:-1], dtype=np.int8).view(np.bool_)]


def _binary_array(parts: list[np.ndarray], lengths: np.ndarray, kind: pa.DataType) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)
    return pa.Array.from_buffers(kind, len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
