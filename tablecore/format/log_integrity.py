"""Reading a log file against what completed instants say they wrote into it: a torn write told from lost data.

Every completed write instant's commit metadata records, per log file it wrote, where its bytes start
(``logOffset``), how many there are (``totalWriteBytes``) and, for files lakegate wrote, their CRC-32
(``lakegateCrc32``, a field Hudi's readers ignore). That is a :class:`LogExtent`. With them:

- bytes of a completed instant that are missing (the file is shorter than its extents), that fail their checksum,
  or that do not frame as log blocks are **lost data**: :class:`~tablecore.exceptions.TableCorruptError`, naming the
  file and the instant, never a silent fall-back to older values;
- damaged bytes outside every completed extent (a writer that died mid-append, then bytes of nobody) are a **torn
  write**: skipped with a warning up to the next block magic, as Hudi's reader skips corrupt blocks.

Log files no completed instant of the active timeline names (written by instants archived since, or by a writer
that recorded no sizes) are read the way Hudi reads them: damaged blocks are skipped with a warning.

Everything here is pure: bytes in, blocks out.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tablecore.exceptions import TableCorruptError
from tablecore.format.commit_metadata import WriteStat
from tablecore.format.log_format import MAGIC, LogBlock, LogFileName, LogFormatError, read_block_at

__all__ = ["LogExtent", "check_log_size", "checksum", "extents_by_name", "read_log_checked"]

logger = logging.getLogger(__name__)


def checksum(data: bytes) -> int:
    """The CRC-32 recorded for the bytes an instant wrote into a log file."""
    return zlib.crc32(data) & 0xFFFFFFFF


@dataclass(frozen=True)
class LogExtent:
    """The bytes a completed instant wrote into one log file: ``[offset, offset + size)``."""

    instant: str
    offset: int
    size: int
    crc32: int | None = None

    @property
    def end(self) -> int:
        """The offset after the instant's last byte."""
        return self.offset + self.size

    @classmethod
    def of_stat(cls, instant: str, stat: WriteStat) -> LogExtent | None:
        """The extent a delta write stat records (None: not a log write, or no size recorded)."""
        if stat.log_version is None or not stat.path or stat.total_write_bytes <= 0:
            return None
        if LogFileName.parse(stat.path.rsplit("/", 1)[-1]) is None:
            return None
        return cls(instant, stat.log_offset or 0, stat.total_write_bytes, stat.crc32)


def check_log_size(path: str, size: int, extents: Sequence[LogExtent]) -> None:
    """Raise if a log file of ``size`` bytes cannot hold what completed instants wrote into it (cut short)."""
    for e in extents:
        if size < e.end:
            raise TableCorruptError(
                f"log file is {size} bytes, but instant {e.instant} wrote bytes {e.offset}..{e.end} of it: the "
                f"file was cut short and the instant's records are lost", path=path, instant=e.instant)


def _owner(extents: Sequence[LogExtent], start: int, end: int) -> LogExtent | None:
    """The completed extent overlapping ``[start, end)``, if any."""
    return next((e for e in extents if e.offset < end and start < e.end), None)


def read_log_checked(data: bytes, path: str, extents: Sequence[LogExtent] = ()) -> list[LogBlock]:
    """The intact blocks of a log file, checked against the extents of the completed instants that wrote it.

    Args:
        data: the whole log file.
        path: its path (for messages).
        extents: what completed instants wrote into it (:class:`tablecore.format.file_integrity.WrittenFiles`).

    Returns:
        The blocks in file order; damaged regions outside every extent are skipped with a warning.

    Raises:
        TableCorruptError: bytes of a completed instant are missing, fail their checksum or are not valid blocks.
    """
    data = bytes(data)
    check_log_size(path, len(data), extents)
    for e in extents:
        if e.crc32 is not None and checksum(data[e.offset:e.end]) != e.crc32:
            raise TableCorruptError(
                f"the {e.size} bytes instant {e.instant} wrote at offset {e.offset} fail their CRC-32 check "
                f"(bytes changed after the write)", path=path, instant=e.instant)
    blocks: list[LogBlock] = []
    starts = {e.offset for e in extents}
    pos = 0
    while pos < len(data):
        try:
            block, nxt = read_block_at(data, pos)
        except LogFormatError as exc:
            found = data.find(MAGIC, pos + 1)
            skip_to = len(data) if found == -1 else found
            owner = _owner(extents, pos, skip_to)
            if owner is not None:
                raise TableCorruptError(f"damaged log block at offset {pos}: {exc}", path=path,
                                        instant=owner.instant) from None
            logger.warning("log file %s: skipping %d damaged bytes at offset %d that no completed instant wrote "
                           "(a torn write): %s", path, skip_to - pos, pos, exc)
            pos = skip_to
            continue
        owner = _owner(extents, pos, nxt)
        if owner is not None and (pos < owner.offset or nxt > owner.end):
            # a block straddling an extent's edge: the extent's bytes are not the blocks they were written as
            raise TableCorruptError(f"log block at offset {pos}..{nxt} does not line up with the bytes instant "
                                    f"{owner.instant} wrote ({owner.offset}..{owner.end})", path=path,
                                    instant=owner.instant)
        if pos in starts and owner is not None and block.instant not in (None, owner.instant):
            raise TableCorruptError(f"log block at offset {pos} belongs to instant {block.instant}, but instant "
                                    f"{owner.instant} wrote these bytes", path=path, instant=owner.instant)
        blocks.append(block)
        pos = nxt
    return blocks


def extents_by_name(extents: Mapping[str, Sequence[LogExtent]], path: str) -> Sequence[LogExtent]:
    """The extents recorded for the log file at ``path`` (by its name)."""
    return extents.get(path.rsplit("/", 1)[-1], ())
