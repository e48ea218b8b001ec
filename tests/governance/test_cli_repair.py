"""``lakegate table repair``: a damaged table is reported with exit code 6 naming file and instant, and each repair
leaves a table that reads its previous state, hudi-rs agreeing (issue 22, acceptance 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from governance.cli.output import ExitCode
from tablecore import Table
from tests.governance.test_cli import batch1, fails, make_table, run, run_json
from tests.tablecore.oracle import hudi_snapshot

pytestmark = [pytest.mark.spark]


def _uuids(rows: list[dict[str, object]]) -> dict[object, object]:
    return {r["uuid"]: r["fare"] for r in rows}


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_repair_rolls_back_an_instant_whose_commit_file_is_garbage(spark: SparkSession, tmp_path: Path, kind: str,
                                                                   where: str, request: pytest.FixtureRequest) -> None:
    path = request.getfixturevalue("s3").table_uri(f"repair-{kind}") if where == "s3" else str(tmp_path / "t")
    table, (first, last) = make_table(spark, path, kind)
    previous = _uuids(table.read(as_of=first).toPandas().to_dict("records"))
    action = "commit" if kind == "cow" else "deltacommit"
    table.io.write_bytes(table.io.join(f".hoodie/{last}.{action}"), b"\x00 not json")

    for args in (("table", "read", path), ("table", "history", path)):
        fails(run(*args), ExitCode.CORRUPT, f"{last}.{action}")
    assert f"--rollback-instant {last}" in run("table", "read", path).stderr

    doc = run_json("table", "repair", path, "--rollback-instant", last)
    assert doc["rolled_back"] == last and doc["repair"] == "rollback-instant"
    after = Table.open(path, spark=spark)
    assert _uuids(after.read().toPandas().to_dict("records")) == previous
    assert _uuids(hudi_snapshot(after.uri)) == previous
    assert run("table", "read", path).exit_code == 0


def test_repair_restores_a_savepoint_over_a_damaged_instant(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table, (first, last) = make_table(spark, path, "mor")
    assert run("table", "savepoint", path, first).exit_code == 0
    previous = _uuids(table.read(as_of=first).toPandas().to_dict("records"))
    table.io.write_bytes(table.io.join(f".hoodie/{last}.deltacommit"), b"")
    doc = run_json("table", "repair", path, "--restore", first)
    assert doc["restored_to"] == first and doc["rolled_back"] == [last]
    assert _uuids(hudi_snapshot(path)) == previous == _uuids(
        Table.open(path, spark=spark).read().toPandas().to_dict("records"))


def test_repair_recovers_hoodie_properties_from_its_backup(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t"
    make_table(spark, path, "cow")
    props = path / ".hoodie" / "hoodie.properties"
    good = props.read_bytes()
    props.write_bytes(good[: len(good) // 2])
    fails(run("table", "history", str(path)), ExitCode.CORRUPT, "hoodie.properties")
    fails(run("table", "repair", str(path), "--properties-from-backup"), ExitCode.CORRUPT, "no intact")
    (path / ".hoodie" / "hoodie.properties.backup").write_bytes(good)
    assert run_json("table", "repair", str(path), "--properties-from-backup")["restored"] is True
    assert props.read_bytes() == good
    assert len(Table.open(str(path), spark=spark).read().collect()) == len(batch1()) + 2


def test_repair_takes_exactly_one_action(tmp_path: Path) -> None:
    fails(run("table", "repair", str(tmp_path)), ExitCode.USAGE, "exactly one repair")
    fails(run("table", "repair", str(tmp_path), "--restore", "1", "--properties-from-backup"), ExitCode.USAGE,
          "--restore, --properties-from-backup")
