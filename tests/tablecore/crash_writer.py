"""A writer process for the crash tests: upserts a batch and SIGKILLs itself at a given point of the commit.

Usage: python -m tests.tablecore.crash_writer <table path> <kill point> <first id>
[upsert|compact|cluster|arrow|arrow_upsert]
Kill points: requested, inflight, data_written, before_complete, metadata_committed (the metadata table's delta
commit complete, the data instant not), after_complete, none. With ``compact`` or
``cluster`` the process runs that table service instead of an upsert; with ``arrow`` it bulk-inserts 10 new keys
from a ``pyarrow.Table`` without starting Spark, with ``arrow_upsert`` it upserts the upsert's rows from one.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from tablecore import Table
from tablecore.commit import CommitProtocol
from tablecore.metadata_table import MetadataTable
from tablecore.spark.session import local_session


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    path, point, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
    op = sys.argv[4] if len(sys.argv) > 4 else "upsert"
    spark = local_session("crash-writer", cores=1, shuffle_partitions=2) if not op.startswith("arrow") else None
    orig_start, orig_inflight = CommitProtocol.start, CommitProtocol.inflight
    orig_remove, orig_complete = CommitProtocol.remove_unlisted_files, CommitProtocol.complete
    orig_transition = CommitProtocol.transition

    def start(self: CommitProtocol, *a: Any, **k: Any) -> Any:
        out = orig_start(self, *a, **k)
        if point == "requested":
            die()
        return out

    def inflight(self: CommitProtocol, instant: Any, placeholder: Any) -> Any:
        out = orig_inflight(self, instant, placeholder)
        if point == "inflight":
            die()
        return out

    def transition(self: CommitProtocol, *a: Any, **k: Any) -> Any:
        out = orig_transition(self, *a, **k)
        if point == "inflight":
            die()
        return out

    def remove(self: CommitProtocol, *a: Any, **k: Any) -> int:
        if point == "data_written":
            die()
        return orig_remove(self, *a, **k)

    def complete(self: CommitProtocol, *a: Any, **k: Any) -> Any:
        if point == "before_complete":
            die()
        out = orig_complete(self, *a, **k)
        if point == "after_complete":
            die()
        return out

    orig_metadata_commit = MetadataTable.commit

    def metadata_commit(self: MetadataTable, *a: Any, **k: Any) -> None:
        orig_metadata_commit(self, *a, **k)
        if point == "metadata_committed":
            die()

    MetadataTable.commit = metadata_commit  # type: ignore[method-assign]
    CommitProtocol.start = start  # type: ignore[method-assign]
    CommitProtocol.inflight = inflight  # type: ignore[method-assign]
    CommitProtocol.transition = transition  # type: ignore[method-assign]
    CommitProtocol.remove_unlisted_files = remove  # type: ignore[method-assign]
    CommitProtocol.complete = complete  # type: ignore[method-assign]
    if op.startswith("arrow"):
        import pyarrow as pa

        from tablecore.engine import MetadataOnlyEngine

        ids = list(range(first, first + 10)) if op == "arrow" else list(range(first - 5, first + 5))
        batch = pa.table({"id": pa.array(ids, pa.int32()), "part": [f"p{i % 3}" for i in ids],
                          "ts": pa.array([1000 + i for i in ids], pa.int64()), "val": [f"crash-{i}" for i in ids]})
        t = Table.open(path, engine=MetadataOnlyEngine())
        t.bulk_insert(batch) if op == "arrow" else t.upsert(batch)
        print("completed", flush=True)
        return
    assert spark is not None
    t = Table.open(path, spark=spark)
    if op in ("compact", "cluster"):
        t.compact() if op == "compact" else t.cluster(small_file_limit=1 << 30)
        print("completed", flush=True)
        return
    rows = [(i, f"p{i % 3}", 1000 + i, f"crash-{i}") for i in range(first - 5, first + 5)]
    t.upsert(spark.createDataFrame(rows, "id int, part string, ts long, val string"))
    print("completed", flush=True)


if __name__ == "__main__":
    main()
