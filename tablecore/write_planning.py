"""What every writer plans alike, whatever runs it (Spark's ``spark/writer.py``, the Arrow ``arrow_writer.py``): the
checks of a batch's columns and keys, the table schema after it, the record-size estimate new file groups are sized
by, what a plan holds (:class:`PlannedFiles`) and the job the write tasks run."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tablecore.config import TableConfig
from tablecore.engine import Operation, PlannedGroup
from tablecore.exceptions import InvalidInputError
from tablecore.format.avro_schema import arrow_to_avro, canonical_json, with_meta_fields
from tablecore.format.file_integrity import WrittenFiles
from tablecore.format.file_naming import new_file_id
from tablecore.format.file_view import BaseFile, FileSlice
from tablecore.format.instant import Action
from tablecore.format.schema_evolution import evolve
from tablecore.format.table_schema import table_arrow_schema
from tablecore.format.timeline import InstantsOrEarlier, Timeline
from tablecore.io import FileIO
from tablecore.read_planning import table_schema
from tablecore.tasks import mor
from tablecore.tasks import write as ex

DEFAULT_RECORD_SIZE = 1024  # bytes per record when no commit tells better (Hudi's estimate default)


@dataclass
class PlannedFiles:
    """What an engine's plan of one batch holds, whatever the engine (the data of
    :class:`tablecore.engine.PlannedWrite`; each engine's plan adds its rows and writes them)."""

    operation: Operation
    action: Action
    table_avro: dict[str, Any]
    target: pa.Schema
    affected: frozenset[str]
    plans: dict[str, ex.GroupPlan]
    replaced: dict[str, tuple[str, ...]] | None
    input_rows: int
    base_instant: str | None
    pending_at_start: tuple[str, ...]

    @property
    def groups(self) -> list[PlannedGroup]:
        """The planned file groups."""
        return [PlannedGroup(g.partition, fid, g.prev_commit, g.log_version) for fid, g in self.plans.items()]


def timeline_position(timeline: Timeline) -> tuple[str | None, tuple[str, ...]]:
    """Where a plan starts: the latest completed instant (conflict checks start after it) and the pending ones."""
    latest = timeline.latest_completed()
    return (latest.time if latest else None), tuple(i.time for i in timeline.pending())


def check_columns(columns: Collection[str], config: TableConfig, operation: Operation) -> None:
    """Refuse a batch without a record key, partition or (except for deletes) ordering column.

    Raises:
        InvalidInputError: naming the missing column and the batch's columns.
    """
    cols = set(columns)
    need: list[tuple[str, str]] = [(f, "record key") for f in config.record_key]
    need += [(f, "partition") for f in config.partition_fields]
    if operation is not Operation.DELETE and config.ordering_field:
        need.append((config.ordering_field, "ordering"))
    for name, role in need:
        if name not in cols:
            raise InvalidInputError(
                f"the input has no {role} column {name!r} (columns: {', '.join(sorted(cols)) or 'none'})")


def refuse_invalid_keys(bad: int, config: TableConfig) -> None:
    """Refuse a batch with ``bad`` rows whose record key is null or empty (before anything is written).

    Raises:
        InvalidInputError: naming how many rows and the key fields.
    """
    if bad:
        what = " and ".join(config.record_key)
        raise InvalidInputError(f"{bad} input rows have a null or empty record key ({what}); nothing was written")


def has_local_timestamp(t: pa.DataType) -> bool:
    """True if ``t`` is, or nests, a timestamp without time zone (Spark's timestamp_ntz)."""
    if pa.types.is_timestamp(t):
        return t.tz is None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return has_local_timestamp(t.value_type)
    if pa.types.is_map(t):
        return has_local_timestamp(t.key_type) or has_local_timestamp(t.item_type)
    if pa.types.is_struct(t):
        return any(has_local_timestamp(t.field(i).type) for i in range(t.num_fields))
    return False


def target_schema(incoming_arrow: pa.Schema, current_s: str | None,
                  table_name: str) -> tuple[dict[str, Any], pa.Schema]:
    """The table's Avro schema after a batch of ``incoming_arrow`` columns (``current_s``: the table's, if any) and
    its Arrow form without meta fields.

    Raises:
        InvalidInputError: a timestamp without time zone, or a column type the table format cannot hold.
        SchemaEvolutionError: the batch's schema is not a legal evolution of the table's.
    """
    for field in incoming_arrow:
        if has_local_timestamp(field.type):
            raise InvalidInputError(
                f"column {field.name!r} holds timestamp_ntz values, which Hudi v6 readers cannot read "
                "(hudi-rs 0.5 has no local-timestamp-micros); cast it to timestamp (UTC) before writing")
    try:
        incoming = arrow_to_avro(incoming_arrow, table_name)
    except ValueError as e:
        raise InvalidInputError(str(e)) from e
    evolved = evolve(json.loads(current_s) if current_s else None, incoming)
    return evolved, table_arrow_schema(evolved, with_meta=False)


def record_size_estimate(timeline: Timeline) -> int:
    """Bytes per record of the latest completed writes that wrote any (Hudi's estimate), else the default."""
    for i in reversed(timeline.completed_writes()[-5:]):
        stats = timeline.metadata(i).write_stats
        writes = sum(s.num_writes for s in stats)
        size = sum(s.total_write_bytes for s in stats)
        if writes > 0 and size > 0:
            return max(1, size // writes)
    return DEFAULT_RECORD_SIZE


def write_job(io: FileIO, config: TableConfig, instant: str, table_avro: dict[str, Any], target: pa.Schema,
              groups: dict[str, ex.GroupPlan], *, sort_inserts: bool) -> ex.WriteJob:
    """What the write tasks of ``instant`` need (:class:`tablecore.tasks.write.WriteJob`), from the table's settings."""
    return ex.WriteJob(
        io=io, base=io.base, instant=instant, target_schema=target,
        avro_schema_with_meta=canonical_json(with_meta_fields(table_avro)), groups=groups,
        event_time=config.merge_mode == "EVENT_TIME_ORDERING", ordering_field=config.ordering_field,
        sort_inserts=sort_inserts, logs_named_by_instant=config.completion_times,
        cdc_mode=config.cdc_mode if config.cdc_enabled else None, bloom_filters=config.writes_bloom_filters,
        ordering_avro_type=_avro_type_of(table_avro, config.ordering_field),
        # a single-field record key is unique per file: dictionary pages would only be built and discarded
        unique_columns=("_hoodie_commit_seqno", "_hoodie_record_key",
                        *(config.record_key if not config.complex_keys else ())),
    )


def _avro_type_of(avro: dict[str, Any], field: str | None) -> str | None:
    """The Avro type name (or logical type) of a top-level field, nullable unions unwrapped."""
    if field is None:
        return None
    for f in avro.get("fields", []):
        if f["name"] != field:
            continue
        t = f["type"]
        if isinstance(t, list):
            t = next((b for b in t if b != "null"), "null")
        if isinstance(t, dict):
            return str(t.get("logicalType") or t.get("type"))
        return str(t)
    return None


def insert_buckets(config: TableConfig, inserts: dict[str, int], existing: Sequence[BaseFile], timeline: Timeline, *,
                   fill_small: bool, log_groups: Collection[str] = ()
                   ) -> tuple[list[tuple[str, int, int, str]], dict[str, ex.GroupPlan]]:
    """Assign each partition's insert count to file groups: small base files first (with ``fill_small``; never a
    merge-on-read group of ``log_groups``, whose latest slice has logs), then new groups sized by the record-size
    estimate.

    Returns rows (partition, lo, hi, file id) over each partition's range [0, inserts) and the plans of the groups
    used.
    """
    record_size = record_size_estimate(timeline)
    per_file = max(1, config.target_file_size // record_size)
    by_part: dict[str, list[BaseFile]] = {}
    for f in existing:
        by_part.setdefault(f.partition, []).append(f)
    rows: list[tuple[str, int, int, str]] = []
    groups: dict[str, ex.GroupPlan] = {}
    for part, n in sorted(inserts.items()):
        if n <= 0:
            continue
        targets: list[tuple[str, int, ex.GroupPlan]] = []
        remaining = n
        if fill_small:
            for f in sorted(by_part.get(part, []), key=lambda f: f.size):
                if remaining <= 0 or f.size >= config.small_file_limit or f.file_id in log_groups:
                    continue
                room = (config.target_file_size - f.size) // record_size
                if room <= 0:
                    continue
                take = min(room, remaining)
                targets.append((f.file_id, take, ex.GroupPlan(part, f.path, f.instant, rewrite=True)))
                remaining -= take
        new_files = math.ceil(remaining / per_file) if remaining > 0 else 0
        for i in range(new_files):
            take = min(per_file, remaining - i * per_file) if i < new_files - 1 else remaining - i * per_file
            fid = new_file_id()
            targets.append((fid, take, ex.GroupPlan(part, None, "null")))
        lo = 0
        for fid, take, plan in targets:
            rows.append((part, lo, lo + take, fid))
            groups[fid] = plan
            lo += take
    return rows, groups


def latest_slices_job(io: FileIO, config: TableConfig, timeline: Timeline, written: WrittenFiles) -> mor.SliceJob:
    """How to read the table's file slices as of ``timeline`` (every completed write counts, and whatever is older
    than the active timeline; ``written``: what completed writes recorded, for the log extents): for a write that
    merges slices, a compaction or a clustering."""
    return mor.SliceJob(io=io, table_schema=table_schema(timeline, config.create_schema),
                        valid_instants=InstantsOrEarlier((i.time for i in timeline.completed_writes()),
                                                         before=timeline.first_instant_time()),
                        event_time=config.merge_mode == "EVENT_TIME_ORDERING", ordering_field=config.ordering_field,
                        log_extents=written.extents)


def slice_reads(io: FileIO, config: TableConfig, timeline: Timeline, written: WrittenFiles) -> SliceReads | None:
    """How a write reads the slices it appends logs to, when it may have to (merge-on-read with event-time ordering:
    :func:`tablecore.tasks.slice_write.write_group`); None for any other table."""
    if config.table_type != "MERGE_ON_READ" or config.merge_mode != "EVENT_TIME_ORDERING":
        return None
    return SliceReads(latest_slices_job(io, config, timeline, written), written)


@dataclass(frozen=True)
class SliceReads:
    """What :func:`log_plans` needs to hand a slice's logs to the write tasks: how to read them, and what completed
    writes recorded about them (which logs hold deletes)."""

    job: mor.SliceJob
    written: WrittenFiles

    def logs_with_deletes(self, sl: FileSlice) -> bool:
        """Whether the slice's log files may hold deletes (:func:`logs_may_delete`)."""
        return logs_may_delete(sl, self.written)


def logs_may_delete(sl: FileSlice, written: WrittenFiles) -> bool:
    """Whether the slice's log files may hold deletes: a completed write recorded deletes in one of them, or one of
    them was written before the active timeline (no write stat tells)."""
    names = {lg.name for lg in sl.logs}
    recorded: set[str] = set()
    for _, stat in written.log_stats.get(sl.key, ()):
        name = stat.file_name
        if name is not None and name in names:
            if stat.num_deletes > 0:
                return True
            recorded.add(name)
    return bool(names - recorded)


def slices_with_deletes(slices: Sequence[FileSlice], written: WrittenFiles) -> dict[str, FileSlice]:
    """File id -> the slices that have a base file and logs that may delete some of its rows
    (:func:`logs_may_delete`), in partitions where another slice has a base file too (``slices``: every latest
    slice of the partitions a write touches): where an index lookup of base-file keys may find a key in two file
    groups, one of which no longer holds it."""
    bases = Counter(s.partition for s in slices if s.base is not None)
    return {s.file_id: s for s in slices
            if s.base is not None and s.logs and bases[s.partition] > 1 and logs_may_delete(s, written)}


def lookup_deletes(io: FileIO, config: TableConfig, timeline: Timeline, slices: Sequence[FileSlice],
                   written: WrittenFiles) -> tuple[dict[str, FileSlice], mor.SliceJob] | None:
    """What a ``SIMPLE`` / ``BLOOM`` lookup checks a key found in several file groups against: the
    :func:`slices_with_deletes` and how to read them; None when there are none (the lookup is taken as it is)."""
    deleting = slices_with_deletes(slices, written)
    return (deleting, latest_slices_job(io, config, timeline, written)) if deleting else None


def log_plans(groups: dict[str, ex.GroupPlan], slices: Sequence[FileSlice],
              reads: SliceReads | None = None) -> dict[str, ex.GroupPlan]:
    """Merge-on-read: existing file groups take a new log file of their latest slice (small files that take inserts
    are rewritten instead, as Hudi does). With ``reads``, a slice with a base file and logs holding deletes carries
    its log paths, for the write task to rewrite it if a deleted key comes back."""
    by_fid = {s.file_id: s for s in slices}
    out: dict[str, ex.GroupPlan] = {}
    for fid, plan in groups.items():
        sl = by_fid.get(fid)
        if sl is None or plan.rewrite:
            out[fid] = plan
            continue
        version = max((lg.version for lg in sl.logs), default=0) + 1
        reread = reads.job if reads is not None and sl.base is not None and reads.logs_with_deletes(sl) else None
        out[fid] = ex.GroupPlan(plan.partition, sl.base.path if sl.base else None, sl.base_instant,
                                log_version=version, slice_logs=tuple(lg.path for lg in sl.logs) if reread else (),
                                slice_read=reread)
    return out
