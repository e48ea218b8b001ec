"""``lakegate table replicate SRC DST``: the JSON document and the human summary of a run, a second run that copies
nothing, and the exit codes of a missing source (3) and of a target that is another table (4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from governance.cli.output import ExitCode
from tablecore import Table, TableConfig
from tests.governance.test_cli import batch1, fails, make_table, run, run_json
from tests.tablecore.oracle import hudi_snapshot, spark_rows

pytestmark = [pytest.mark.spark]


def test_replicate_copies_new_instants_and_reports_them(spark: SparkSession, tmp_path: Path) -> None:
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    table, (first, last) = make_table(spark, src, "mor")

    doc = run_json("table", "replicate", src, dst)
    assert [i["instant"] for i in doc["instants"]] == [first, last]
    assert {i["action"] for i in doc["instants"]} == {"deltacommit"}
    assert doc["replicated_instant"] == last and doc["waiting_for"] is None
    assert doc["files_copied"] > 2 and doc["bytes_copied"] > 0 and doc["files_deleted"] == 0
    assert doc["source"] == src and doc["target"] == dst
    assert hudi_snapshot(dst) == spark_rows(table.read())

    table.compact()
    human = run("table", "replicate", src, dst)
    assert human.exit_code == 0, human.stderr
    for text in ("instants copied", "1 instant (1 commit)", "files copied", "replicated instant"):
        assert text in human.stdout, human.stdout
    again = run_json("table", "replicate", src, dst)
    assert (again["instants"], again["files_copied"]) == ([], 0)
    assert len(Table.open(dst, spark=spark).read().collect()) == len(batch1()) + 2


def test_replicate_exit_codes(spark: SparkSession, tmp_path: Path) -> None:
    src, other = str(tmp_path / "src"), str(tmp_path / "other")
    make_table(spark, src, "cow")
    Table.create(other, TableConfig(name="rides", record_key=["uuid"]), spark=spark)
    fails(run("table", "replicate", src, other), ExitCode.CONFLICT, "another table")
    fails(run("table", "replicate", str(tmp_path / "none"), str(tmp_path / "dst")), ExitCode.NOT_FOUND, "no table")
    assert not (tmp_path / "dst").exists()
