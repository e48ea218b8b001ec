"""Building the record-level index (:mod:`tablecore.record_index`) from a table's rows, and checking it against them.

A build reads the record key and commit time of every row of the latest snapshot (the meta columns only of a base
file without logs; a merge-on-read slice with logs is merged first), in this process with a pool of threads (no Spark),
and writes the metadata table again with both ``files`` and ``record_index`` (:func:`rebuild_metadata_table`), under
the commit lock. It refuses a table with a write in flight (its inserts would not be in the index) or with a key in
two places (the record index is global: a key lives in one partition).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc

from tablecore.config import TableConfig
from tablecore.exceptions import ConfigError, InvalidInputError
from tablecore.format.instant import Action
from tablecore.format.record_index import file_group_indexes
from tablecore.format.timeline import Timeline
from tablecore.io import FileIO, file_io_for
from tablecore.locks import commit_lock
from tablecore.metadata_table import rebuild_metadata_table, record_index_in_use
from tablecore.read_planning import ReadPlan, plan_snapshot
from tablecore.record_index import index_view, lookup, no_locations
from tablecore.table_properties import read_config, update_properties
from tablecore.tasks.read import read_slice
from tablecore.tasks.write import conform, read_base_file

__all__ = ["build_record_index", "rebuild_with_record_index", "snapshot_locations", "verify_record_index"]

logger = logging.getLogger(__name__)

RECORD_KEY_COL, COMMIT_TIME_COL = "_hoodie_record_key", "_hoodie_commit_time"
_PLACES_KEYS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING)


def snapshot_locations(io: FileIO, config: TableConfig, timeline: Timeline) -> pa.Table:
    """Every row of the latest snapshot as (key, partition, file_id, instant): where the record index would say it
    lives. Read with threads, meta columns only where a slice has no logs."""
    if not config.populate_meta_fields:
        raise ConfigError("the record index needs the rows' record keys: this table has no meta fields "
                          "(hoodie.populate.meta.fields=false)")
    if timeline.latest_completed() is None:
        return no_locations()
    plan: ReadPlan = plan_snapshot(io, timeline, config)
    wanted = [RECORD_KEY_COL, COMMIT_TIME_COL]
    schema = pa.schema([plan.schema.field(c) for c in wanted])

    def one(entry: tuple[str, str, str | None, list[str]]) -> pa.Table:
        partition, file_id, base, logs = entry
        if logs or base is None:
            merged = read_slice(io, plan, base, logs)
            rows = schema.empty_table() if merged is None else merged.select(wanted)
        else:
            rows = conform(read_base_file(io, base, wanted, use_threads=False), schema)
        n = rows.num_rows
        return pa.table({"key": rows.column(RECORD_KEY_COL).cast(pa.string()),
                         "partition": pa.array([partition] * n, pa.string()),
                         "file_id": pa.array([file_id] * n, pa.string()),
                         "instant": rows.column(COMMIT_TIME_COL).cast(pa.string())})

    slices = plan.slices()
    with ThreadPoolExecutor(max(1, min(32, 2 * (os.cpu_count() or 1))), thread_name_prefix="lakegate-ri") as pool:
        parts = list(pool.map(one, slices))
    return pa.concat_tables(parts) if parts else no_locations()


def build_record_index(io: FileIO, config: TableConfig, timeline: Timeline, completion: str) -> int:
    """Rebuild the metadata table with the record index (under the commit lock) and make it the table's index
    (``hoodie.index.type=RECORD_INDEX``, unless it has the bucket index); returns the keys indexed.

    Raises:
        ConfigError: version 6, no meta fields, or a write in flight.
        InvalidInputError: a record key in two places.
    """
    pending = [i.time for i in timeline.pending() if i.action in _PLACES_KEYS]
    if pending:
        raise ConfigError(f"writes are in flight ({', '.join(pending)}): their inserts would be missing from the "
                          f"record index; let them finish or roll them back (lakegate table recover), then build it")
    rows = snapshot_locations(io, config, timeline)
    if pc.count_distinct(rows.column("key")).as_py() != rows.num_rows:
        counts = pc.value_counts(rows.column("key"))
        twice = [v["values"] for v in counts.to_pylist() if v["counts"] > 1][:3]
        raise InvalidInputError(f"the record index is global (a key lives in one file group) but keys are in "
                                f"several: {', '.join(map(repr, twice))}; deduplicate the table first")
    rebuild_metadata_table(io, config, timeline, completion, index=(config.record_index_file_groups, rows))
    if config.index_type == "SIMPLE":  # writes look keys up in it from now on
        update_properties(io, {"hoodie.index.type": "RECORD_INDEX"})
    logger.info("built the record index of %s: %d keys in %d file groups", io.uri, rows.num_rows,
                config.record_index_file_groups)
    return int(rows.num_rows)


def rebuild_with_record_index(uri: str, storage_options: Mapping[str, str] | None = None, *,
                              file_groups: int | None = None) -> int:
    """Build (or rebuild) the metadata table of the table at ``uri`` with its ``files`` partition and the record
    index, under the commit lock (writers wait; no Spark). Returns the number of keys indexed.

    Raises:
        TableNotFoundError: no table at ``uri``.
        ConfigError: as :func:`build_record_index`.
        InvalidInputError: as :func:`build_record_index`.
    """
    io = file_io_for(uri, storage_options)
    config = read_config(io, uri)
    if file_groups is not None:
        config = config.model_copy(update={"record_index_file_groups": file_groups})
    with commit_lock(io):
        timeline = Timeline.listed(io, config.table_version)
        return build_record_index(io, config, timeline, timeline.next_completion_time())


def verify_record_index(uri: str, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """Where the record index and the table's rows disagree: a row's key the index lacks or places in another file
    group (empty: they agree). Keys the index holds that no row has are not reported: a deleted key's entry may
    outlive it (a location is a hint a writer checks)."""
    io = file_io_for(uri, storage_options)
    config = read_config(io, uri)
    if not record_index_in_use(config):
        return ["the table has no record index lakegate maintains"]
    timeline = Timeline.listed(io, config.table_version)
    rows = snapshot_locations(io, config, timeline)
    view = index_view(io, timeline)
    groups = file_group_indexes(rows.column("key"), view.groups)
    keys, parts, fids = (rows.column(c).to_pylist() for c in ("key", "partition", "file_id"))
    by_group: dict[int, list[int]] = {}
    for i, g in enumerate(groups.tolist()):
        by_group.setdefault(g, []).append(i)
    problems = []
    for g, mine in sorted(by_group.items()):
        found = lookup(view, g, [keys[i] for i in mine])
        for i in mine:
            loc = found.get(keys[i])
            if loc is None:
                problems.append(f"key {keys[i]!r} ({parts[i]}/{fids[i]}) is not in the record index")
            elif (loc.partition, loc.file_id) != (parts[i], fids[i]):
                problems.append(f"key {keys[i]!r} is in {parts[i]}/{fids[i]}, the record index says "
                                f"{loc.partition}/{loc.file_id}")
    return problems
