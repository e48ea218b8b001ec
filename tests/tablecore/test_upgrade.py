"""``Table.upgrade`` / ``lakegate table upgrade``: version-6 tables (ours and Apache Hudi's) become version 8 in
place; hudi-rs reads them as version 8 with the same rows; a SIGKILL after any step leaves a table that reads the
same, and the upgrade can be rerun to the end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tablecore import Table, TableConfig
from tablecore.exceptions import ConfigError
from tablecore.format.instant import Instant
from tests.tablecore.oracle import assert_same_as_hudi, hudi_snapshot, hudi_table, spark_rows
from tests.tablecore.test_hudi_fixtures import FIXTURES_ALL as V6_FIXTURES
from tests.tablecore.test_hudi_fixtures import extract

pytestmark = pytest.mark.spark

DDL = "id int, part string, ts long, val string"
ROOT = Path(__file__).resolve().parents[2]


def _v6(spark: Any, path: str, table_type: str) -> Table:
    t = Table.create(path, TableConfig(name="up", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                                       table_type=table_type), spark=spark)
    t.insert(spark.createDataFrame([(i, f"p{i % 2}", 1, "a") for i in range(6)], DDL))
    t.upsert(spark.createDataFrame([(0, "p0", 2, "b"), (7, "p1", 2, "new")], DDL))
    t.delete(spark.createDataFrame([(3, "p1", 3, "")], DDL))
    return t


def _instant_files(path: str, folder: str) -> list[str]:
    return sorted(p.name for p in Path(path, folder).iterdir() if p.is_file() and p.name[:1].isdigit())


def _version(path: str) -> str:
    props = Path(path, ".hoodie", "hoodie.properties").read_text().splitlines()
    return next(line.split("=", 1)[1] for line in props if line.startswith("hoodie.table.version="))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_upgrade_of_our_version_6_table_then_writes_go_on(table_type: str, tmp_path: Path, spark: Any) -> None:
    t = _v6(spark, str(tmp_path / "t"), table_type)
    before = spark_rows(t.read())
    plan = t.upgrade(8, dry_run=True)
    assert plan.from_version == 6 and plan.to_version == 8 and _version(t.path) == "6"  # the dry run changed nothing
    assert plan.slices_to_compact == (2 if table_type == "MERGE_ON_READ" else 0)
    done = t.upgrade(8)
    assert _version(t.path) == "8" and t.config.table_version == 8
    assert _instant_files(t.path, ".hoodie") == []  # the old timeline is gone
    moved = [Instant.parse(n) for n in _instant_files(t.path, ".hoodie/timeline")]
    assert moved and all(i is not None and (i.completion is not None) == i.is_completed for i in moved)
    assert any(how == "json->avro" for *_, how in done.instant_files)
    reopened = Table.open(t.path, spark=spark)
    assert reopened.config.table_version == 8
    assert spark_rows(reopened.read()) == before == hudi_snapshot(reopened.uri)
    assert hudi_table(reopened.uri).hudi_options().get("hoodie.table.version") == "8"
    reopened.upsert(spark.createDataFrame([(1, "p1", 5, "after"), (9, "p1", 5, "new")], DDL))
    assert_same_as_hudi(reopened)
    assert reopened.upgrade(8).done  # a rerun is a no-op


@pytest.mark.parametrize("name", V6_FIXTURES)
def test_upgrade_of_each_apache_hudi_version_6_fixture(name: str, tmp_path: Path, spark: Any) -> None:
    path = extract(name, tmp_path)
    theirs = hudi_snapshot(path)
    table = Table.open(path, spark=spark)
    table.upgrade(8)
    assert _version(path) == "8"
    assert hudi_snapshot(path) == theirs == spark_rows(Table.open(path, spark=spark).read())


def test_upgrade_refuses_staged_commits_and_versions_it_cannot_reach(tmp_path: Path, spark: Any) -> None:
    t = _v6(spark, str(tmp_path / "t"), "COPY_ON_WRITE")
    staged = t.upsert(spark.createDataFrame([(1, "p1", 9, "staged")], DDL), stage=True)
    with pytest.raises(ConfigError, match="staged commits"):
        t.upgrade(8)
    staged.abort()
    with pytest.raises(ConfigError, match="not 9"):
        t.upgrade(9)
    assert _version(t.path) == "6"


@pytest.mark.crash_trials
def test_a_sigkill_after_any_step_leaves_a_readable_table_and_the_upgrade_reruns(tmp_path: Path, spark: Any) -> None:
    src = _v6(spark, str(tmp_path / "src"), "COPY_ON_WRITE")
    rows = hudi_snapshot(src.uri)
    steps = None
    k = 0
    while steps is None or k < steps:
        path = tmp_path / f"k{k}"
        subprocess.run(["cp", "-r", src.path, str(path)], check=True)
        proc = subprocess.run([sys.executable, "-m", "tests.tablecore.upgrade_crash", str(path), str(k)],
                              cwd=ROOT, capture_output=True, text=True)
        if proc.returncode == 0:  # ran to the end: k was past the last step
            steps = int(proc.stdout.strip())
            break
        assert proc.returncode == -9, proc.stderr
        assert hudi_snapshot(str(path)) == rows, f"after step {k}"  # hudi-rs reads the same, v6 or v8
        table = Table.open(str(path), spark=spark)
        assert spark_rows(table.read()) == rows, f"after step {k}"
        table.upgrade(8)  # the rerun finishes it
        assert _version(str(path)) == "8" and _instant_files(str(path), ".hoodie") == []
        assert hudi_snapshot(str(path)) == rows == spark_rows(Table.open(str(path), spark=spark).read())
        k += 1
    assert steps is not None and steps >= 10 and k == steps


def test_cli_upgrade_dry_run_then_upgrade_and_the_doctor_finds_the_table_intact(tmp_path: Path, spark: Any) -> None:
    import json

    from governance.cli import app
    from tests.governance.test_cli import runner

    t = _v6(spark, str(tmp_path / "t"), "MERGE_ON_READ")
    files_before = sorted(str(p) for p in Path(t.path).rglob("*"))
    dry = runner.invoke(app, ["table", "upgrade", t.path, "--to", "8", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    doc = json.loads(dry.stdout)
    assert (doc["from_version"], doc["to_version"], doc["slices_to_compact"]) == (6, 8, 2)
    assert doc["properties"]["hoodie.table.version"] == "8" and doc["instant_files"]
    assert sorted(str(p) for p in Path(t.path).rglob("*")) == files_before  # nothing changed
    human = runner.invoke(app, ["table", "upgrade", t.path, "--to", "8", "--dry-run"])
    assert "would upgrade (dry run): version 6 -> 8" in human.stdout and "compacted" in human.stdout
    done = runner.invoke(app, ["table", "upgrade", t.path, "--to", "8"])
    assert done.exit_code == 0, done.output
    assert "upgraded: version 6 -> 8" in done.stdout and _version(t.path) == "8"
    doctor = runner.invoke(app, ["table", "doctor", t.path, "--json"])
    assert doctor.exit_code == 0, doctor.stdout
    again = runner.invoke(app, ["table", "upgrade", t.path, "--to", "8"])
    assert again.exit_code == 0 and "version 8 already" in again.stdout
