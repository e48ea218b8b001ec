"""Avro decimals (``bytes`` or ``fixed`` with the ``decimal`` logical type) for the column-at-a-time codec of
:mod:`tablecore.format.avro_columnar`, up to precision 18 (an unscaled value in 64 bits: money, rates, counts).

Avro stores a decimal's unscaled integer as big-endian two's complement bytes: as long as needed for ``bytes``
(length-prefixed; fastavro writes ``(bit_length(|v|) + 8) // 8`` bytes, which this encoder reproduces byte for
byte), exactly ``size`` bytes for ``fixed``. Arrow's decimal128 is the same integer as 16 little-endian bytes, so
both directions are byte gathers over all values at once, one step per byte position. A field kind is the string
``decimal:<precision>:<scale>:<size>`` (size 0 for ``bytes``). Wider precisions are left to fastavro.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

MAX_PRECISION = 18  # unscaled values fit in an int64
_BYTES_KEYS = {"type", "logicalType", "precision", "scale"}
_FIXED_KEYS = _BYTES_KEYS | {"name", "namespace", "size", "aliases", "doc"}
_THRESHOLDS = np.array([1 << (8 * k - 1) for k in range(1, 8)], dtype=np.uint64)  # |v| >= this: one more byte


def decimal_kind(avro_type: Mapping[str, Any]) -> str | None:
    """The kind of a decimal type this codec handles, else None."""
    if avro_type.get("logicalType") != "decimal" or avro_type.get("type") not in ("bytes", "fixed"):
        return None
    precision, scale = avro_type.get("precision"), avro_type.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int) or not 0 < precision <= MAX_PRECISION \
            or not 0 <= scale <= precision:
        return None
    if avro_type["type"] == "bytes":
        return f"decimal:{precision}:{scale}:0" if set(avro_type) <= _BYTES_KEYS else None
    size = avro_type.get("size")
    if not set(avro_type) <= _FIXED_KEYS or not isinstance(size, int) or not 1 <= size <= 16:
        return None
    return f"decimal:{precision}:{scale}:{size}"


def parse_kind(kind: str) -> tuple[int, int, int] | None:
    """(precision, scale, size; 0 for ``bytes``) of a decimal kind, None for any other kind."""
    if not kind.startswith("decimal:"):
        return None
    precision, scale, size = (int(x) for x in kind.split(":")[1:])
    return precision, scale, size


def unscaled(column: pa.Array, precision: int, scale: int) -> np.ndarray | None:
    """The unscaled int64 values of a decimal column (nulls as 0) to encode under ``(precision, scale)``; None when
    the column is not a decimal of that scale or a value has more digits than ``precision`` (fastavro then
    rescales or raises)."""
    t = column.type
    if not pa.types.is_decimal128(t) or t.scale != scale:
        return None
    words = np.frombuffer(column.buffers()[1], dtype="<i8", count=2 * len(column), offset=column.offset * 16)
    lo, hi = words[0::2], words[1::2]
    valid = np.ones(len(column), dtype=bool) if column.null_count == 0 else \
        column.is_valid().to_numpy(zero_copy_only=False)
    lo = np.where(valid, lo, 0)
    if (np.where(valid, hi, 0) != (lo >> 63)).any() or (np.abs(lo) > 10 ** precision - 1).any():
        return None
    return lo


def encoded(values: np.ndarray, present: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(bytes per value, the bytes in value order) of unscaled ``values``: ``size`` bytes each for ``fixed``, the
    fastavro length for ``bytes`` (``size`` 0; the caller writes the length prefix). Absent values get no bytes."""
    big = values.astype(">i8").view(np.uint8).reshape(len(values), 8)
    if size == 0:
        nbytes = 1 + (np.abs(values).astype(np.uint64)[:, None] >= _THRESHOLDS[None, :]).sum(axis=1)
    else:
        nbytes = np.full(len(values), size, dtype=np.int64)
        if size > 8:  # sign bytes before the 8 of the value
            sign = np.where(values < 0, 0xFF, 0).astype(np.uint8)
            big = np.hstack([np.repeat(sign[:, None], size - 8, axis=1), big])
    width = big.shape[1]
    keep = (np.arange(width)[None, :] >= (width - nbytes)[:, None]) & present[:, None]
    return np.where(present, nbytes, 0).astype(np.int64), big[keep]


def decoded(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, valid: np.ndarray, bitmap: pa.Buffer | None,
            nulls: int, precision: int, scale: int) -> pa.Array | None:
    """The decimal128 array of the big-endian values at ``starts`` / ``lengths`` of ``data`` (null rows: length
    0); None when a value does not fit ``precision`` (the record-by-record decoder then reports it)."""
    n = len(starts)
    if n and int(lengths.max()) > 16:
        return None
    out = np.zeros((n, 16), dtype=np.uint8)
    negative = valid & (lengths > 0) & (data[starts] >= 0x80)
    out[negative] = 0xFF
    for k in range(int(lengths.max()) if n else 0):  # little-endian byte k is the k-th byte from the value's end
        rows = np.nonzero(lengths > k)[0]
        out[rows, k] = data[starts[rows] + lengths[rows] - 1 - k]
    words = out.view("<i8")
    lo, hi = words[:, 0], words[:, 1]
    if (hi != (lo >> 63)).any() or (np.abs(lo) > 10 ** precision - 1).any():
        return None
    return pa.Array.from_buffers(pa.decimal128(precision, scale), n, [bitmap, pa.py_buffer(out)], nulls)
