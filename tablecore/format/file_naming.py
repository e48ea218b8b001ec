"""File names of base files, file ids and write tokens (format reference §4)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

_BASE_RE = re.compile(r"^([^_/]+)_(\d+-\d+-\d+)_(\d{14}|\d{17})\.parquet$")
PARTITION_METAFILE = ".hoodie_partition_metadata"


@dataclass(frozen=True)
class BaseFileName:
    """A parsed base file name ``<fileId>_<writeToken>_<instant>.parquet``."""

    file_id: str
    write_token: str
    instant: str

    @property
    def name(self) -> str:
        """The file name."""
        return f"{self.file_id}_{self.write_token}_{self.instant}.parquet"

    @classmethod
    def parse(cls, name: str) -> BaseFileName | None:
        """Parse a base file name; None if it is not one."""
        m = _BASE_RE.match(name)
        return cls(m.group(1), m.group(2), m.group(3)) if m else None


def new_file_id(bucket: int | None = None) -> str:
    """A new file id ``<uuid4>-0``; with ``bucket``, the first 8 characters are the zero-padded bucket number, as
    Hudi's bucket index encodes it."""
    prefix = str(uuid.uuid4())
    if bucket is not None:
        prefix = f"{bucket:08d}" + prefix[8:]
    return f"{prefix}-0"


def bucket_of_file_id(file_id: str) -> int | None:
    """The bucket number a bucket-index file id encodes, or None."""
    head = file_id[:8]
    return int(head) if head.isdigit() else None


def write_token(task_partition: int, stage: int, attempt: int) -> str:
    """``<taskPartitionId>-<stageId>-<taskAttemptId>``."""
    return f"{task_partition}-{stage}-{attempt}"


def partition_metadata_content(commit_time: str, depth: int, saved_on: str) -> bytes:
    """Content of ``.hoodie_partition_metadata`` (Java Properties, 4 lines)."""
    return f"#partition metadata\n#{saved_on}\ncommitTime={commit_time}\npartitionDepth={depth}\n".encode()
