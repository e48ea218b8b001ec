"""Which write a file group's incoming records take, in an executor: a new base file (copy-on-write, a small file
taking inserts, a new group), a log file of its latest slice (merge-on-read), or, on merge-on-read with event-time
ordering, a rewrite of the slice when the records bring back a key that a delete without an ordering value removed.

Why the rewrite: readers merge a slice's logs differently around such a delete. lakegate reads the delete as the end
of the stored row, whatever its ordering value, so the key written again is a new row (as on copy-on-write). Apache
Hudi's file group reader and hudi-rs merge the logs first (the newer record replaces the delete) and then the base
row, which wins if its ordering value is higher: the deleted row would come back. A slice whose logs hold such a
delete and whose key is written again is therefore merged with the incoming records into a new base file, as
compaction would merge it: a slice without those logs reads the same in every reader.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc

from tablecore.tasks import log_write, mor
from tablecore.tasks import write as ex

logger = logging.getLogger(__name__)


def write_group(batch: pa.Table, job: ex.WriteJob, token: str, task_partition: int) -> pa.Table:
    """Write the incoming records of one file group (rows of one ``FID``); its write stat (STAT_SCHEMA)."""
    plan = job.groups[batch.column(ex.FID)[0].as_py()]
    if plan.log_version is None:
        return ex.merge_and_write(batch, job, token, task_partition)
    if plan.slice_logs and plan.slice_read is not None:
        current = _rows_if_deleted_keys_return(batch, job, plan)
        if current is not None:
            return ex.merge_and_write(batch, job, token, task_partition, current=current)
    return log_write.append_log(batch, job, token, task_partition)


def _rows_if_deleted_keys_return(batch: pa.Table, job: ex.WriteJob, plan: ex.GroupPlan) -> pa.Table | None:
    """The slice's merged rows if an upsert of ``batch`` writes a key that a delete without an ordering value in
    the slice's logs removed while the base file still holds it; else None (the records take a log file)."""
    assert plan.slice_read is not None
    upserts = batch.filter(pc.invert(ex.delete_mask(batch)))
    if upserts.num_rows == 0:
        return None
    if plan.old_base_path is None:
        return None
    fs = job.filesystem()
    deleted = mor.natural_deletes(fs, list(plan.slice_logs), plan.slice_read)  # the delete blocks only
    returning = deleted.filter(pc.is_in(deleted, value_set=upserts.column(ex.KEY).combine_chunks()))
    if len(returning) == 0:
        return None
    stored = ex.read_base_file(fs, plan.old_base_path, [mor.KEY_COL]).column(mor.KEY_COL)
    if not pc.any(pc.is_in(stored, value_set=returning)).as_py():
        return None  # the deleted rows were in the logs only: every reader merges those alike
    merged, _ = mor.slice_rows(fs, plan.old_base_path, list(plan.slice_logs), plan.slice_read)
    logger.info("rewriting slice %s of %s: a key deleted without ordering value is written again",
                plan.prev_commit, plan.old_base_path)
    return merged
