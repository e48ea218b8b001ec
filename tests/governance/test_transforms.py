"""Chained transforms (issue 21, acceptance 3) and the incremental window of secondary sources.

A pipeline's transform is SQL -> Python -> SQL: the Python step is a module in the pipeline's folder, gets the
previous step's output and a context (views, positions), and the last step reads ``{previous}``. A failing step is
named in the error and nothing is published; configuration mistakes are refused at load, naming file, line and step.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from governance.errors import PipelineConfigError, TransformError
from governance.pipeline import PipelineRunner, load_pipeline
from governance.secondary_sources import SecondarySource, SecondarySourceSpec, parse_duration, shift_instant
from governance.transforms import SqlStep, ViewSet, run_steps
from tablecore import Table, TableConfig

pytestmark = pytest.mark.spark

STEPS_MODULE = '''
from pyspark.sql import functions as F


def band(df, ctx):
    """Adds the fare band and the batch's position (from the context), and a count of the target's rows."""
    before = ctx.view("target").count()
    return (df.withColumn("band", F.when(F.col("fare") >= 20, "high").otherwise("low"))
              .withColumn("batch_file", F.lit(ctx.position["last_file"]))
              .withColumn("target_rows_before", F.lit(before)))


def boom(df, ctx):
    raise ValueError("no fares today")


def not_a_frame(df, ctx):
    return 42
'''

PIPELINE = """
name: chain
source: {kind: files, path: landing, format: json}
transform:
  - name: paid
    sql: SELECT uuid, driver, CAST(fare AS DOUBLE) AS fare FROM {source} WHERE fare > 0
  - name: bands
    python: chain_steps:FUNCTION
  - name: per_band
    sql: |
      SELECT concat(driver, '/', band) AS id, driver, band, count(*) AS trips, sum(fare) AS fares,
             max(batch_file) AS batch_file, max(target_rows_before) AS target_rows_before
      FROM {previous} GROUP BY driver, band
target: {path: tables/bands, name: bands, record_key: [id]}
"""


def _pipeline(tmp_path: Path, function: str = "band", body: str = PIPELINE) -> Path:
    (tmp_path / "chain_steps.py").write_text(STEPS_MODULE)
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    rows = [{"uuid": f"t{i}", "driver": f"d{i % 2}", "fare": [0, 8, 25, 40][i % 4]} for i in range(12)]
    (landing / "batch-000.json").write_text("\n".join(json.dumps(r) for r in rows))
    path = tmp_path / "chain.yaml"
    path.write_text(body.replace("FUNCTION", function))
    return path


def test_sql_python_sql_chain(spark: SparkSession, tmp_path: Path) -> None:
    runner = PipelineRunner(load_pipeline(_pipeline(tmp_path)), spark)
    [record] = runner.run_once()
    assert record.decision.value == "published"
    got = {r["id"]: (r["trips"], r["fares"], r["batch_file"], r["target_rows_before"])
           for r in runner.table.read().collect()}
    # step 1 drops the zero fares; d0 keeps three trips of 25, d1 three of 8 and three of 40
    assert got == {"d0/high": (3, 75.0, "batch-000.json", 0), "d1/low": (3, 24.0, "batch-000.json", 0),
                   "d1/high": (3, 120.0, "batch-000.json", 0)}


@pytest.mark.parametrize(("function", "message"), [
    ("boom", r"transform step 2 'bands' \(python chain_steps:boom\): ValueError: no fares today"),
    ("not_a_frame", r"transform step 2 'bands' \(python chain_steps:not_a_frame\): returned int, not a Spark "
                    r"DataFrame"),
])
def test_a_failing_step_is_named_and_nothing_is_published(spark: SparkSession, tmp_path: Path, function: str,
                                                          message: str) -> None:
    runner = PipelineRunner(load_pipeline(_pipeline(tmp_path, function)), spark)
    with pytest.raises(TransformError, match=message):
        runner.run_once()
    assert runner.table.latest_instant() is None and runner.checkpoint() is None


def test_a_sql_step_that_does_not_resolve_is_named(spark: SparkSession, tmp_path: Path) -> None:
    body = PIPELINE.replace("sum(fare) AS fares", "sum(fair) AS fares")
    runner = PipelineRunner(load_pipeline(_pipeline(tmp_path, body=body)), spark)
    with pytest.raises(TransformError, match=r"transform step 3 'per_band' \(sql\): AnalysisException: .*fair"):
        runner.run_once()


@pytest.mark.parametrize(("edit", "message"), [
    (("chain_steps:FUNCTION", "no_such_module:f"), r"chain.yaml: pipeline chain: transform step 2 'bands' \(python "
                                                   r"no_such_module:f\): cannot import no_such_module"),
    (("FUNCTION", "missing"), r"transform step 2 'bands' .*has no function 'missing'"),
    (("chain_steps:FUNCTION", "not a path"), r"chain.yaml:8: transform.1.python: 'not a path' is not an import "
                                             r"path"),
    (("FROM {previous} GROUP", "FROM {source} GROUP"), r"chain.yaml:10: transform.2.sql: transform step 3 "
                                                       r"'per_band' \(sql\): a later step must read \{previous\}"),
    (("FROM {source} WHERE", "FROM {previous} WHERE"), r"chain.yaml:6: transform.0.sql: transform step 1 'paid' "
                                                       r"\(sql\): unknown view\(s\) \{previous\}"),
])
def test_configuration_mistakes_are_refused_at_load(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    path = _pipeline(tmp_path, body=PIPELINE.replace(*edit))
    with pytest.raises(PipelineConfigError, match=message):
        load_pipeline(path)


def test_sources_are_checked_at_load(tmp_path: Path) -> None:
    base = PIPELINE.replace("FUNCTION", "band")
    cases = {
        "sources: {target: {path: x, mode: snapshot}}\n": r"s.yaml:\d+: sources.target: a source name must be",
        "sources: {s: {path: x, mode: snapshot, lookback: 1h}}\n": r"lookback is for mode incremental",
        "sources: {s: {path: x, mode: incremental, lookback: soon}}\n": r"'soon' is not a duration",
        "sources: {s: {path: x, mode: affected_partitions}}\n": r"needs partitions_from",
        "sources: {s: {path: x, mode: affected_partitions, partitions_from: {dt: dt}, affected_by: [t]}}\n":
            r"sources.s.affected_by: 't' is not the main source",
        "sources: {s: {path: '{target}', mode: incremental}}\n": r"\{target\} can be read as a snapshot",
    }
    for text, message in cases.items():
        path = tmp_path / "s.yaml"
        path.write_text(base.replace("target: {path", text + "target: {path"))
        with pytest.raises(PipelineConfigError, match=message):
            load_pipeline(path)


def test_durations_and_instant_arithmetic() -> None:
    assert parse_duration("24h") == dt.timedelta(hours=24)
    assert parse_duration("1h30m") == dt.timedelta(minutes=90)
    assert parse_duration("500ms") == dt.timedelta(milliseconds=500)
    for bad in ("", "h", "10", "1x", "-1h"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration(bad)
    assert shift_instant("20261127010203004", dt.timedelta(hours=2)) == "20261126230203004"
    assert shift_instant("20261127010203", dt.timedelta(milliseconds=1)) == "20261127010202999"


def _no_views(name: str) -> DataFrame:
    raise AssertionError(f"an incremental source maps no view ({name})")


def test_incremental_window_starts_at_the_previous_end_less_the_lookback(spark: SparkSession, tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "status"), TableConfig(name="status", record_key=["k"], ordering_field="v"),
                         spark=spark)
    table.upsert(spark.createDataFrame([("a", 1), ("b", 1)], "k string, v int"))
    first_end = SecondarySource("s", SecondarySourceSpec(path="x", mode="incremental"), table, None).end
    assert first_end is not None
    table.upsert(spark.createDataFrame([("b", 2), ("c", 2)], "k string, v int"))

    def keys(spec: SecondarySourceSpec, previous: str | None) -> list[tuple[str, int]]:
        source = SecondarySource("s", spec, table, previous)
        return sorted((r["k"], r["v"]) for r in source.read(_no_views).collect())

    incremental = SecondarySourceSpec(path="x", mode="incremental")
    assert keys(incremental, first_end) == [("b", 2), ("c", 2)]  # only what the previous batch did not read
    assert keys(incremental, None) == [("a", 1), ("b", 2), ("c", 2)]  # a first batch reads every change
    looking_back = SecondarySourceSpec(path="x", mode="incremental", lookback="1h")
    assert keys(looking_back, first_end) == [("a", 1), ("b", 2), ("c", 2)]  # the first commit is within the hour
    latest = SecondarySource("s", incremental, table, None).end
    assert latest is not None and keys(incremental, latest) == []  # nothing new since the previous batch


def test_a_view_read_by_a_job_and_by_sql_steps_is_computed_once(spark: SparkSession, tmp_path: Path) -> None:
    """A persisted view (the batch, when its rows also choose a secondary source's partitions) is computed once for
    a job over it and two SQL steps that read it three times; its temporary views live until the batch ends (dropping
    one uncaches its plan). Without persisting, the same work computes it three times."""
    marks = str(tmp_path / "reads")
    Path(marks).mkdir()
    rows = pa.table({"k": [f"k{i}" for i in range(40)], "dt": [f"2026-01-0{i % 3 + 1}" for i in range(40)]})

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import os
        import uuid
        open(os.path.join(marks, uuid.uuid4().hex), "w").close()  # one mark per task that computes the view
        yield from batches

    def reads() -> int:
        return len(list(Path(marks).iterdir()))

    def source() -> DataFrame:
        return spark.createDataFrame(rows).mapInArrow(read, "k string, dt string")

    source().collect()
    once = reads()
    assert once >= 1
    steps = [SqlStep(sql="SELECT k, dt FROM {source} WHERE dt <> '2026-01-01' "
                         "UNION ALL SELECT k, dt FROM {source} WHERE dt = '2026-01-01'"),
             SqlStep(sql="SELECT dt, count(*) AS n FROM {previous} GROUP BY dt")]
    for persist, computed in ((("source",), once), ((), 3 * once)):
        before = reads()
        views = ViewSet({"source": source}, persist=persist)
        assert sorted(r["dt"] for r in views.get("source").select("dt").distinct().collect()) == \
            ["2026-01-01", "2026-01-02", "2026-01-03"]
        out = run_steps(steps, views, lambda label: None, {}, spark)  # type: ignore[arg-type,return-value]
        assert {r["dt"]: r["n"] for r in out.collect()} == {"2026-01-01": 14, "2026-01-02": 13, "2026-01-03": 13}
        assert reads() - before == computed
        views.close()
        assert not [t.name for t in spark.catalog.listTables() if t.name.startswith("__lakegate_")]


def test_a_step_marked_persist_is_computed_once_for_the_steps_after_it(spark: SparkSession, tmp_path: Path) -> None:
    """A step whose output the next step reads twice in ways Spark does not share (once whole, once only its keys
    for a semi-join: two plans of the aggregate) computes its input twice; marked ``persist``, once. Closing the batch
    releases what it kept."""
    marks = tmp_path / "reads"
    marks.mkdir()
    rows = pa.table({"k": [f"k{i}" for i in range(40)], "dt": [f"2026-01-0{i % 3 + 1}" for i in range(40)]})
    where = str(marks)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import os
        import uuid
        open(os.path.join(where, uuid.uuid4().hex), "w").close()  # one mark per task that computes the source
        yield from batches

    def reads() -> int:
        return len(list(marks.iterdir()))

    def source() -> DataFrame:
        return spark.createDataFrame(rows).mapInArrow(read, "k string, dt string")

    source().collect()
    once = reads()
    counted = []

    def persisted() -> int:
        return int(spark.sparkContext._jsc.getPersistentRDDs().size())

    for persist in (True, False):
        # both with a WITH clause: a persisted plan would not be found again under the second step's CTE numbering
        steps = [SqlStep(sql="WITH s AS (SELECT * FROM {source}) SELECT dt, count(*) AS n FROM s GROUP BY dt",
                         persist=persist),
                 SqlStep(sql="WITH small AS (SELECT dt FROM {previous} WHERE n < 14) "
                             "SELECT dt, n FROM {previous} WHERE dt IN (SELECT dt FROM small)")]
        views = ViewSet({"source": source})
        before, kept = reads(), persisted()
        out = run_steps(steps, views, lambda label: None, {}, spark)  # type: ignore[arg-type,return-value]
        assert sorted((r["dt"], r["n"]) for r in out.collect()) == [("2026-01-02", 13), ("2026-01-03", 13)]
        counted.append(reads() - before)
        assert persisted() == kept + persist
        views.close()
        assert persisted() == kept
    assert counted[0] == once < counted[1]


def test_a_persist_step_that_fails_while_kept_is_named(spark: SparkSession) -> None:
    """Keeping a step's output runs its shuffle stages when the step ends (adaptive execution plans the checkpoint
    there): a failure in them names the step, as any failure of a step does."""
    source = spark.createDataFrame(pa.table({"dt": ["2026-01-01", "2026-01-02"]}))
    steps = [SqlStep(name="sums", persist=True,
                     sql="SELECT dt, count(*) AS n FROM {source} WHERE raise_error('no sums today') IS NULL "
                         "GROUP BY dt"),
             SqlStep(sql="SELECT * FROM {previous}")]
    views = ViewSet({"source": lambda: source})
    try:
        with pytest.raises(TransformError, match=r"transform step 1 'sums' \(sql\): .*no sums today"):
            run_steps(steps, views, lambda label: None, {}, spark)  # type: ignore[arg-type,return-value]
    finally:
        views.close()
