"""The LSM archived timeline of layout 2 (table version 8, ``.hoodie/timeline/history/``), as Hudi 1.x's
``LSMTimelineWriter`` lays it out (docs/hudi-v8-format.md, section 4):

- data files ``<first instant>_<last instant>_<level>.parquet``, one row per archived instant: ``instantTime``,
  ``completionTime``, ``action`` (of the completed instant), ``metadata`` (the raw bytes of its completed file),
  ``plan`` (of a clean, compaction or clustering: the requested file's bytes, or the inflight file's where that is
  not empty), ``version`` (1);
- manifests ``manifest_<N>``: JSON ``{"files": [{"fileName": ..., "fileLen": ...}]}``, the live data files;
- ``_version_``: the number of the latest manifest (readers fall back to the highest ``manifest_N``).

Only files named by the latest manifest are live. hudi-rs does not read the history at all.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

HISTORY_DIR = ".hoodie/timeline/history"
VERSION_FILE = "_version_"
_DATA_RE = re.compile(r"^(\d+)_(\d+)_(\d)\.parquet$")
_MANIFEST_RE = re.compile(r"^manifest_(\d+)$")

LSM_INSTANT_SCHEMA = pa.schema([
    pa.field("instantTime", pa.string()),
    pa.field("completionTime", pa.string()),
    pa.field("action", pa.string()),
    pa.field("metadata", pa.binary()),
    pa.field("plan", pa.binary()),
    pa.field("version", pa.int32(), nullable=False),
])


@dataclass(frozen=True)
class LsmInstant:
    """One archived instant (a row of a data file)."""

    instant: str
    completion: str
    action: str
    metadata: bytes | None
    plan: bytes | None


def data_file_name(first: str, last: str, level: int = 0) -> str:
    """``<first>_<last>_<level>.parquet``."""
    return f"{first}_{last}_{level}.parquet"


def is_data_file(name: str) -> bool:
    """True for a history data file name."""
    return _DATA_RE.match(name) is not None


def manifest_name(number: int) -> str:
    """``manifest_<number>``."""
    return f"manifest_{number}"


def latest_manifest(names: Iterable[str], version_text: bytes | None) -> int | None:
    """The number of the latest manifest: ``_version_`` if it names one that exists, else the highest listed."""
    numbers = {int(m.group(1)) for n in names if (m := _MANIFEST_RE.match(n))}
    if version_text is not None and version_text.strip().isdigit() and int(version_text.strip()) in numbers:
        return int(version_text.strip())
    return max(numbers, default=None)


def encode_manifest(files: list[tuple[str, int]]) -> bytes:
    """A manifest listing ``(file name, length)`` pairs."""
    doc = {"files": [{"fileName": name, "fileLen": size} for name, size in files]}
    return json.dumps(doc, indent=2).encode()


def decode_manifest(data: bytes) -> list[tuple[str, int]]:
    """The ``(file name, length)`` pairs of a manifest."""
    doc = json.loads(data.decode())
    return [(str(f["fileName"]), int(f["fileLen"])) for f in doc.get("files") or []]


def encode_data_file(rows: list[LsmInstant]) -> bytes:
    """A data file holding ``rows`` in order."""
    table = pa.table({
        "instantTime": [r.instant for r in rows],
        "completionTime": [r.completion for r in rows],
        "action": [r.action for r in rows],
        "metadata": [r.metadata for r in rows],
        "plan": [r.plan for r in rows],
        "version": pa.array([1] * len(rows), pa.int32()),
    }, schema=LSM_INSTANT_SCHEMA)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def decode_data_file(data: bytes) -> list[LsmInstant]:
    """The rows of a data file."""
    table = pq.read_table(io.BytesIO(data))
    return [LsmInstant(r["instantTime"], r["completionTime"], r["action"], r["metadata"], r["plan"])
            for r in table.to_pylist()]
