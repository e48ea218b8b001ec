"""Index lookups of base-file keys on merge-on-read: a key found in several file groups goes to those that hold it.

The ``SIMPLE`` and ``BLOOM`` indexes read base files. On merge-on-read a base file can still hold a key that a log of
its slice deleted, while another file group holds the key live: an ``insert`` wrote it there after the delete (an
insert never looks at what the table holds), or a record-index upsert did. Placing an upsert of that key in both
groups would make it read twice. So a key the lookup finds in more than one group, in slices whose logs may hold
deletes (:func:`tablecore.write_planning.slices_with_deletes`), is checked against those logs in the task that holds
the key's locations (:func:`tablecore.tasks.mor.without_deleted_locations`): the groups whose logs delete it are
dropped. A key that every group deleted is an insert, as the record index would make it.

Only keys found twice are checked, so a table without such keys pays one small shuffle of the located keys and a
pass over them in a few Python tasks (nothing at all unless a partition the batch touches has two file groups or
more and a slice with deletes).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from tablecore.format.file_view import FileSlice
from tablecore.spark.jvm import default_parallelism
from tablecore.spark.task_errors import task_errors
from tablecore.tasks import mor
from tablecore.tasks import write as ex

__all__ = ["live_locations"]

logger = logging.getLogger(__name__)

_LOCATED = StructType([StructField(ex.KEY, StringType()), StructField(ex.PART, StringType()),
                       StructField(ex.FID, StringType())])
_LOCATED_ARROW = pa.schema([(ex.KEY, pa.string()), (ex.PART, pa.string()), (ex.FID, pa.string())])


def live_locations(spark: SparkSession, located: DataFrame, slices: Mapping[str, FileSlice],
                   job: mor.SliceJob) -> DataFrame:
    """``located`` (key, partition, file id: where an index lookup found each key in a base file) without the
    locations of keys found more than once whose slice's logs delete them; ``slices``: the slices with deletes.

    One shuffle brings every location of a key to one task (a few tasks: ``located`` holds at most the batch's
    keys), which reads the logs of the slices its keys found twice are in, if any."""
    descs = mor.slice_paths(slices)

    def live(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with task_errors():
            got = [b for b in batches if b.num_rows]
            if not got:
                return
            table = pa.Table.from_batches(got).select(_LOCATED_ARROW.names).cast(_LOCATED_ARROW)
            yield from mor.without_deleted_locations(table, descs, job).to_batches()

    tasks = max(1, min(default_parallelism(spark), 8))
    return located.select(ex.KEY, ex.PART, ex.FID).repartition(tasks, ex.KEY, ex.PART).mapInArrow(live, _LOCATED)
