"""The active timeline: instants listed from ``.hoodie/`` (layout 1, table version 6) or ``.hoodie/timeline/``
(layout 2, table versions 8 and 9) and their commit metadata.

The timeline is a snapshot taken at load time; writers reload it before they commit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Protocol

from tablecore.exceptions import TableCorruptError
from tablecore.format.commit_metadata import CommitMetadata
from tablecore.format.instant import Action, Instant, State, next_instant_time
from tablecore.format.instant_avro import decode_instant_avro
from tablecore.io import FileIO

logger = logging.getLogger(__name__)

HOODIE_DIR = ".hoodie"
TIMELINE_DIR_V2 = f"{HOODIE_DIR}/timeline"
"""Where layout 2 (Hudi 1.x) keeps the active timeline (``hoodie.timeline.path``, default ``timeline``)."""
AUX_DIR = f"{HOODIE_DIR}/.aux/lakegate"
"""lakegate's own records inside a table (commit lock, heartbeats, staged commits, the gate's audit folder); Hudi
readers do not look there."""


def timeline_dir(table_version: int) -> str:
    """The folder of the active timeline's instant files, relative to the table base."""
    return HOODIE_DIR if table_version < 8 else TIMELINE_DIR_V2


class _Reader(Protocol):
    def read_bytes(self, path: str) -> bytes: ...


class InstantsOrEarlier(frozenset[str]):
    """A frozen set of instant times that also holds every instant time older than ``before``.

    What makes the log blocks of an instant count: it is a completed write, or it is older than the first instant of
    the active timeline, i.e. it was archived (Java's ``containsOrBeforeTimelineStarts``; hudi-rs merges such blocks
    too). Pickles with its bound, so executors see the same set.
    """

    before: str

    def __new__(cls, times: Iterable[str] = (), before: str | None = None) -> InstantsOrEarlier:
        self = super().__new__(cls, times)
        self.before = before or ""
        return self

    def __contains__(self, item: object) -> bool:
        return super().__contains__(item) or (isinstance(item, str) and item < self.before)

    def __reduce__(self) -> tuple[type[InstantsOrEarlier], tuple[tuple[str, ...], str]]:
        return (type(self), (tuple(self), self.before))

    def __repr__(self) -> str:
        return f"InstantsOrEarlier({sorted(self)!r}, before={self.before!r})"


@dataclass
class Timeline:
    """All instant files of ``.hoodie/``, with lazy, cached access to commit metadata."""

    files: tuple[Instant, ...]
    hoodie_dir: str  # the folder of the instant files
    reader: _Reader
    _meta_cache: dict[str, CommitMetadata] = field(default_factory=dict)
    layout: int = 1  # 2: Hudi 1.x, completed instants carry completion times

    @classmethod
    def from_files(cls, names: Iterable[str], hoodie_dir: str, reader: _Reader, *, layout: int = 1) -> Timeline:
        """Build from the bare file names found in the timeline folder."""
        parsed = [i for i in (Instant.parse(n) for n in names) if i is not None]
        return cls(tuple(sorted(parsed, key=lambda i: (i.time, i.state.rank))), hoodie_dir, reader, layout=layout)

    @classmethod
    def listed(cls, io: FileIO, table_version: int) -> Timeline:
        """List the timeline folder of a table of ``table_version`` and build the timeline."""
        folder = io.join(timeline_dir(table_version))
        return cls.from_files([f.name for f in io.list(folder)], folder, io, layout=1 if table_version < 8 else 2)

    def next_completion_time(self) -> str:
        """A completion time after every instant and completion time on this timeline (what a publish now gets)."""
        return next_instant_time(max([t for t in (self.last_instant_time(), self.last_completion_time()) if t],
                                     default=None))

    def completed_by(self, when: str) -> Timeline:
        """This timeline as it stood at completion time ``when`` (layout 2): instants completed later are inflight
        in it, so their files are not visible. On layout 1 the timeline is returned as is."""
        if self.layout < 2:
            return self
        files = tuple(i if not i.is_completed or i.completed_at <= when else i.with_state(State.INFLIGHT)
                      for i in self.files)
        return replace(self, files=files)

    def completion_of(self, time: str) -> str | None:
        """The completion time of the completed instant ``time`` (layout 1: ``time`` itself), None if it is not
        completed on the active timeline."""
        return self._completions.get(time)

    @cached_property
    def _completions(self) -> dict[str, str]:
        return {i.time: i.completed_at for i in self.files if i.is_completed}

    def with_completed(self, instant: Instant, metadata: CommitMetadata, completion: str | None = None) -> Timeline:
        """This timeline as it will be once ``instant`` completes with ``metadata`` (staged-commit views)."""
        done = Instant(instant.time, instant.action, State.COMPLETED, completion)
        files = tuple(sorted((*self.files, done), key=lambda i: (i.time, i.state.rank)))
        return Timeline(files, self.hoodie_dir, self.reader, {**self._meta_cache, instant.time: metadata},
                        self.layout)

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
               if not (i.action in (Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING)
                       and i.time in completed_times)]
        return sorted(out, key=lambda i: i.time)

    def completed_writes(self, *, until: str | None = None) -> list[Instant]:
        """Completed commit / deltacommit / replacecommit instants, oldest first, optionally up to ``until``."""
        return [i for i in self.instants()
                if i.is_completed and i.action.is_write and (until is None or i.time <= until)]

    def completed_writes_by_completion(self) -> list[Instant]:
        """Completed writes in the order they became visible (completion time; layout 1: instant time)."""
        return sorted(self.completed_writes(), key=lambda i: (i.completed_at, i.time))

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

    def last_completion_time(self) -> str | None:
        """The largest completion time on the timeline (layout 2), None if none is recorded."""
        return max((i.completion for i in self.files if i.completion), default=None)

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
            path = f"{self.hoodie_dir}/{instant.file_name}"
            data = self.reader.read_bytes(path)
            try:
                cached = CommitMetadata.from_bytes(data)
            except (ValueError, TypeError, AttributeError, KeyError, EOFError, IndexError) as exc:  # not metadata
                what = "is empty" if not data.strip() else f"does not parse as commit metadata ({exc})"
                raise TableCorruptError(
                    f"the completed {instant.action.value} file {what}; roll the instant back with `lakegate table "
                    f"repair <table> --rollback-instant {instant.time}` (or restore a savepoint)",
                    path=path, instant=instant.time) from None
            if instant.is_completed:  # a completed instant's file never changes; a pending one's may
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

    # table services ----------------------------------------------------------------------------------------------
    def of_action(self, action: Action, *, completed: bool = True) -> list[Instant]:
        """Instants of ``action`` (completed ones, or pending ones with ``completed=False``), oldest first."""
        return [i for i in self.instants() if i.action is action and i.is_completed == completed]

    def savepoint_times(self) -> list[str]:
        """Times of the completed savepoints, oldest first."""
        return [i.time for i in self.of_action(Action.SAVEPOINT)]

    def earliest_retained(self) -> str | None:
        """The earliest write instant whose snapshot cleaning kept complete, or None if nothing was cleaned.

        It is the ``earliestCommitToRetain`` of the newest completed clean, or the ``earliestInstantToRetain`` of a
        pending clean's plan if that is later (its files may already be gone). Time travel to an older instant, or
        an incremental read ending before it, may need file slices that were deleted (savepointed instants stay
        readable: cleaning keeps their files).
        """
        found: list[str] = []
        cleans = self.of_action(Action.CLEAN)
        if cleans:
            found.append(self._clean_field(cleans[-1], "clean_metadata", "earliestCommitToRetain"))
        for pending in self.of_action(Action.CLEAN, completed=False):
            found.append(self._clean_field(pending.with_state(State.REQUESTED), "cleaner_plan",
                                           "earliestInstantToRetain"))
        earliest = max((f for f in found if f), default=None)
        latest = self.latest_completed()
        if earliest is not None and latest is not None and earliest > latest.time:
            return latest.time  # the latest snapshot is always complete (e.g. after a restore past the clean)
        return earliest

    def _clean_field(self, instant: Instant, kind: str, field_name: str) -> str:
        path = f"{self.hoodie_dir}/{instant.file_name}"
        try:
            record = decode_instant_avro(self.reader.read_bytes(path), kind)
        except OSError as e:  # gone since the listing (a pending clean completed meanwhile)
            logger.warning("cannot read %s of %s: %s", kind, instant.file_name, e)
            return ""
        except (ValueError, EOFError, IndexError, KeyError, TypeError) as e:  # fastavro's ways of saying "not Avro"
            # without it, reads as of cleaned instants could return partial data instead of CleanedRangeError
            raise TableCorruptError(f"the {kind} of clean {instant.time} does not decode ({e}): which instants "
                                    "cleaning kept readable is unknown", path=path, instant=instant.time) from None
        value = record.get(field_name)
        if isinstance(value, dict):  # the plan's HoodieActionInstant
            value = value.get("timestamp")
        return str(value or "")
