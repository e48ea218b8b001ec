"""Lag and health of pipelines (issue 21: commits pending upstream vs consumed, the last consumed commit's time, rows
inserted / updated / deleted, failures) in ``pipeline status --json`` and ``pipeline metrics``, and the Grafana
dashboard and alert rules in ``docs/grafana`` (acceptance 6: every query names an exported metric)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from governance.audit import SourceLag, prometheus_text
from governance.cli import app
from governance.errors import TransformError
from governance.pipeline import PipelineRunner, load_pipeline
from governance.pipeline_health import PIPELINE_METRICS
from tablecore import Table, TableConfig
from tablecore.format.instant import parse_instant_time

pytestmark = pytest.mark.spark

DOCS = Path(__file__).resolve().parents[2] / "docs" / "grafana"
STEP = '''
import os


def maybe_fail(df, ctx):
    if os.environ.get("LAKEGATE_TEST_FAIL_STEP"):
        raise RuntimeError("upstream says no")
    return df
'''


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def pipeline(spark: SparkSession, tmp_path: Path) -> tuple[Path, Table]:
    source = Table.create(str(tmp_path / "tables" / "orders"),
                          TableConfig(name="orders", record_key=["id"], ordering_field="v"), spark=spark)
    ddl = "id string, v int"
    source.upsert(spark.createDataFrame([(f"o{i}", 1) for i in range(5)], ddl))
    source.upsert(spark.createDataFrame([("o0", 2), ("o1", 2), ("o5", 2), ("o6", 2), ("o7", 2)], ddl))
    source.upsert(spark.createDataFrame([("o2", 3)], ddl))
    (tmp_path / "health_step.py").write_text(STEP)
    path = tmp_path / "orders.yaml"
    path.write_text(textwrap.dedent("""
        name: orders-copy
        source: {kind: table, path: tables/orders, max_commits_per_batch: 1}
        transform:
          - sql: SELECT id, v FROM {source}
          - python: health_step:maybe_fail
        target: {path: tables/orders_copy, name: orders_copy, record_key: [id], ordering_field: v}
    """))
    return path, source


def test_status_and_metrics_follow_the_pipeline(spark: SparkSession, pipeline: tuple[Path, Table],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path, source = pipeline
    commits = [i.instant for i in source.timeline() if i.state == "completed"]
    runner = PipelineRunner(load_pipeline(path), spark)
    assert [r.decision.value for r in runner.run_once(max_batches=2)] == ["published", "published"]
    monkeypatch.setenv("LAKEGATE_TEST_FAIL_STEP", "1")
    with pytest.raises(TransformError, match="upstream says no"):
        runner.run_once()

    cli = CliRunner()
    result = cli.invoke(app, ["pipeline", "status", str(path), "--json"])
    assert result.exit_code == 0, result.output
    health = json.loads(result.stdout)["health"]
    src = health["source"]
    assert (src["pending_commits"], src["consumed_commits"]) == (1, 2)
    assert src["checkpoint"] == {"instant": commits[1]}
    assert src["last_consumed_at"].startswith(parse_instant_time(commits[1]).isoformat()[:19])
    assert src["oldest_pending_at"].startswith(parse_instant_time(commits[2]).isoformat()[:19])
    assert src["lag_seconds"] > 0
    assert health["batches"] == {"failed": 1, "published": 2}
    assert health["failures"] == 1
    assert health["records"] == {"inserted": 8, "updated": 2, "deleted": 0}
    assert "upstream says no" in health["last_failure"]["error"]
    assert "transform step 2 (python health_step:maybe_fail)" in health["last_failure"]["error"]

    monkeypatch.delenv("LAKEGATE_TEST_FAIL_STEP")
    runner.run_once()
    result = cli.invoke(app, ["pipeline", "metrics", str(path)])
    assert result.exit_code == 0, result.output
    samples = _samples(result.stdout)
    me = (("pipeline", "orders-copy"),)
    assert samples[("lakegate_pipeline_source_commits_pending", me)] == 0
    assert samples[("lakegate_pipeline_source_lag_seconds", me)] == 0
    assert samples[("lakegate_pipeline_source_commits_consumed_total", me)] == 3
    assert samples[("lakegate_pipeline_failures_total", me)] == 1
    assert samples[("lakegate_pipeline_batches_total", (("decision", "published"), *me))] == 3
    assert samples[("lakegate_pipeline_records_written_total", (("kind", "updated"), *me))] == 3
    assert samples[("lakegate_pipeline_last_consumed_commit_timestamp_seconds", me)] == \
        pytest.approx(parse_instant_time(commits[2]).timestamp(), abs=0.001)

    human = cli.invoke(app, ["pipeline", "status", str(path)])
    assert human.exit_code == 0 and "pending" in human.stdout and "0 commit(s)" in human.stdout


def _exported(records_text: str, health_text: str) -> set[str]:
    names: set[str] = set()
    for text in (records_text, health_text):
        for family in text_string_to_metric_families(text):
            names.update(s.name for s in family.samples)
    return names


def test_every_dashboard_query_and_alert_names_an_exported_metric(spark: SparkSession,
                                                                 pipeline: tuple[Path, Table]) -> None:
    path, _ = pipeline
    runner = PipelineRunner(load_pipeline(path), spark)
    records = runner.run_once()
    # the gate's metrics of these records, one of them as if it came from Kafka (its lag gauges)
    lagged = records[0].model_copy(update={"lag": (SourceLag(topic="t", partition=0, start=0, end=5, offset_lag=2,
                                                            newest_event_ms=1, event_time_lag_s=1.5),)})
    # and a files pipeline that has not run yet (its pending files)
    (path.parent / "landing").mkdir()
    (path.parent / "landing" / "a.json").write_text('{"id": "x"}')
    files = path.parent / "files.yaml"
    files.write_text("name: files-in\nsource: {kind: files, path: landing, format: json}\n"
                     "target: {path: tables/in, name: in_table, record_key: [id]}\n")
    result = CliRunner().invoke(app, ["pipeline", "metrics", str(path), str(files)])
    assert result.exit_code == 0, result.output
    assert _samples(result.stdout)[("lakegate_pipeline_source_files_pending", (("pipeline", "files-in"),))] == 1
    exported = _exported(prometheus_text([lagged, *records[1:]]), result.stdout)
    assert {name for name, _, _ in PIPELINE_METRICS} <= exported | {n.removesuffix("_total") for n in exported}

    dashboard = json.loads((DOCS / "lakegate-pipelines.json").read_text())
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) >= 8
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    queried: set[str] = set()
    for panel in dashboard["panels"]:
        assert panel["type"] in ("timeseries", "stat") and set(panel["gridPos"]) == {"x", "y", "w", "h"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(re.findall(r"\blakegate_[a-z0-9_]+\b", target["expr"]))
            assert names, f"{panel['title']}: {target['expr']}"
            assert names <= exported, f"{panel['title']}: {names - exported} not exported"
            assert set(re.findall(r"\$(\w+)", target["expr"])) <= variables | {"__rate_interval", "__range"}
            queried |= names
    # the dashboard plots every pipeline metric
    assert {name for name, _, _ in PIPELINE_METRICS} <= queried

    rules = yaml.safe_load((DOCS / "lakegate-alerts.yaml").read_text())
    for rule in (r for g in rules["groups"] for r in g["rules"]):
        names = set(re.findall(r"\blakegate_[a-z0-9_]+\b", rule["expr"]))
        assert names and names <= exported, rule["alert"]

