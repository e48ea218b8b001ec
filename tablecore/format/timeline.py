"""The active timeline: instants listed from ``.hoodie/`` and their commit metadata.

The timeline is a snapshot taken at load time; writers reload it before they commit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from tablecore.format.commit_metadata import CommitMetadata
from tablecore.format.instant import Action, Instant

logger = logging.getLogger(__name__)

HOODIE_DIR = ".hoodie"


class _Reader(Protocol):
    def read_bytes(self, path: str) -> bytes: ...


@dataclass
class Timeline:
    """All instant files of ``.hoodie/``, with lazy, cached access to commit metadata."""

    files: tuple[Instant, ...]
    hoodie_dir: str
    reader: _Reader
    _meta_cache: dict[str, CommitMetadata] = field(default_factory=dict)

    @classmethod
    def from_files(cls, names: Iterable[str], hoodie_dir: str, reader: _Reader) -> Timeline:
        """Build from the bare file names found in ``.hoodie/``."""
        parsed = [i for i in (Instant.parse(n) for n in names) if i is not None]
        return cls(tuple(sorted(parsed, key=lambda i: (i.time, i.state.rank))), hoodie_dir, reader)

    # views -------------------------------------------------------------------------------------------------------
    def instants(self) -> list[Instant]:
        """One entry per (time, action) in its most advanced state, ordered by time."""
        best: dict[tuple[str, Action], Instant] = {}
        for i in self.files:
            key = (i.time, i.action)
            if key not in best or i.state.rank > best[key].state.rank:
                best[key] = i
        # a completed commit that finishes a compaction supersedes the compaction's requested/inflight files
        completed_times = {i.time for i in best.values() if i.is_completed}
        out = [i for i in best.values()
               if not (i.action in (Action.COMPACTION, Action.LOG_COMPACTION) and i.time in completed_times)]
        return sorted(out, key=lambda i: i.time)

    def completed_writes(self, *, until: str | None = None) -> list[Instant]:
        """Completed commit / deltacommit / replacecommit instants, oldest first, optionally up to ``until``."""
        return [i for i in self.instants()
                if i.is_completed and i.action.is_write and (until is None or i.time <= until)]

    def pending(self) -> list[Instant]:
        """Instants that are requested or inflight (not completed)."""
        return [i for i in self.instants() if not i.is_completed]

    def latest_completed(self) -> Instant | None:
        """The newest completed write instant."""
        writes = self.completed_writes()
        return writes[-1] if writes else None

    def last_instant_time(self) -> str | None:
        """The largest instant time on the timeline, in any state and action."""
        return self.files[-1].time if self.files else None

    def first_instant_time(self) -> str | None:
        """The oldest instant time of the active timeline."""
        return min((i.time for i in self.files), default=None)

    def is_completed_write(self, time: str) -> bool:
        """True if ``time`` is a completed write instant."""
        return any(i.time == time for i in self.completed_writes())

    # metadata ----------------------------------------------------------------------------------------------------
    def metadata(self, instant: Instant) -> CommitMetadata:
        """The commit metadata of a completed write instant."""
        cached = self._meta_cache.get(instant.time)
        if cached is None:
            data = self.reader.read_bytes(f"{self.hoodie_dir}/{instant.file_name}")
            cached = CommitMetadata.from_bytes(data)
            self._meta_cache[instant.time] = cached
        return cached

    def latest_schema(self, *, until: str | None = None) -> str | None:
        """The Avro schema recorded by the newest completed write (up to ``until``) that carries one."""
        for i in reversed(self.completed_writes(until=until)):
            schema = self.metadata(i).schema
            if schema:
                return schema
        return None

    def replaced_file_groups(self, *, until: str | None = None) -> set[tuple[str, str]]:
        """(partition, fileId) of file groups replaced by completed replacecommits up to ``until``."""
        out: set[tuple[str, str]] = set()
        for i in self.completed_writes(until=until):
            if i.action is Action.REPLACE_COMMIT:
                for p, ids in (self.metadata(i).replaced_file_ids or {}).items():
                    out.update((p, fid) for fid in ids)
        return out
