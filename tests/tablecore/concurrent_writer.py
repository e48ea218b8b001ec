"""A long-lived writer process for the concurrent-writer trials: one SparkSession, then one upsert per command.

Usage: python -m tests.tablecore.concurrent_writer <table uri>
Reads JSON lines from stdin: ``{"rows": [[id, part, ts, val], ...], "at": <unix time>}``; waits until ``at`` (both
writers start together), upserts the rows, and answers one JSON line: ``{"status": "committed", "instant": ...}``
or ``{"status": "conflict", "error": ...}``. Anything else is an error line and the process exits.
"""

from __future__ import annotations

import json
import sys
import time

from tablecore import CommitConflictError, Table
from tablecore.spark.session import local_session

DDL = "id int, part string, ts long, val string"


def main() -> None:
    spark = local_session("concurrent-writer", cores=1, shuffle_partitions=2)
    table = Table.open(sys.argv[1], spark=spark)
    print(json.dumps({"status": "ready"}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        df = spark.createDataFrame([tuple(r) for r in cmd["rows"]], DDL)
        df.count()  # the rows are ready before the start signal: both writers start their upsert together
        time.sleep(max(0.0, float(cmd["at"]) - time.time()))
        try:
            r = table.upsert(df)
            answer = {"status": "committed", "instant": r.instant}
        except CommitConflictError as e:
            answer = {"status": "conflict", "error": str(e)}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
