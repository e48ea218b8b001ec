"""``lakegate demo`` for real, once: an embedded registry, six landing files through the gate, and its summary."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from governance.audit import AuditLog, Decision
from governance.demo import build_batches
from governance.gate import default_audit_dir
from tests.governance.test_cli import run

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


def test_demo_runs_the_whole_story(spark: SparkSession, tmp_path: Path) -> None:
    result = run("demo", "--dir", str(tmp_path))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    out = result.stdout
    assert re.search(r"registered trips-value v1 \(id \d+\)", out)
    for name in ("trips.yaml", "trips_suite.yaml", "trips.avsc", "registry.db"):
        assert (tmp_path / name).exists()
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
    # the reports exist; the audit log agrees
    reports = re.findall(r"(/\S+\.html)", out)
    assert len(reports) == 2 and all(Path(p).exists() for p in reports)
    table = tmp_path / "tables" / "trips"
    records = list(AuditLog(default_audit_dir(str(table))).records())
    assert [r.decision for r in records] == [Decision.PUBLISHED, Decision.PUBLISHED, Decision.QUARANTINED,
                                             Decision.PUBLISHED, Decision.PUBLISHED, Decision.BLOCKED]
    assert re.search(r"done in \d+s", out)
