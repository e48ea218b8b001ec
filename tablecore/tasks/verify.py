"""Executor side of a deep table check (:mod:`tablecore.services.verify`): read every row of a file slice, and say
whether it decodes.

An engine runs tasks that return write-stat rows (:meth:`tablecore.engine.Engine.run_tasks`); the outcome of one
slice travels in one such row — ``file_id`` and ``partition_path`` name the slice, ``num_writes`` holds the rows
read, and for a slice that does not read, ``path``, ``prev_commit`` and ``base_file`` hold the damaged file, the
instant that wrote it and the problem. :func:`slice_outcomes` turns the rows back into :class:`SliceOutcome`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tablecore.exceptions import TableCorruptError
from tablecore.format.commit_metadata import WriteStat
from tablecore.format.file_naming import BaseFileName
from tablecore.format.log_format import AVRO_DECODE_ERRORS, LogFileName
from tablecore.io import FileIO
from tablecore.read_planning import ReadPlan
from tablecore.tasks.read import read_slice
from tablecore.tasks.write import STAT_SCHEMA

__all__ = ["SliceOutcome", "read_every_row", "slice_outcomes"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SliceOutcome:
    """What reading one file slice found: its rows, or the problem (``problem`` None: every row decoded)."""

    partition: str
    file_id: str
    rows: int
    path: str | None = None
    instant: str | None = None
    problem: str | None = None


def _instant_of(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1]
    base = BaseFileName.parse(name)
    if base is not None:
        return base.instant
    log = LogFileName.parse(name)
    return log.base_instant if log is not None else None


def read_every_row(io: FileIO, plan: ReadPlan, desc: dict[str, Any]) -> pa.Table:
    """Read every row of the slice ``desc`` (a :func:`tablecore.tasks.mor.slice_descriptors` row) as a read of
    ``plan`` would; one write-stat row with the outcome (see the module docstring)."""
    base, logs = desc["base_path"], list(desc["log_paths"] or ())
    row: dict[str, Any] = {f.name: 0 if pa.types.is_integer(f.type) else None for f in STAT_SCHEMA}
    row.update(file_id=desc["file_id"], partition_path=desc["partition"], log_version=None, crc32=None)
    try:
        table = read_slice(io, plan, base, logs)
        row["num_writes"] = table.num_rows if table is not None else 0
    except TableCorruptError as exc:
        row.update(path=exc.path or base or (logs[0] if logs else None), prev_commit=exc.instant, base_file=exc.problem)
    except (pa.ArrowException, OSError, *AVRO_DECODE_ERRORS) as exc:  # what the readers do not name themselves
        path = base or (logs[0] if logs else "")
        row.update(path=path, prev_commit=_instant_of(path), base_file=f"{type(exc).__name__}: {exc}")
        logger.warning("slice %s of %s does not read: %s", desc["file_id"], desc["partition"], exc)
    return pa.Table.from_pylist([row], schema=STAT_SCHEMA)


def slice_outcomes(stats: Iterable[WriteStat]) -> list[SliceOutcome]:
    """The outcomes carried by the rows :func:`read_every_row` returned (after the engine's ``write_stats``)."""
    return [SliceOutcome(s.partition_path, s.file_id, s.num_writes, s.path or None,
                         s.prev_commit if s.prev_commit not in (None, "", "null") else None, s.base_file)
            for s in stats]
