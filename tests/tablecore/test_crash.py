"""Acceptance 3: a writer SIGKILLed at several points of a commit leaves the last completed state visible to our
reader and to hudi-rs, and the next write succeeds (rolling the failed instant back)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tablecore import Table, TableConfig
from tablecore.format.file_view import list_base_files
from tests.tablecore.oracle import hudi_completed, hudi_snapshot, spark_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DDL = "id int, part string, ts long, val string"


def run_writer(path: str, point: str, first: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tests.tablecore.crash_writer", path, point, str(first)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("point", ["requested", "inflight", "data_written", "before_complete", "after_complete"])
def test_sigkill_during_commit_leaves_last_completed_state(point: str, table_path: str, spark) -> None:
    t = Table.create(table_path, TableConfig(name="c", record_key=["id"], ordering_field="ts",
                                             partition_fields=["part"]), spark=spark)
    t.upsert(spark.createDataFrame([(i, f"p{i % 3}", i, f"v{i}") for i in range(10)], DDL))
    before = spark_rows(t.read())
    completed_before = [i.instant for i in t.timeline() if i.state == "completed"]

    proc = run_writer(table_path, point, 8)
    assert proc.returncode == -9, proc.stderr[-2000:]

    if point == "after_complete":
        # the kill came after the atomic publish: the commit is visible, in full
        assert len(hudi_completed(t.uri)) == 2
        assert spark_rows(t.read()) == hudi_snapshot(t.uri)
        assert t.read().count() == 13
    else:
        assert hudi_completed(t.uri) == completed_before
        assert spark_rows(t.read()) == before == hudi_snapshot(t.uri)
        pending = [i for i in t.timeline() if i.state != "completed"]
        assert len(pending) == 1

    # the next write succeeds and cleans up after the dead writer
    r = t.upsert(spark.createDataFrame([(100, "p1", 5, "after")], DDL))
    assert r.inserted == 1
    assert all(i.state == "completed" for i in t.timeline())
    live = {i.instant for i in t.timeline()}
    assert {f.instant for f in list_base_files(t.io)} <= live, "files of the killed instant were left behind"
    assert spark_rows(t.read()) == hudi_snapshot(t.uri)
