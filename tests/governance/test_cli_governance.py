"""The governance command groups in-process (Typer's CliRunner): ``pipeline``, ``wap``, ``quarantine`` and ``audit``
on a real merge-on-read table fed by a pipeline file and a live registry; ``--json`` documents and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from pyspark.sql import SparkSession

from governance.cli.output import ExitCode, exit_code_for
from governance.cli.pipeline_commands import pipeline_schema_text
from governance.cli.quarantine_commands import parse_assignments
from governance.errors import BatchBlockedError, PipelineConfigError, SourceError, StagedNotFoundError
from governance.pipeline import pipeline_json_schema
from schema_registry import RegistryClient
from tablecore.io import file_io_for
from tests.governance.test_cli import fails, run, run_json

ROOT = Path(__file__).resolve().parents[2]
DAY1, DAY2 = "2026-11-18", "2026-11-19"

SUITE = """\
name: trips_checks
checks:
  - {name: no_big_tips, kind: sql, form: zero_rows, query: "SELECT uuid, tip FROM {changes} WHERE tip > 100"}
"""


def _row(i: int, day: str, *, age: int = 30, tip: float = 0.0) -> dict[str, Any]:
    return {"uuid": f"trip-{i:04d}", "driver": f"d{i % 3}", "dt": day, "ts": 1_000 + i, "rider_age": age,
            "fare": 12.5, "tip": tip, "currency": "USD"}


BATCHES = [
    [_row(i, DAY1) for i in range(10)],
    [_row(i, DAY2, age=900 if i in (12, 14) else 30) for i in range(10, 16)],  # 2 ages of 900: quarantined
    [_row(i, DAY2, tip=250.0 if i == 20 else 1.0) for i in range(20, 23)],  # a tip of 250: blocked, kept
    [_row(30, DAY2, tip=500.0)],  # blocked, kept, then aborted
]


def write_pipeline(folder: Path, registry_url: str, *, on_block: str = "keep", data: str | None = None) -> Path:
    """A pipeline file, its suite and the landing files of :data:`BATCHES` in ``folder`` (with ``data``, an
    ``s3://`` prefix: the landing files and the tables there)."""
    if data is None:
        landing = folder / "landing"
        landing.mkdir(parents=True)
        for n, batch in enumerate(BATCHES, start=1):
            (landing / f"b-{n:03d}.json").write_text("".join(json.dumps(r) + "\n" for r in batch))
    else:
        store = file_io_for(data)
        for n, batch in enumerate(BATCHES, start=1):
            store.write_bytes(store.join("landing", f"b-{n:03d}.json"),
                              "".join(json.dumps(r) + "\n" for r in batch).encode())
    prefix = "" if data is None else data + "/"
    (folder / "suite.yaml").write_text(SUITE)
    path = folder / "trips.yaml"
    path.write_text(f"""\
name: trips-ingest
source: {{kind: files, path: {prefix}landing, format: json, pattern: "b-*.json"}}
target:
  path: {prefix}tables/trips
  name: trips
  record_key: [uuid]
  ordering_field: ts
  partition_fields: [dt]
  table_type: MERGE_ON_READ
registry: {{url: "{registry_url}", subject: trips-value}}
gate: {{semantic_check: quarantine, on_block: {on_block}}}
validators: suite.yaml
""")
    return path


# ---- no Spark -----------------------------------------------------------------------------------------------------

def test_committed_pipeline_schema_is_the_generated_one() -> None:
    committed = (ROOT / "docs" / "pipeline.schema.json").read_text(encoding="utf-8")
    assert committed == pipeline_schema_text(pipeline_json_schema()) + "\n", \
        "docs/pipeline.schema.json is stale: lakegate pipeline schema > docs/pipeline.schema.json"
    result = run("pipeline", "schema")
    assert result.exit_code == 0 and result.stdout == committed
    schema = json.loads(result.stdout)
    assert schema["title"] == "lakegate pipeline" and {"name", "source", "target"} <= set(schema["required"])


def test_help_lists_the_governance_groups() -> None:
    top = run("--help").stdout
    for group in ("pipeline", "wap", "quarantine", "audit"):
        assert group in top
    assert all(c in run("pipeline", "--help").stdout for c in ("run", "validate", "schema"))
    assert all(c in run("wap", "--help").stdout for c in ("list", "publish", "abort"))
    assert all(c in run("quarantine", "--help").stdout for c in ("list", "replay"))
    assert all(c in run("audit", "--help").stdout for c in ("list", "metrics"))


def test_exit_codes_of_governance_errors() -> None:
    assert exit_code_for(BatchBlockedError("x")) == ExitCode.BLOCKED
    assert exit_code_for(PipelineConfigError("x")) == ExitCode.USAGE
    assert exit_code_for(StagedNotFoundError("x")) == ExitCode.NOT_FOUND
    assert exit_code_for(SourceError("x")) == ExitCode.USAGE


def test_parse_assignments() -> None:
    assert parse_assignments(["rider_age=NULL", " tip = tip * 0.1 ", "note=a = b"]) == \
        {"rider_age": "NULL", "tip": "tip * 0.1", "note": "a = b"}
    for bad in ("rider_age", "=1", "x="):
        with pytest.raises(typer.BadParameter):
            parse_assignments([bad])


def test_pipeline_validate(tmp_path: Path) -> None:
    path = write_pipeline(tmp_path, "http://127.0.0.1:9")
    doc = run_json("pipeline", "validate", str(path))
    assert doc["valid"] is True and doc["name"] == "trips-ingest"
    assert doc["target"]["path"] == str(tmp_path / "tables" / "trips") and doc["target"]["exists"] is False
    assert doc["source"]["path"] == str(tmp_path / "landing")
    assert doc["gate"]["semantic_check"] == "quarantine" and doc["gate"]["on_block"] == "keep"
    assert doc["suite"] == {"name": "trips_checks", "checks": [
        {"name": "no_big_tips", "kind": "sql", "policy": "block", "view": None}]}
    human = run("pipeline", "validate", str(path))
    assert human.exit_code == 0 and "valid" in human.stdout and "created on the first run" in human.stdout
    assert "no_big_tips" in human.stdout

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsource: {kind: files, path: in, format: json}\ntarget:\n  path: t\n  name: t\n")
    fails(run("pipeline", "validate", str(bad)), ExitCode.USAGE, "bad.yaml:3: target.record_key: field required")
    fails(run("pipeline", "run", str(bad)), ExitCode.USAGE, "bad.yaml:3: target.record_key")
    fails(run("pipeline", "validate", str(tmp_path / "missing.yaml")), ExitCode.USAGE, "cannot read the pipeline")
    (tmp_path / "suite.yaml").write_text("name: s\nchecks:\n  - {name: a, kind: nope}\n")
    fails(run("pipeline", "validate", str(path)), ExitCode.USAGE, "validators")


def test_missing_tables_exit_3(tmp_path: Path) -> None:
    nothing = str(tmp_path / "nothing")
    for args in (("wap", "list", nothing), ("wap", "publish", nothing, "20260101000000000"),
                 ("quarantine", "list", nothing), ("audit", "list", nothing), ("audit", "metrics", nothing)):
        fails(run(*args), ExitCode.NOT_FOUND, "error: no table at")
    path = write_pipeline(tmp_path, "http://127.0.0.1:9")
    fails(run("quarantine", "replay", str(path)), ExitCode.NOT_FOUND, "run the pipeline first")


# ---- end to end ---------------------------------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.integration
@pytest.mark.parametrize("where", ["local", "s3"])
def test_pipeline_wap_quarantine_audit(spark: SparkSession, tmp_path: Path, registry: RegistryClient,
                                       where: str, request: pytest.FixtureRequest) -> None:
    """The whole governance surface of the CLI, with the landing files, the table, its quarantine table, checkpoints,
    audit records and reports on a local disk, then on the S3 test server."""
    data = request.getfixturevalue("s3").table_uri("gov") if where == "s3" else None
    path = write_pipeline(tmp_path, registry.url, data=data)
    table = f"{data}/tables/trips" if data else str(tmp_path / "tables" / "trips")

    # pipeline run: one batch, then on until the kept batch stops it (exit 5, the summary still printed)
    doc = run_json("pipeline", "run", str(path), "--max-batches", "1")
    assert doc["pipeline"] == "trips-ingest" and doc["blocked"] is False
    assert [(r["decision"], r["conservation"]["published"]) for r in doc["records"]] == [("published", 10)]
    result = run("pipeline", "run", str(path), "--once")
    assert result.exit_code == ExitCode.BLOCKED, (result.stdout, result.stderr)
    assert "quarantined" in result.stdout and "kept" in result.stdout and "report: " in result.stdout
    assert "b-002.json" in result.stderr and "error: pipeline trips-ingest: files b-003.json" in result.stderr

    # wap: the kept batch, published after review
    kept = run_json("wap", "list", table)["kept"]
    assert len(kept) == 1 and kept[0]["failed_checks"] == ["no_big_tips"] and kept[0]["input_rows"] == 3
    instant = kept[0]["instant"]
    human = run("wap", "list", table)
    assert human.exit_code == 0 and instant in human.stdout
    doc = run_json("wap", "publish", table, instant, "--note", "tip confirmed")
    assert doc["decision"] == "published" and "tip confirmed" in doc["review"]
    fails(run("wap", "publish", table, instant), ExitCode.NOT_FOUND, "no staged commit")
    assert run_json("table", "read", table, "--where", "uuid = 'trip-0020'")["rows"][0]["tip"] == 250.0

    # the pipeline goes on after the reviewed batch; the next one is kept too, and aborted
    doc = run_json("pipeline", "run", str(path), code=ExitCode.BLOCKED)
    assert doc["blocked"] is True and [r["decision"] for r in doc["records"]] == ["kept"]
    second = doc["records"][0]["instant"]
    assert run_json("wap", "abort", table, second, "--note", "typo")["decision"] == "blocked"
    assert run_json("wap", "list", table)["kept"] == []
    assert "no staged commits" in run("wap", "list", table).stdout

    # quarantine: counts per status and check, at most --limit records
    doc = run_json("quarantine", "list", table)
    assert doc["total"] == 2 and doc["truncated"] is False
    assert doc["counts"] == [{"status": "quarantined", "check_name": "registry.semantic", "rows": 2}]
    assert sorted(json.loads(r["row_json"])["uuid"] for r in doc["records"]) == ["trip-0012", "trip-0014"]
    doc = run_json("quarantine", "list", table, "--limit", "1")
    assert len(doc["records"]) == 1 and doc["truncated"] is True
    assert run_json("quarantine", "list", table, "--status", "replayed")["total"] == 0
    assert run("quarantine", "list", table, "--status", "lost").exit_code == ExitCode.USAGE
    human = run("quarantine", "list", table)
    assert human.exit_code == 0 and "registry.semantic" in human.stdout

    # replay with a fix: published, marked; a second replay finds nothing
    fails(run("quarantine", "replay", str(path), "--set", "nope=1"), ExitCode.USAGE, "no such column")
    # (not `fails`: pyspark's SQLQueryContextLogger keeps the stderr of an earlier CliRunner invocation, and logging
    # reports its failure to write there with a traceback on the current stderr)
    bad_where = run("quarantine", "replay", str(path), "--where", "no_such_column = 1")
    assert bad_where.exit_code == ExitCode.USAGE and bad_where.stdout == ""
    assert "error: " in bad_where.stderr and "no_such_column" in bad_where.stderr
    doc = run_json("quarantine", "replay", str(path), "--set", "rider_age=NULL",
                   "--where", "check_name = 'registry.semantic'")
    assert (doc["picked"], doc["marked"], doc["decision"]) == (2, 2, "published")
    assert run_json("table", "read", table, "--where", "uuid = 'trip-0012'")["rows"][0]["rider_age"] is None
    assert run_json("quarantine", "replay", str(path))["picked"] == 0
    replayed = run_json("quarantine", "list", table, "--status", "replayed")
    assert replayed["total"] == 2 and {r["replay_outcome"] for r in replayed["records"]} == {"published"}

    # audit: the trail of every run and review, and metrics
    doc = run_json("audit", "list", table, "--limit", "50")
    decisions = [r["decision"] for r in doc["records"]]
    assert decisions == ["published", "quarantined", "kept", "published", "kept", "blocked", "published"]
    reports = [r["report"] for r in doc["records"] if r.get("report")]
    assert doc["total"] == 7 and len(reports) == 7
    if data is None:
        assert all(Path(r).exists() for r in reports)
    else:  # on S3 with the table: audit records are objects of their own, the reports beside them
        store = file_io_for(table)
        assert all(r.startswith(table + "/.hoodie/.aux/lakegate/reports/") for r in reports)
        assert all(store.exists(r.removeprefix("s3://")) for r in reports)
        assert len(store.list(store.join(".hoodie/.aux/lakegate/records"))) == 7
        assert not store.exists(store.join(".hoodie/.aux/lakegate/audit.jsonl"))
        assert not (tmp_path / "tables").exists() and not (tmp_path / "landing").exists()
    assert len(run_json("audit", "list", table, "--limit", "2")["records"]) == 2
    human = run("audit", "list", table)
    assert human.exit_code == 0 and "quarantined" in human.stdout and "7 of 7 runs" in human.stdout
    metrics = run("audit", "metrics", table)
    assert metrics.exit_code == 0
    assert 'lakegate_gate_runs_total{table="trips",decision="published"} 3' in metrics.stdout
    assert 'lakegate_gate_rows_quarantined_total{table="trips",decision="quarantined"} 2' in metrics.stdout


@pytest.mark.spark
@pytest.mark.integration
def test_pipeline_run_blocked_and_nothing_new(spark: SparkSession, tmp_path: Path,
                                              registry: RegistryClient) -> None:
    path = write_pipeline(tmp_path, registry.url, on_block="abort")
    for extra in sorted((tmp_path / "landing").glob("b-00[34].json")):
        extra.unlink()
    doc = run_json("pipeline", "run", str(path))
    assert [r["decision"] for r in doc["records"]] == ["published", "quarantined"]
    again = run("pipeline", "run", str(path))
    assert again.exit_code == 0 and "nothing new" in again.stdout
    (tmp_path / "landing" / "b-003.json").write_text(json.dumps(_row(40, DAY2, tip=999.0)) + "\n")
    doc = run_json("pipeline", "run", str(path), code=ExitCode.BLOCKED)
    assert [r["decision"] for r in doc["records"]] == ["blocked"] and doc["records"][0].get("instant") is None
