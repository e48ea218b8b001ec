"""HFile version 3, the file format of Apache Hudi's metadata table: its base files (``*.hfile``) and the content of
its log files' HFILE_DATA blocks.

Written as Hudi 1.0 writes them (through HBase 2.4's writer), byte for byte: ``tests/tablecore/test_hfile.py``
re-encodes the log files of a table Hudi 1.0 wrote and compares. Every integer is big-endian.

- A file is ``[data blocks][root data index][meta index][file info][trailer]``; the three blocks after the data
  (the "load-on-open" section) are contiguous.
- A block is a 33-byte header (an 8-byte magic, the on-disk size without the header, the uncompressed payload size,
  the offset of the previous block of its type, the checksum type, bytes per checksum and the on-disk size of header
  plus payload), the payload (gzip-compressed if the file is), then one CRC32C per 16 KiB of header plus payload.
- A data block holds key/values sorted by key bytes: int32 key length, int32 value length, the key (int16 row length,
  the row - here the record key -, an empty column family, the newest timestamp and the type ``Put``), the value,
  and a one-byte memstore timestamp (0).
- The root index has one entry per data block (its offset, on-disk size, and first key as a Hadoop vlong-prefixed
  byte string); the meta index is empty (no bloom filter: Hudi's readers do not need one here).
- The file info is ``PBUF``, a varint length, and a protobuf list of (name, value) byte pairs, sorted by name;
  ``schema`` holds the Avro writer schema of the values.
- The trailer is the last 4096 bytes: ``TRABLK"$``, a varint-prefixed protobuf (offsets and counts), zero padding,
  and the version ``(minor 3 << 24) | major 3``.

The reader accepts what this writer and Hudi's writers produce (gzip or none; CRC32C or no checksums; one index
level, as every file of the metadata table has) and verifies the checksums it finds.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablecore.exceptions import TableCoreError

__all__ = [
    "HFile", "HFileError", "read_hfile", "write_hfile", "write_hfile_columns",
]

_HEADER = 33
_BYTES_PER_CHECKSUM = 16384
_TRAILER_SIZE = 4096
_LATEST_TIMESTAMP = 0x7FFFFFFFFFFFFFFF
_PUT = 4
_CRC32C, _NO_CHECKSUM = 2, 0
_GZ, _NONE = 1, 2  # HBase's Compression.Algorithm ordinals
_VERSION = (3 << 24) | 3
_COMPARATOR = b"org.apache.hudi.io.storage.HoodieHBaseKVComparator"
_NO_BLOCK = (1 << 64) - 1
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"  # java.util.zip.GZIPOutputStream's: no name, mtime 0
DATA, ROOT_INDEX, FILE_INFO, TRAILER = b"DATABLK*", b"IDXROOT2", b"FILEINF2", b'TRABLK"$'
_BLOCK_HEADER = struct.Struct(">8siiqbii")


class HFileError(TableCoreError, ValueError):
    """Bytes that are not an HFile this reader understands (the message says what was found where)."""


@dataclass(frozen=True)
class HFile:
    """A decoded HFile: its key/values in key order (rows decoded as UTF-8) and its file info."""

    entries: list[tuple[str, bytes]]
    file_info: dict[str, bytes]

    @property
    def schema(self) -> str | None:
        """The Avro writer schema of the values (file info ``schema``), if the file has one."""
        raw = self.file_info.get("schema")
        return None if raw is None else raw.decode("utf-8")


# ---- writing ---------------------------------------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | 0x80 if n else low)
        if not n:
            return bytes(out)


def _vlong(n: int) -> bytes:
    """Hadoop's ``WritableUtils.writeVLong`` (non-negative lengths here)."""
    if -112 <= n <= 127:
        return struct.pack(">b", n)
    size = (n.bit_length() + 7) // 8
    return struct.pack(">b", -112 - size) + n.to_bytes(size, "big")


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _key(row: bytes) -> bytes:
    return struct.pack(">h", len(row)) + row + b"\x00" + struct.pack(">qb", _LATEST_TIMESTAMP, _PUT)


def _gzip(data: bytes, level: int = zlib.Z_DEFAULT_COMPRESSION) -> bytes:
    deflate = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    return _GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


class _Blocks:
    def __init__(self, *, gzip: bool, checksums: bool, level: int = zlib.Z_DEFAULT_COMPRESSION) -> None:
        self.gzip, self.checksums, self.level = gzip, checksums, level
        self.out = bytearray()
        self.uncompressed = 0  # HBase's total_uncompressed_bytes: every block but the root data index, + the trailer

    def add(self, magic: bytes, payload: bytes, previous: int = -1, *, counted: bool = True) -> tuple[int, int]:
        data = _gzip(payload, self.level) if self.gzip else payload
        with_header = _HEADER + len(data)
        checksum_size = 4 * -(-with_header // _BYTES_PER_CHECKSUM)
        head = _BLOCK_HEADER.pack(magic, len(data) + checksum_size, len(payload), previous,
                                  _CRC32C if self.checksums else _NO_CHECKSUM, _BYTES_PER_CHECKSUM, with_header)
        block = head + data
        if self.checksums:
            sums = b"".join(struct.pack(">I", google_crc32c.value(block[i:i + _BYTES_PER_CHECKSUM]))
                            for i in range(0, len(block), _BYTES_PER_CHECKSUM))
        else:
            sums = bytes(checksum_size)
        offset = len(self.out)
        self.out += block + sums
        if counted:
            self.uncompressed += _HEADER + len(payload)
        return offset, len(block) + len(sums)


def write_hfile(entries: Iterable[tuple[str, bytes]], file_info: Mapping[str, bytes], *, gzip: bool = True,
                checksums: bool = True, block_size: int = 1 << 20) -> bytes:
    """Encode key/values as an HFile.

    Args:
        entries: (row key, value) pairs; sorted here by the key's UTF-8 bytes.
        file_info: file info entries besides the ones every HFile has (``schema`` for the metadata table).
        gzip: compress the blocks (Hudi's default) or not.
        checksums: CRC32C block checksums (as HBase writes), or zeros with checksum type NULL.
        block_size: a data block is closed once it reaches this many bytes (Hudi's 1 MiB).

    Raises:
        HFileError: two entries share a key.
    """
    rows = sorted(((k.encode("utf-8"), v) for k, v in entries), key=lambda kv: kv[0])
    for (a, _), (b, _) in itertools.pairwise(rows):
        if a == b:
            raise HFileError(f"HFile key {a.decode('utf-8')!r} given twice")
    blocks = _Blocks(gzip=gzip, checksums=checksums)
    index: list[tuple[int, int, bytes]] = []
    block, first, previous = bytearray(), b"", -1
    key_bytes = value_bytes = 0

    def close_block() -> None:
        nonlocal block, previous
        offset, size = blocks.add(DATA, bytes(block), previous)
        index.append((offset, size, first))
        block, previous = bytearray(), offset

    for row, value in rows:
        key = _key(row)
        if block and len(block) >= block_size:
            close_block()
        if not block:
            first = key
        block += struct.pack(">ii", len(key), len(value)) + key + value + b"\x00"
        key_bytes, value_bytes = key_bytes + len(key), value_bytes + len(value)
    if block:
        close_block()
    return _finish(blocks, index, len(rows), rows[-1][0] if rows else None, key_bytes, value_bytes, file_info,
                   gzip=gzip)


def _finish(blocks: _Blocks, index: list[tuple[int, int, bytes]], n: int, last_row: bytes | None, key_bytes: int,
            value_bytes: int, file_info: Mapping[str, bytes], *, gzip: bool) -> bytes:
    """The load-on-open section and the trailer after the data blocks."""
    load_on_open = len(blocks.out)
    index_payload = b"".join(struct.pack(">qi", o, s) + _vlong(len(k)) + k for o, s, k in index)
    blocks.add(ROOT_INDEX, index_payload, counted=False)
    blocks.add(ROOT_INDEX, b"", load_on_open)  # the meta index: no meta blocks
    info = {"hfile.LASTKEY": _key(last_row) if last_row is not None else b"",
            "hfile.AVG_KEY_LEN": struct.pack(">i", key_bytes // n if n else 0),
            "hfile.AVG_VALUE_LEN": struct.pack(">i", value_bytes // n if n else 0),
            "hfile.CREATE_TIME_TS": struct.pack(">q", 0), "KEY_VALUE_VERSION": struct.pack(">i", 1),
            "MAX_MEMSTORE_TS_KEY": struct.pack(">q", 0), **file_info}
    pairs = b"".join(_field(1, _field(1, k.encode()) + _field(2, v))
                     for k, v in sorted(info.items(), key=lambda kv: kv[0].encode()))
    info_offset, _ = blocks.add(FILE_INFO, b"PBUF" + _varint(len(pairs)) + pairs)
    trailer = b"".join([
        _field(1, info_offset), _field(2, load_on_open), _field(3, len(index_payload)),
        _field(4, blocks.uncompressed + _TRAILER_SIZE), _field(5, len(index)), _field(6, 0), _field(7, n),
        _field(8, 1), _field(9, 0 if index else _NO_BLOCK), _field(10, index[-1][0] if index else _NO_BLOCK),
        _field(11, _COMPARATOR), _field(12, _GZ if gzip else _NONE)])
    tail = TRAILER + _varint(len(trailer)) + trailer
    return bytes(blocks.out) + tail + bytes(_TRAILER_SIZE - 4 - len(tail)) + struct.pack(">i", _VERSION)


def _scatter(buf: np.ndarray, at: np.ndarray, column: pa.Array) -> None:
    """Copy each value of a binary column to ``buf`` at its offset in ``at``."""
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int64, count=len(column) + 1, offset=column.offset * 8)
    lengths = np.diff(offsets)
    total = int(offsets[-1] - offsets[0])
    if not total:
        return
    data = np.frombuffer(column.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    buf[np.repeat(at - (offsets[:-1] - offsets[0]), lengths) + np.arange(total)] = data


def _put_ints(buf: np.ndarray, at: np.ndarray, values: np.ndarray, dtype: str) -> None:
    raw = values.astype(dtype).view(np.uint8).reshape(len(values), -1)
    width = raw.shape[1]
    buf[(at[:, None] + np.arange(width)).ravel()] = raw.ravel()


def write_hfile_columns(keys: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray,
                        file_info: Mapping[str, bytes], *, gzip: bool = True, checksums: bool = True,
                        block_size: int = 1 << 20, level: int = zlib.Z_DEFAULT_COMPRESSION) -> bytes:
    """:func:`write_hfile` of columns (record keys, values), the same bytes, with the key/values laid out by numpy
    instead of one Python step each (millions of record index entries). ``level``: the gzip level (the default
    level gives Hudi's bytes; any level reads the same).

    Raises:
        HFileError: two entries share a key, or a key is null.
    """
    keys = (keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys).cast(pa.large_binary())
    values = (values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values).cast(pa.large_binary())
    if keys.null_count or values.null_count:
        raise HFileError("an HFile key or value is null")
    order = pc.sort_indices(keys)
    keys, values = keys.take(order), values.take(order)
    n = len(keys)
    if n > 1 and pc.any(pc.equal(keys.slice(1), keys.slice(0, n - 1))).as_py():
        first = pc.index(pc.equal(keys.slice(1), keys.slice(0, n - 1)), True).as_py()
        raise HFileError(f"HFile key {keys[first].as_py().decode('utf-8')!r} given twice")
    rows = pc.binary_length(keys).to_numpy().astype(np.int64)
    vals = pc.binary_length(values).to_numpy().astype(np.int64)
    klen = rows + 12
    sizes = 8 + klen + vals + 1
    ends = np.cumsum(sizes)
    starts = ends - sizes
    buf = np.zeros(int(ends[-1]) if n else 0, dtype=np.uint8)
    if n:
        _put_ints(buf, starts, klen, ">i4")
        _put_ints(buf, starts + 4, vals, ">i4")
        _put_ints(buf, starts + 8, rows, ">i2")
        _scatter(buf, starts + 10, keys)
        tail = np.frombuffer(struct.pack(">qb", _LATEST_TIMESTAMP, _PUT), dtype=np.uint8)
        buf[((starts + 11 + rows)[:, None] + np.arange(9)).ravel()] = np.tile(tail, n)
        _scatter(buf, starts + 8 + klen, values)
    blocks = _Blocks(gzip=gzip, checksums=checksums, level=level)
    index: list[tuple[int, int, bytes]] = []
    first, previous = 0, -1
    while first < n:
        last = min(int(np.searchsorted(ends, starts[first] + block_size, "left")), n - 1)
        offset, size = blocks.add(DATA, buf[starts[first]:ends[last]].tobytes(), previous)
        index.append((offset, size, _key(keys[first].as_py())))
        first, previous = last + 1, offset
    return _finish(blocks, index, n, keys[n - 1].as_py() if n else None, int(klen.sum()), int(vals.sum()),
                   file_info, gzip=gzip)


# ---- reading ---------------------------------------------------------------------------------------------------------


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise HFileError("a protobuf varint runs past its message")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def _fields(message: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(message):
        tag, pos = _read_varint(message, pos)
        if tag & 7 == 0:
            value, pos = _read_varint(message, pos)
            out.append((tag >> 3, value))
        elif tag & 7 == 2:
            size, pos = _read_varint(message, pos)
            out.append((tag >> 3, message[pos:pos + size]))
            pos += size
        else:
            raise HFileError(f"protobuf wire type {tag & 7} (field {tag >> 3}) is not one an HFile uses")
    return out


def _block(data: bytes, offset: int, codec: int) -> tuple[bytes, bytes, int]:
    """(magic, payload, offset of the next block) of the block at ``offset``."""
    if offset + _HEADER > len(data):
        raise HFileError(f"a block header at offset {offset} runs past the end of the file")
    magic, on_disk, size, _, checksum, per_checksum, with_header = _BLOCK_HEADER.unpack_from(data, offset)
    end = offset + _HEADER + on_disk
    if on_disk < 0 or with_header < _HEADER or end > len(data) or offset + with_header > end:
        raise HFileError(f"block {magic!r} at offset {offset}: sizes {on_disk}/{with_header} do not fit the file")
    body = data[offset:offset + with_header]
    if checksum == _CRC32C:
        sums = data[offset + with_header:end]
        for i, start in enumerate(range(0, len(body), per_checksum)):
            want = struct.unpack_from(">I", sums, 4 * i)[0] if 4 * i + 4 <= len(sums) else None
            if want != google_crc32c.value(body[start:start + per_checksum]):
                raise HFileError(f"block {magic!r} at offset {offset} fails its CRC32C checksum")
    elif checksum not in (_NO_CHECKSUM,):
        raise HFileError(f"block {magic!r} at offset {offset}: checksum type {checksum} is not supported")
    payload = body[_HEADER:]
    if codec == _GZ:
        try:
            payload = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(payload)
        except zlib.error as e:
            raise HFileError(f"block {magic!r} at offset {offset} does not decompress: {e}") from e
    elif codec != _NONE:
        raise HFileError(f"compression codec {codec} is not supported (gzip or none)")
    if len(payload) != size:
        raise HFileError(f"block {magic!r} at offset {offset} holds {len(payload)} bytes, its header says {size}")
    return magic, payload, end


def _entries(payload: bytes, offset: int) -> list[tuple[str, bytes]]:
    out = []
    pos = 0
    while pos < len(payload):
        if pos + 8 > len(payload):
            raise HFileError(f"data block at offset {offset}: a key/value header is cut short")
        key_size, value_size = struct.unpack_from(">ii", payload, pos)
        key = payload[pos + 8:pos + 8 + key_size]
        row_size = struct.unpack_from(">h", key)[0] if len(key) >= 2 else -1
        if key_size < 12 or row_size < 0 or row_size + 12 > key_size or pos + 9 + key_size + value_size > \
                len(payload):
            raise HFileError(f"data block at offset {offset}: a key/value of sizes {key_size}/{value_size} does "
                             "not fit")
        value = payload[pos + 8 + key_size:pos + 8 + key_size + value_size]
        if payload[pos + 8 + key_size + value_size] != 0:
            raise HFileError(f"data block at offset {offset}: a memstore timestamp other than 0")
        out.append((key[2:2 + row_size].decode("utf-8"), value))
        pos += 9 + key_size + value_size
    return out


def _trailer(data: bytes) -> dict[int, int | bytes]:
    if len(data) < _TRAILER_SIZE:
        raise HFileError(f"{len(data)} bytes are too few for an HFile (its trailer alone is {_TRAILER_SIZE})")
    tail = data[-_TRAILER_SIZE:]
    version = struct.unpack_from(">i", tail, _TRAILER_SIZE - 4)[0]
    if tail[:8] != TRAILER or version & 0xFFFFFF != 3:
        raise HFileError(f"no HFile version 3 trailer (magic {tail[:8]!r}, version {version:#x})")
    size, pos = _read_varint(tail, 8)
    return dict(_fields(tail[pos:pos + size]))


def _file_info(data: bytes, info_offset: int, codec: int) -> dict[str, bytes]:
    magic, payload, _ = _block(data, info_offset, codec)
    if magic != FILE_INFO or payload[:4] != b"PBUF":
        raise HFileError(f"no file info block at offset {info_offset} (found {magic!r})")
    size, pos = _read_varint(payload, 4)
    info: dict[str, bytes] = {}
    for _, pair in _fields(payload[pos:pos + size]):
        kv = dict(_fields(pair)) if isinstance(pair, bytes) else {}
        name, value = kv.get(1), kv.get(2, b"")
        if not isinstance(name, bytes) or not isinstance(value, bytes):
            raise HFileError("a file info entry is not a pair of byte strings")
        info[name.decode("utf-8")] = value
    return info


def read_hfile(data: bytes) -> HFile:
    """Decode an HFile (version 3) whole.

    Raises:
        HFileError: not an HFile of version 3, a block cut short or failing its checksum, an unsupported codec.
    """
    trailer = _trailer(data)
    codec, load_on_open, info_offset = trailer.get(12, _NONE), trailer.get(2), trailer.get(1)
    if not isinstance(load_on_open, int) or not isinstance(info_offset, int) or not isinstance(codec, int):
        raise HFileError("the HFile trailer lacks its load-on-open or file info offset")
    entries: list[tuple[str, bytes]] = []
    first = trailer.get(9, 0)
    offset = first if isinstance(first, int) and first != _NO_BLOCK else load_on_open
    while offset < load_on_open:
        magic, payload, following = _block(data, offset, codec)
        if magic == DATA:
            entries += _entries(payload, offset)
        offset = following
    info = _file_info(data, info_offset, codec)
    count = trailer.get(7, len(entries))
    if count != len(entries):
        raise HFileError(f"the HFile holds {len(entries)} key/values, its trailer says {count!r}")
    return HFile(entries, info)
