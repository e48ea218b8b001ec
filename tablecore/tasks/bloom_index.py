"""The bloom index's check of one base file, as it runs in an executor: which of a batch's keys the file holds.

Hudi's bloom index (``HoodieBloomIndex``) in three steps, all on the file itself, so the cost is the files whose key
range and bloom filter admit a key of the batch, not the table:

1. the key range in the footer (``hoodie_min_record_key`` / ``hoodie_max_record_key``) drops the keys outside it;
2. the footer's bloom filter drops the keys it certainly does not hold;
3. if any key is left, the file's key column is read and the keys it really holds are kept (a bloom filter answers
   "maybe"; at Hudi's 1e-9 a false positive is rare, but one would tag an insert as an update of the wrong group).

A file without a filter (written before the table used the bloom index, or by a writer that wrote none) goes
straight to step 3; one without a key range skips step 1.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablecore.exceptions import TableCorruptError
from tablecore.format.bloom_filter import MAX_KEY, MIN_KEY, BloomFilterError, read_footer_filter
from tablecore.io import FileIO

__all__ = ["ProbeCounts", "key_range_of_base_file", "keys_in_base_file"]

logger = logging.getLogger(__name__)

KEY_COL = "_hoodie_record_key"


@dataclass
class ProbeCounts:
    """What the checks of a task did (logged; the benchmark reads how much each step pruned)."""

    files: int = 0
    keys: int = 0
    in_range: int = 0
    maybe: int = 0
    found: int = 0
    files_read: int = 0


@contextmanager
def _base_file(fs: FileIO, path: str) -> Iterator[pq.ParquetFile]:
    """The base file opened for its footer (and columns), damage raised as :class:`TableCorruptError`."""
    try:
        with fs.open_input(path) as f:
            yield pq.ParquetFile(f)
    except FileNotFoundError:
        raise TableCorruptError("base file is missing", path=path) from None
    except pa.ArrowInvalid as exc:
        raise TableCorruptError(f"base file does not open as Parquet: {exc}", path=path) from None
    except BloomFilterError as exc:
        raise TableCorruptError(str(exc), path=path) from None


def _ascii_bounds(footer: dict[bytes, bytes]) -> tuple[str | None, str | None]:
    # Arrow and Spark compare UTF-8 bytes, Java's compareTo UTF-16 units: the same order for ASCII bounds only
    low, high = footer.get(MIN_KEY.encode()), footer.get(MAX_KEY.encode())
    return (low.decode() if low is not None and low.isascii() else None,
            high.decode() if high is not None and high.isascii() else None)


def key_range_of_base_file(fs: FileIO, path: str) -> tuple[str | None, str | None]:
    """The ``(min, max)`` record keys a base file's footer records; ``None`` for a bound it lacks or that is not
    ASCII (Arrow and Spark compare UTF-8 bytes, Java's ``compareTo`` UTF-16 units: the same order for ASCII only).

    Raises:
        TableCorruptError: the file is missing or does not open as Parquet.
    """
    with _base_file(fs, path) as parquet:
        return _ascii_bounds(parquet.metadata.metadata or {})


def keys_in_base_file(fs: FileIO, path: str, keys: pa.Array, counts: ProbeCounts | None = None) -> pa.Array:
    """The ``keys`` (distinct strings) that the base file ``path`` holds.

    Raises:
        TableCorruptError: the file is missing or does not open as Parquet, or its bloom filter does not parse.
    """
    counts = counts if counts is not None else ProbeCounts()
    counts.files += 1
    counts.keys += len(keys)
    with _base_file(fs, path) as parquet:
        footer = parquet.metadata.metadata or {}
        low, high = _ascii_bounds(footer)
        if low is not None:
            keys = keys.filter(pc.greater_equal(keys, low))
        if high is not None:
            keys = keys.filter(pc.less_equal(keys, high))
        counts.in_range += len(keys)
        if len(keys):
            bloom = read_footer_filter(footer)
            if bloom is not None:
                keys = keys.filter(pa.array(bloom.might_contain(keys)))
        counts.maybe += len(keys)
        if not len(keys):
            return keys
        counts.files_read += 1
        stored = parquet.read(columns=[KEY_COL], use_threads=False).column(0)
    found = keys.filter(pc.is_in(keys, value_set=stored.cast(pa.string()).combine_chunks()))
    counts.found += len(found)
    return found
