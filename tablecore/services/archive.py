"""Timeline archival: move old instants out of the active timeline into ``.hoodie/archived/`` (version 6) or the
LSM history ``.hoodie/timeline/history/`` (version 8, :mod:`tablecore.format.lsm_timeline`) (Hudi's archiver,
``hoodie.keep.min.commits`` / ``hoodie.keep.max.commits``).

When the active timeline holds more than ``keep_max`` completed writes, the oldest instants are archived so that
``keep_min`` completed writes remain: every timeline file (requested, inflight, completed) of every instant older
than the cut, writes and services alike (cleans, rollbacks, restores, compaction plans). The cut never passes:

- the newest completed write before the earliest pending instant (a writer, staged commit or service still needs
  the instants after it, and readers that only load completed instants must not take the pending instant's files
  for archived ones);
- the oldest savepoint (restore rolls back to it and time travel reads it);
- a replacecommit whose replaced file groups still have files (archived, it would no longer hide them: clean them
  first);
- version 8: a delta commit whose log files are in a latest file slice (hudi-rs reads a log file only while the
  delta commit that named it is on the active timeline: compact first).

Data stays visible: readers (ours, Java, hudi-rs) treat base files and log blocks of instants older than the first
active instant as committed. Archived instants are no longer time-travel targets, and incremental reads starting
before the newest archived instant raise :class:`~tablecore.exceptions.CleanedRangeError` (the file groups those
instants changed are not known any more).

The archive is written first (version 6: one JSON-lines file, :mod:`tablecore.format.archived_timeline`, *not*
Java's Avro log; version 8: a history data file, then a new manifest, then ``_version_``, as Hudi 1.x writes them),
then the active files are deleted, oldest instant first and the completed file of each instant last, so a
crash leaves every instant either complete on the active timeline or gone from it, never pending.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tablecore.format.archived_timeline import (
    ARCHIVED_DIR,
    ArchivedFile,
    archive_file_name,
    decode_archive,
    encode_archive,
    parse_archive_file_name,
)
from tablecore.format.file_view import latest_file_slices, list_table_files
from tablecore.format.instant import Action, Instant, State
from tablecore.format.lsm_timeline import (
    HISTORY_DIR,
    VERSION_FILE,
    LsmInstant,
    data_file_name,
    decode_manifest,
    encode_data_file,
    encode_manifest,
    latest_manifest,
    manifest_name,
)
from tablecore.format.timeline import Timeline

if TYPE_CHECKING:
    from tablecore.context import TableContext
    from tablecore.io import FileIO

logger = logging.getLogger(__name__)


def archive_cut(io: FileIO, timeline: Timeline, keep_min: int, keep_max: int) -> str | None:
    """The instant time before which everything is archived, or None if the timeline is short enough."""
    writes = timeline.completed_writes()
    if len(writes) <= keep_max:
        return None
    cut = writes[len(writes) - keep_min].time
    why = f"keep_min={keep_min}"
    pending = timeline.pending()
    if pending and pending[0].time < cut:
        # keep a completed write older than the pending instant: readers that only know completed instants (hudi-rs,
        # Java) take files older than their first one for archived, and would show the pending instant's files
        before = [w.time for w in writes if w.time < pending[0].time]
        cut, why = (before[-1] if before else pending[0].time), f"pending {pending[0].action} {pending[0].time}"
    if timeline.layout >= 2:  # a log file counts only while its delta commit is on the active timeline (hudi-rs)
        slices = latest_file_slices(list_table_files(io), timeline)
        needed = min((lg.base_instant for s in slices for lg in s.logs), default=None)
        if needed is not None and needed < cut:
            cut, why = needed, f"delta commit {needed} whose log files are in a latest file slice (compact first)"
    savepoints = [i.time for i in timeline.instants() if i.action is Action.SAVEPOINT]
    if savepoints and min(savepoints) < cut:
        cut, why = min(savepoints), f"savepoint {min(savepoints)}"
    for r in writes:
        if r.time >= cut:
            break
        if r.action is not Action.REPLACE_COMMIT:
            continue
        replaced = {(p, fid) for p, ids in (timeline.metadata(r).replaced_file_ids or {}).items() for fid in ids}
        if not replaced:
            continue
        listed = list_table_files(io, {p for p, _ in replaced})
        present = {(f.partition, f.file_id) for f in listed.bases} | {(f.partition, f.file_id) for f in listed.logs}
        if present & replaced:
            cut, why = r.time, f"replacecommit {r.time} whose replaced file groups are not cleaned yet"
            break
    logger.debug("archive cut at %s (%s)", cut, why)
    return cut


def check_keep(keep_min: int, keep_max: int) -> None:
    """Validate the archival bounds.

    Raises:
        ValueError: ``keep_min`` < 1 or ``keep_max`` <= ``keep_min``.
    """
    if keep_min < 1 or keep_max <= keep_min:
        raise ValueError(f"need 1 <= keep_min < keep_max, got keep_min={keep_min}, keep_max={keep_max}")


def archive(ctx: TableContext, *, keep_min: int = 20, keep_max: int = 30) -> int:
    """Archive the oldest instants; returns how many instants left the active timeline.

    Raises:
        ValueError: ``keep_min`` < 1 or ``keep_max`` <= ``keep_min``.
    """
    check_keep(keep_min, keep_max)
    protocol, io = ctx.meta, ctx.io
    timeline = protocol.load_timeline()
    cut = archive_cut(io, timeline, keep_min, keep_max)
    moving = [f for f in timeline.files if cut is not None and f.time < cut]
    if not moving:
        logger.info("archive: nothing to archive (%d completed writes)", len(timeline.completed_writes()))
        return 0
    ordered = sorted(moving, key=lambda i: (i.time, i.state.rank))
    if timeline.layout >= 2:
        name = _write_history(io, timeline, ordered)
    else:
        files = [ArchivedFile(i, io.read_bytes(_path(io, timeline, i))) for i in ordered]
        name = f"{ARCHIVED_DIR}/{archive_file_name(ordered[0].time, ordered[-1].time)}"
        io.write_bytes(io.join(name), encode_archive(files))
    for i in ordered:  # within an instant: requested, inflight, then completed (never leave it pending)
        io.delete(_path(io, timeline, i))
    count = len({i.time for i in ordered})
    logger.info("archived %d instants (%s .. %s) into %s", count, ordered[0].time, ordered[-1].time, name)
    return count


def _path(io: FileIO, timeline: Timeline, instant: Instant) -> str:
    return f"{timeline.hoodie_dir}/{instant.file_name}"


def _write_history(io: FileIO, timeline: Timeline, ordered: list[Instant]) -> str:
    """Layout 2: the instants into the LSM history as Hudi's LSMTimelineWriter does: the data file, then a new
    manifest naming it, then ``_version_``; a rerun after a crash finds the file listed (done) or not (rewritten)."""
    rows: list[LsmInstant] = []
    for t in sorted({i.time for i in ordered}):
        states = {i.state: i for i in ordered if i.time == t}
        done = states.get(State.COMPLETED)
        if done is None:
            continue
        metadata = io.read_bytes(_path(io, timeline, done)) or None
        plan = None
        for i in ordered:  # the plan: of a clean, a compaction, a clustering or replacecommit (requested, then a
            if i.time != t or i.state is State.COMPLETED:  # non-empty inflight file overrides it)
                continue
            planned = (i.action is Action.CLEAN and i.state is State.REQUESTED) or \
                (i.action in (Action.COMPACTION, Action.LOG_COMPACTION) and i.state is State.REQUESTED) or \
                i.action in (Action.REPLACE_COMMIT, Action.CLUSTERING)
            if planned:
                plan = io.read_bytes(_path(io, timeline, i)) or plan
        rows.append(LsmInstant(t, done.completed_at, done.action.value, metadata, plan))
    history = io.join(HISTORY_DIR)
    names = [f.name for f in io.list(history)]
    version_path = io.join(HISTORY_DIR, VERSION_FILE)
    latest = latest_manifest(names, io.read_bytes(version_path) if VERSION_FILE in names else None)
    live = decode_manifest(io.read_bytes(io.join(HISTORY_DIR, manifest_name(latest)))) if latest else []
    name = data_file_name(ordered[0].time, ordered[-1].time)
    if name not in {n for n, _ in live}:
        data = encode_data_file(rows)
        io.write_bytes(io.join(HISTORY_DIR, name), data)
        number = (latest or 0) + 1
        io.write_bytes(io.join(HISTORY_DIR, manifest_name(number)), encode_manifest([*live, (name, len(data))]))
        io.delete(version_path)
        io.write_bytes(version_path, str(number).encode())
    return f"{HISTORY_DIR}/{name}"


def archived_files(io: FileIO) -> list[ArchivedFile]:
    """Every timeline file lakegate archived, oldest first (Java's archive files are not read)."""
    out: list[ArchivedFile] = []
    for f in sorted(io.list(io.join(ARCHIVED_DIR)), key=lambda f: f.name):
        if parse_archive_file_name(f.name) is not None:
            out.extend(decode_archive(io.read_bytes(f.path)))
    return sorted(out, key=lambda a: (a.instant.time, a.instant.state.rank))
