"""File groups and their latest base files as of an instant (the 'file system view', COW part).

A base file is visible as of ``Q`` when its instant is a completed write at or before ``Q``, or when its instant is
older than the first instant of the active timeline (assumed archived), and its file group was not replaced by a
completed replacecommit at or before ``Q``. The latest visible base file of each file group is the group's slice.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from tablecore.format.file_naming import BaseFileName
from tablecore.format.timeline import Timeline
from tablecore.io import FileIO


@dataclass(frozen=True)
class BaseFile:
    """A base file of a file group."""

    partition: str
    file_id: str
    instant: str
    name: str
    path: str
    size: int

    @property
    def relative_path(self) -> str:
        """The path relative to the table base, as write stats record it."""
        return f"{self.partition}/{self.name}" if self.partition else self.name


def base_files_from_listing(base: str, paths: Iterable[tuple[str, int]]) -> list[BaseFile]:
    """Parse (full path, size) pairs into base files, keeping only base-file names outside ``.hoodie``."""
    out: list[BaseFile] = []
    prefix = base.rstrip("/") + "/"
    for path, size in paths:
        rel = path[len(prefix):] if path.startswith(prefix) else path
        if rel.startswith(".hoodie/") or "/.hoodie/" in rel:
            continue
        parsed = BaseFileName.parse(posixpath.basename(rel))
        if parsed is None:
            continue
        partition = posixpath.dirname(rel)
        out.append(BaseFile(partition, parsed.file_id, parsed.instant, parsed.name, path, size))
    return out


def list_base_files(io: FileIO, partitions: Iterable[str] | None = None) -> list[BaseFile]:
    """The base files of the given partitions (one non-recursive listing each), or of the whole table."""
    if partitions is None:
        listing = [(f.path, f.size) for f in io.list_files(io.base, recursive=True)]
    else:
        listing = [(f.path, f.size) for p in partitions for f in io.list_files(io.join(p))]
    return base_files_from_listing(io.base, listing)


def latest_base_files(files: Iterable[BaseFile], timeline: Timeline, *, as_of: str | None = None) -> list[BaseFile]:
    """The latest visible base file of every live file group as of ``as_of`` (default: the latest completed write)."""
    completed = {i.time for i in timeline.completed_writes(until=as_of)}
    first = timeline.first_instant_time()
    on_timeline = {i.time for i in timeline.files}
    replaced = timeline.replaced_file_groups(until=as_of)
    best: dict[tuple[str, str], BaseFile] = {}
    for f in files:
        if as_of is not None and f.instant > as_of:
            continue
        visible = f.instant in completed or (
            first is not None and f.instant < first and f.instant not in on_timeline
        )
        if not visible:
            continue
        key = (f.partition, f.file_id)
        if key in replaced:
            continue
        cur = best.get(key)
        if cur is None or f.instant > cur.instant:
            best[key] = f
    return sorted(best.values(), key=lambda f: (f.partition, f.file_id))
