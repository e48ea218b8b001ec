"""Tables written by Apache Hudi 0.14/0.15 (fixtures from apache/hudi-rs, see tests/fixtures/hudi-v6/README.md) read
through our reader exactly as their expected JSON (produced by hudi-rs 0.5.0)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tablecore import Table
from tests.conftest import FIXTURES
from tests.tablecore.oracle import spark_rows

pytestmark = pytest.mark.spark

HUDI = FIXTURES / "hudi-v6"
FIXTURES_ALL = sorted(p.stem for p in HUDI.glob("*.zip"))


def extract(name: str, dest: Path) -> str:
    with zipfile.ZipFile(HUDI / f"{name}.zip") as z:
        z.extractall(dest)
    props = [p for p in dest.rglob(".hoodie/hoodie.properties") if "__MACOSX" not in p.parts]
    assert len(props) == 1
    return str(props[0].parent.parent)


@pytest.mark.parametrize("name", FIXTURES_ALL)
def test_read_hudi_written_fixture_matches_expected(name: str, tmp_path: Path, spark) -> None:
    expected = json.loads((HUDI / "expected" / f"{name}.json").read_text())
    table = Table.open(extract(name, tmp_path), spark=spark)
    assert table.config.table_type == expected["table_type"]
    completed = [i.instant for i in table.timeline() if i.state == "completed"]
    assert completed == expected["completed_instants"]
    assert spark_rows(table.read()) == expected["snapshot"]
    assert table.count() == len(expected["snapshot"])  # footers and log keys, no row read
    assert spark_rows(spark.read.format("tablecore").load(table.path)) == expected["snapshot"]
    if "read_optimized" in expected:
        assert spark_rows(table.read(view="read_optimized")) == expected["read_optimized"]
    for instant, rows in expected.get("as_of", {}).items():
        assert spark_rows(table.read(as_of=instant)) == rows, f"as_of {instant}"
        assert table.count(as_of=instant) == len(rows), f"count as_of {instant}"
    for rng, rows in expected.get("incremental", {}).items():
        start, end = rng.strip("()]").split(",")
        assert spark_rows(table.read_changes(start=start, end=end)) == rows, f"incremental {rng}"


def test_write_into_hudi_written_table_then_hudi_rs_agrees(tmp_path: Path, spark) -> None:
    """We can continue writing a table Apache Hudi created; hudi-rs reads the result as we do."""
    from pyspark.sql import functions as F

    from tests.tablecore.oracle import assert_same_as_hudi

    table = Table.open(extract("cow_nonpartitioned", tmp_path), spark=spark)
    before = table.read().count()
    upd = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie")])
    upd = upd.withColumn("longField", F.col("longField") + 1).limit(2)
    r = table.upsert(upd)
    assert r.updated == 2 and r.inserted == 0
    assert table.read().count() == before
    assert_same_as_hudi(table)
