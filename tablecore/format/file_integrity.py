"""Checks of a listing against the write stats of completed instants, on the driver, before any data is read.

The commit metadata of every completed write names the files it wrote and their sizes; a listing gives what is in
storage. Where they disagree the table is damaged, and a read would otherwise fall back silently to older data (a
missing base file makes the previous version of its file group visible again; a missing log file drops its
updates):

- the newest base file a completed write made for a live file group is missing from the listing;
- a base file's size differs from the size its instant recorded (cut short, or overwritten);
- a log file a completed instant wrote into the slice being read is missing, or shorter than what it wrote.

Each is a :class:`~tablecore.exceptions.TableCorruptError` naming the file and the instant. Only files named by
instants on the active timeline are checked (archived instants' stats are gone). Pure: listings and metadata in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from tablecore.exceptions import TableCorruptError
from tablecore.format.commit_metadata import CommitMetadata, WriteStat
from tablecore.format.file_naming import BaseFileName
from tablecore.format.file_view import BaseFile, FileSlice, LogFile
from tablecore.format.log_format import LogFileName
from tablecore.format.log_integrity import LogExtent, check_log_size

__all__ = ["WrittenFiles", "check_bases", "check_slices", "slice_extents"]


@dataclass(frozen=True)
class WrittenFiles:
    """What completed writes recorded: the newest base file of each file group and the extents of log files."""

    newest_base: dict[tuple[str, str], tuple[str, WriteStat]]  # (partition, fileId) -> (instant, stat)
    log_stats: dict[tuple[str, str], list[tuple[str, WriteStat]]]  # (partition, fileId) -> log writes, oldest first
    extents: dict[str, tuple[LogExtent, ...]]  # log file name -> extents

    @classmethod
    def of(cls, writes: Sequence[tuple[str, CommitMetadata]]) -> WrittenFiles:
        """From (instant, metadata) of completed writes, oldest first."""
        newest: dict[tuple[str, str], tuple[str, WriteStat]] = {}
        logs: dict[tuple[str, str], list[tuple[str, WriteStat]]] = {}
        extents: dict[str, list[LogExtent]] = {}
        for instant, meta in writes:
            for stat in meta.write_stats:
                name = stat.file_name
                if not name or not stat.file_id:
                    continue
                key = (stat.partition_path, stat.file_id)
                if BaseFileName.parse(name) is not None:
                    newest[key] = (instant, stat)
                elif LogFileName.parse(name) is not None:
                    logs.setdefault(key, []).append((instant, stat))
                    if (extent := LogExtent.of_stat(instant, stat)) is not None:
                        extents.setdefault(name, []).append(extent)
        return cls(newest, logs, {n: tuple(sorted(v, key=lambda e: e.offset)) for n, v in extents.items()})


def _check_base_size(f: BaseFile, instant: str, stat: WriteStat) -> None:
    expected = stat.file_size_in_bytes or stat.total_write_bytes
    if expected > 0 and f.size != expected:
        raise TableCorruptError(
            f"base file is {f.size} bytes, but instant {instant} wrote {expected} bytes (cut short or overwritten)",
            path=f.path, instant=instant)


def check_bases(bases: Iterable[BaseFile], written: WrittenFiles, in_scope: Callable[[tuple[str, str]], bool],
                replaced: set[tuple[str, str]], *, join: str = "") -> None:
    """Raise if the chosen latest base files are not the ones completed writes made last.

    Args:
        bases: the base file chosen per file group (the latest visible one in the listing).
        written: what completed writes (up to the read's instant) recorded.
        in_scope: whether a (partition, fileId) is covered by the listing.
        replaced: file groups replaced by completed replacecommits (not live).
        join: the table base, to name missing files by their full path.
    """
    chosen = {(f.partition, f.file_id): f for f in bases}
    for key, (instant, stat) in written.newest_base.items():
        if key in replaced or not in_scope(key):
            continue
        f = chosen.get(key)
        name = stat.file_name
        if f is None or f.name != name:
            path = f"{join.rstrip('/')}/{stat.path}" if join else str(stat.path)
            raise TableCorruptError(
                f"base file {name} of file group {key[1]} (partition {key[0]!r}) is missing: the read would see "
                f"{'no rows' if f is None else 'the older version ' + f.name} of the group instead",
                path=path, instant=instant)
        _check_base_size(f, instant, stat)


def check_slices(slices: Iterable[FileSlice], written: WrittenFiles, *, join: str = "") -> None:
    """Raise if a slice's base file or a log file its base's writes are known to have received is missing or cut
    short (``written``: what completed writes up to the read's instant recorded)."""
    for s in slices:
        hit = written.newest_base.get(s.key)
        if s.base is not None and hit is not None and hit[1].file_name == s.base.name:
            _check_base_size(s.base, *hit)
        listed: dict[str, LogFile] = {lg.name: lg for lg in s.logs}
        for instant, stat in written.log_stats.get(s.key, ()):
            name = stat.file_name
            parsed = LogFileName.parse(name) if name else None
            if parsed is None or parsed.base_instant != s.base_instant:
                continue  # a log of an older slice (compacted since)
            lg = listed.get(parsed.name)
            if lg is None:
                path = f"{join.rstrip('/')}/{stat.path}" if join else str(stat.path)
                raise TableCorruptError(f"log file {name} is missing: the updates instant {instant} wrote into "
                                        f"file group {s.file_id} would be lost", path=path, instant=instant)
            check_log_size(lg.path, lg.size, written.extents.get(lg.name, ()))


def slice_extents(slices: Iterable[FileSlice], written: WrittenFiles) -> dict[str, tuple[LogExtent, ...]]:
    """The extents of the log files of ``slices`` (what a slice job carries to its tasks)."""
    return {lg.name: ext for s in slices for lg in s.logs if (ext := written.extents.get(lg.name))}
