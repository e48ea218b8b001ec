"""Hudi v6 log files: block framing, command blocks and log file names (reference §4, §6); the contents of data and
delete blocks are in :mod:`tablecore.format.log_content`.

A log file is a plain concatenation of blocks; every integer is big-endian::

    magic "#HUDI#" | blockSize int64 | version int32 (=1) | type int32 | header map | contentLen int64 | content
    | footer map | totalLen int64

``blockSize`` counts the bytes after itself up to and including ``totalLen``; ``totalLen`` = ``blockSize + 6`` (the
bytes from the magic through the footer). A map is an int32 entry count, then per entry an int32 key, an int32
byte length and that many UTF-8 bytes.

Block contents (content version 3, the only one Hudi 0.14/0.15 writes; :mod:`tablecore.format.log_content`):

- AVRO_DATA: int32 version, int32 record count, then per record an int32 length and the schemaless Avro datum,
  decoded with the block's SCHEMA header (:func:`encode_avro_data`, :func:`decode_avro_data`);
- DELETE: int32 version, int32 length, an Avro ``HoodieDeleteRecordList`` datum whose ordering values use Java's
  wrapper-record union (:func:`encode_delete`, :func:`decode_delete`);
- COMMAND: a rollback of the blocks of a target instant; empty content (:func:`encode_rollback_command`);
- PARQUET_DATA: a complete Parquet file (:func:`decode_parquet_data`; read only).

Everything here is pure (no Spark, no I/O): bytes in, bytes out.
"""

from __future__ import annotations

import enum
import logging
import re
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from tablecore.exceptions import TableCoreError

__all__ = [
    "CONTENT_VERSION",
    "MAGIC",
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "LogFileName",
    "LogFormatError",
    "TruncatedBlockError",
    "encode_block",
    "encode_rollback_command",
    "iter_blocks",
    "read_block_at",
    "read_blocks",
]

logger = logging.getLogger(__name__)

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
CONTENT_VERSION = 3
ROLLBACK_COMMAND = "0"  # COMMAND_BLOCK_TYPE value of a rollback, the only command type

INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
# bytes of a block after blockSize when header, content and footer are all empty: version, type, header count,
# content length, footer count, total length
_MIN_BLOCK_SIZE = 4 + 4 + 4 + 8 + 4 + 8
# fastavro reports malformed input with assorted builtin exceptions
AVRO_DECODE_ERRORS = (EOFError, ValueError, IndexError, KeyError, TypeError, OverflowError, StopIteration)


class LogFormatError(TableCoreError, ValueError):
    """Bytes that are not a valid Hudi log file, block or block content (the message names the offset)."""


class TruncatedBlockError(LogFormatError):
    """The data ends inside a block, as after a writer died mid-append.

    Attributes:
        offset: the file offset at which the incomplete block starts.
    """

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class BlockType(enum.IntEnum):
    """The block type codes of log format version 1."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(enum.IntEnum):
    """Keys of the block header and footer maps (Java decodes them by ordinal, so only 0-6 exist in v6)."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6


@dataclass(frozen=True)
class LogBlock:
    """One decoded block. ``header`` and ``footer`` keep the order in which the file holds their entries.

    ``offset`` (the file offset of the block's magic) is informational and not part of equality.
    """

    block_type: BlockType
    header: dict[HeaderKey, str]
    content: bytes
    footer: dict[HeaderKey, str] = field(default_factory=dict)
    offset: int = field(default=0, compare=False)

    @property
    def instant(self) -> str | None:
        """The INSTANT_TIME header: the instant that wrote the block (for a command block, the rollback instant)."""
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant(self) -> str | None:
        """The TARGET_INSTANT_TIME header: the instant a command block rolls back."""
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema(self) -> str | None:
        """The SCHEMA header: the Avro writer schema (JSON text) of a data or delete block."""
        return self.header.get(HeaderKey.SCHEMA)

    @property
    def is_rollback(self) -> bool:
        """True for a COMMAND block that rolls back ``target_instant``."""
        return (self.block_type is BlockType.COMMAND
                and self.header.get(HeaderKey.COMMAND_BLOCK_TYPE) == ROLLBACK_COMMAND)

    def to_bytes(self) -> bytes:
        """Encode the block again, header and footer entries in their current order."""
        return encode_block(self.block_type, list(self.header.items()), self.content, footer=list(self.footer.items()))


# ---------------------------------------------------------------------------------------------------------------------
# block framing
# ---------------------------------------------------------------------------------------------------------------------


def _encode_map(entries: Iterable[tuple[HeaderKey, str]] | Mapping[HeaderKey, str]) -> bytes:
    items = list(entries.items()) if isinstance(entries, Mapping) else list(entries)
    keys = [HeaderKey(k) for k, _ in items]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate header/footer keys: {[k.name for k in keys]}")
    out = [INT32.pack(len(items))]
    for key, (_, value) in zip(keys, items, strict=True):
        raw = value.encode("utf-8")
        out += [INT32.pack(key), INT32.pack(len(raw)), raw]
    return b"".join(out)


def encode_block(
    block_type: BlockType,
    header: Sequence[tuple[HeaderKey, str]] | Mapping[HeaderKey, str],
    content: bytes,
    *,
    footer: Sequence[tuple[HeaderKey, str]] | Mapping[HeaderKey, str] = (),
) -> bytes:
    """Frame ``content`` as one log block (log format version 1).

    Args:
        block_type: the block type.
        header: the header entries, written in the given order (Java's order varies by block type, and byte-identical
            re-encoding needs the original order).
        content: the block content (see :func:`encode_avro_data`, :func:`encode_delete`).
        footer: footer entries; Java always writes none.

    Returns:
        The block bytes, magic through trailing length.

    Raises:
        ValueError: a header or footer key appears twice.
    """
    body = b"".join([
        INT32.pack(LOG_FORMAT_VERSION),
        INT32.pack(BlockType(block_type)),
        _encode_map(header),
        _INT64.pack(len(content)),
        content,
        _encode_map(footer),
    ])
    block_size = len(body) + 8
    return MAGIC + _INT64.pack(block_size) + body + _INT64.pack(block_size + len(MAGIC))


class _Cursor:
    """Reads the fields of one complete block ``data[start:end]``; errors name the file offset."""

    def __init__(self, data: bytes, pos: int, end: int, block_start: int) -> None:
        self.data = data
        self.pos = pos
        self.end = end
        self.block_start = block_start

    def fail(self, problem: str) -> LogFormatError:
        return LogFormatError(f"corrupt log block at offset {self.block_start}: {problem} (at offset {self.pos})")

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(f"{what} of {n} bytes overruns the block end at offset {self.end}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int32(self, what: str) -> int:
        value: int = INT32.unpack(self.take(4, what))[0]
        return value

    def int64(self, what: str) -> int:
        value: int = _INT64.unpack(self.take(8, what))[0]
        return value

    def map(self, what: str) -> dict[HeaderKey, str]:
        count = self.int32(f"{what} entry count")
        if count < 0:
            raise self.fail(f"negative {what} entry count {count}")
        out: dict[HeaderKey, str] = {}
        for _ in range(count):
            raw_key = self.int32(f"{what} key")
            try:
                key = HeaderKey(raw_key)
            except ValueError:
                raise self.fail(f"unknown {what} key {raw_key}") from None
            raw = self.take(self.int32(f"{what} value length"), f"{what} value {key.name}")
            try:
                out[key] = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise self.fail(f"{what} value {key.name} is not UTF-8") from None
        return out


def read_block_at(data: bytes, start: int) -> tuple[LogBlock, int]:
    """Decode the block starting at ``start``; return it and the offset after it.

    Raises:
        TruncatedBlockError: the data ends inside the block.
        LogFormatError: the bytes at ``start`` are not a valid block.
    """
    remaining = len(data) - start
    if data[start:start + len(MAGIC)] != MAGIC[:min(remaining, len(MAGIC))]:
        raise LogFormatError(f"bad magic at offset {start}: expected {MAGIC!r}, found {data[start:start + 6]!r}")
    if remaining < len(MAGIC) + 8:
        raise TruncatedBlockError(f"truncated log block at offset {start}: only {remaining} bytes left", start)
    block_size: int = _INT64.unpack_from(data, start + len(MAGIC))[0]
    if block_size < _MIN_BLOCK_SIZE:
        raise LogFormatError(f"corrupt log block at offset {start}: blockSize {block_size} is too small")
    body_start = start + len(MAGIC) + 8
    end = body_start + block_size
    if end > len(data):
        raise TruncatedBlockError(
            f"truncated log block at offset {start}: blockSize {block_size} needs {end - start} bytes, "
            f"only {remaining} left", start)
    cur = _Cursor(data, body_start, end, start)
    version = cur.int32("log format version")
    if version != LOG_FORMAT_VERSION:
        raise cur.fail(f"unsupported log format version {version}")
    raw_type = cur.int32("block type")
    try:
        block_type = BlockType(raw_type)
    except ValueError:
        raise cur.fail(f"unknown block type {raw_type}") from None
    header = cur.map("header")
    content = cur.take(cur.int64("content length"), "content")
    footer = cur.map("footer")
    total = cur.int64("total block length")
    if cur.pos != end:
        raise cur.fail(f"{end - cur.pos} unexpected bytes before the block end (blockSize {block_size})")
    if total != block_size + len(MAGIC):
        raise cur.fail(f"total block length {total} does not match blockSize {block_size} (expected "
                       f"{block_size + len(MAGIC)})")
    return LogBlock(block_type, header, content, footer, offset=start), end


def iter_blocks(data: bytes) -> Iterator[LogBlock]:
    """Decode the blocks of a log file in file order.

    Every block is checked: magic, log format version 1, known block type and header keys, all lengths inside the
    block, trailing length = blockSize + 6 and nothing left over.

    Args:
        data: the whole log file.

    Yields:
        The blocks.

    Raises:
        TruncatedBlockError: the data ends inside a block (e.g. a writer killed mid-append).
        LogFormatError: any other malformed block.
    """
    data = bytes(data)
    pos = 0
    while pos < len(data):
        block, pos = read_block_at(data, pos)
        yield block


def read_blocks(data: bytes, *, tolerate_truncated_tail: bool = True) -> list[LogBlock]:
    """Decode all blocks of a log file, optionally dropping an incomplete last block.

    Args:
        data: the whole log file.
        tolerate_truncated_tail: if true, a last block cut short (the writer died while appending it) is dropped with
            a warning and the complete blocks before it are returned; corrupt blocks still raise.

    Returns:
        The complete blocks in file order.

    Raises:
        TruncatedBlockError: the data ends inside a block and ``tolerate_truncated_tail`` is false.
        LogFormatError: any other malformed block.
    """
    blocks: list[LogBlock] = []
    try:
        blocks.extend(iter_blocks(data))
    except TruncatedBlockError as exc:
        if not tolerate_truncated_tail:
            raise
        logger.warning("ignoring the incomplete last log block (%d blocks kept): %s", len(blocks), exc)
    return blocks


# ---------------------------------------------------------------------------------------------------------------------
# COMMAND
# ---------------------------------------------------------------------------------------------------------------------


def encode_rollback_command(instant: str, target_instant: str) -> bytes:
    """A complete rollback COMMAND block: blocks written by ``target_instant`` in this file slice are void.

    Header order as Java writes it: INSTANT_TIME, TARGET_INSTANT_TIME, COMMAND_BLOCK_TYPE ``"0"``; empty content.
    With 17-digit instants the block is 105 bytes.

    Args:
        instant: the rollback instant.
        target_instant: the instant whose blocks are rolled back.

    Returns:
        The block bytes.
    """
    header = [
        (HeaderKey.INSTANT_TIME, instant),
        (HeaderKey.TARGET_INSTANT_TIME, target_instant),
        (HeaderKey.COMMAND_BLOCK_TYPE, ROLLBACK_COMMAND),
    ]
    return encode_block(BlockType.COMMAND, header, b"")


# ---------------------------------------------------------------------------------------------------------------------
# log file names
# ---------------------------------------------------------------------------------------------------------------------

CDC_SUFFIX = ".cdc"

# Java's log name pattern, anchored at the end so that e.g. Hadoop ``.crc`` side files do not match
_LOG_RE = re.compile(r"^\.(.+)_(.*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(\.cdc)?)?$")


@dataclass(frozen=True, order=True)
class LogFileName:
    """A parsed log file name ``.<fileId>_<baseInstant>.log.<version>_<writeToken>``.

    ``base_instant`` is the instant of the file slice's base file, not of the write. Sort with :attr:`sort_key` to get
    Hudi's order within a slice.
    """

    file_id: str
    base_instant: str
    version: int
    write_token: str

    @property
    def name(self) -> str:
        """The file name (no write token part if ``write_token`` is empty, as in very old Hudi files)."""
        token = f"_{self.write_token}" if self.write_token else ""
        return f".{self.file_id}_{self.base_instant}.log.{self.version}{token}"

    @property
    def sort_key(self) -> tuple[str, int, str]:
        """Hudi's order of the log files of one file group: (base instant, version, write token)."""
        return (self.base_instant, self.version, self.write_token)

    @classmethod
    def parse(cls, name: str) -> LogFileName | None:
        """Parse a log file name (no directory part).

        Returns:
            The parsed name, or ``None`` if ``name`` is not a data log file (archive and CDC log files give
            ``None`` as well).
        """
        m = _LOG_RE.match(name)
        if m is None or m.group(3) != "log" or m.group(10) is not None:
            return None
        return cls(m.group(1), m.group(2), int(m.group(4)), m.group(6) or "")

    @classmethod
    def parse_cdc(cls, name: str) -> LogFileName | None:
        """Parse a CDC log file name ``.<fileId>_<instant>.log.<version>_<writeToken>.cdc`` (Hudi's
        ``HoodieCDCUtils.CDC_LOGFILE_SUFFIX``); ``base_instant`` is the commit that wrote it. None for any other name.
        """
        m = _LOG_RE.match(name)
        if m is None or m.group(3) != "log" or m.group(10) is None or not m.group(6):
            return None
        return cls(m.group(1), m.group(2), int(m.group(4)), m.group(6))

    @property
    def cdc_name(self) -> str:
        """The name of the CDC log file with these fields."""
        return f"{self.name}{CDC_SUFFIX}"
