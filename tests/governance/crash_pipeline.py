"""A pipeline run in its own process, for the crash trials: prints READY once Spark is up, then runs.

``python -m tests.governance.crash_pipeline PIPELINE.yaml MAX_BATCHES`` (the test SIGKILLs its whole process group
at a random moment; the JVM and the Python workers die with it).
"""

from __future__ import annotations

import logging
import sys

from governance.pipeline import PipelineRunner, load_pipeline
from tablecore.spark.session import local_session


def main(path: str, max_batches: int) -> None:
    """Run at most ``max_batches`` batches of the pipeline at ``path``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    spark = local_session("lakegate-crash-trial", shuffle_partitions=2)
    spec = load_pipeline(path)
    runner = PipelineRunner(spec, spark)
    runner.table  # noqa: B018 - open (or create) the table before the kill window opens
    runner.changelog  # noqa: B018 - and a changelog pipeline's history table
    print("READY", flush=True)
    for record in runner.run_once(max_batches=max_batches):
        print(f"BATCH {record.decision.value} {record.instant}", flush=True)
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
