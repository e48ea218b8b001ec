"""A pipeline run in its own process, for the crash trials.

``python -m tests.governance.crash_pipeline PIPELINE.yaml MAX_BATCHES`` starts Spark and its Python workers (one
small job), prints WARM, and waits for a line on its standard input: ``GO`` runs the pipeline (READY once its tables
are open, BATCH as each batch is written, DONE at the end); anything else, or the end of the input, ends the process
without touching the pipeline's tables. So the test can start the next trial's process (its JVM, the slow part)
while the current one runs; the test SIGKILLs the running process's whole group at a random moment after READY (the
JVM and the Python workers die with it).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

from governance.audit import AuditRecord
from governance.pipeline import PipelineRunner, load_pipeline
from tablecore.spark.session import local_session


def _touch(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A Python worker's first task: imports what the write tasks run (workers are reused, so they keep it)."""
    import tablecore.tasks.log_write
    import tablecore.tasks.write  # noqa: F401

    yield from batches


def _warm(spark: SparkSession) -> None:
    """The first Spark job of a JVM and its Python workers' start pay once, before the kill window opens."""
    spark.range(0, 2, 1, 2).mapInArrow(_touch, "id long").collect()


def main(path: str, max_batches: int) -> None:
    """Warm up, wait for GO, then run at most ``max_batches`` batches of the pipeline at ``path``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    spark = local_session("lakegate-crash-trial", shuffle_partitions=2)
    _warm(spark)
    print("WARM", flush=True)
    if sys.stdin.readline().strip() != "GO":
        return
    spec = load_pipeline(path)
    runner = PipelineRunner(spec, spark)
    runner.table  # noqa: B018 - open (or create) the table before the kill window opens
    runner.changelog  # noqa: B018 - and a changelog pipeline's history table
    print("READY", flush=True)

    def report(_batch: object, record: AuditRecord) -> None:
        print(f"BATCH {record.decision.value} {record.instant}", flush=True)

    # BATCH is printed as each batch is written (run_once returns only after its last batch, so printing its records
    # would date every batch at the end of the run); the run starts again if the source had caught up while batches
    # are left, so a process ends on its own only after max_batches or when nothing new has come
    done = 0
    while done < max_batches:
        ran = len(runner.run_once(max_batches=max_batches - done, on_batch=report))
        if not ran:
            break
        done += ran
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
