"""The gate's audit of ``{changes}`` counted inside the write job: same verdicts as an audit of its own, no second
read of the written rows when nothing fails, and a fallback whenever the written rows may differ from the view."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.classic.dataframe import DataFrame

import validators.onepass as onepass
from governance.audit import AuditRecord, Decision
from governance.errors import ConservationError
from governance.gate import Gate, _Run
from governance.gate_counts import RowCounter
from schema_registry import RegistryClient
from tablecore import StagedCommit, Table, TableConfig
from tests.governance.conftest import TRIPS_SCHEMA, trip, trips
from validators import ExpectValue, SchemaCheck, SchemaRef, SemanticCheck, SqlCheck, Suite

pytestmark = pytest.mark.spark


def _suite(*extra: Any) -> Suite:
    schema = SchemaRef(inline=TRIPS_SCHEMA)
    return Suite(name="changes_suite", sample_size=3, checks=(
        SchemaCheck(name="structure", avro=schema, view="changes"),
        SemanticCheck(name="semantics", avro=schema, view="changes"),
        SqlCheck(name="row_count", form="single_value", query="SELECT count(*) FROM {changes}",
                 expect=ExpectValue(min=1)),
        SqlCheck(name="avg_fare", form="single_value", query="SELECT avg(fare) FROM {changes}",
                 expect=ExpectValue(min=0, max=1000)),
        SqlCheck(name="no_big_tips", form="zero_rows", query="SELECT uuid, tip FROM {changes} WHERE tip > 100"),
        *extra,
    ))


def _table(spark: SparkSession, path: Path, mode: str = "COMMIT_TIME_ORDERING") -> Table:
    return Table.create(str(path), TableConfig(name="trips", record_key=["uuid"], ordering_field="ts",
                                               partition_fields=["dt"], table_type="MERGE_ON_READ",
                                               merge_mode=mode), spark=spark)


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The row count of every pass the suite ran on its own (``onepass.evaluate``)."""
    seen: list[int] = []
    original = onepass.evaluate

    def spy(*a: Any, **kw: Any) -> onepass.RowPass:
        out = original(*a, **kw)
        seen.append(out.total_rows)
        return out

    monkeypatch.setattr(onepass, "evaluate", spy)
    return seen


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The instants whose ``{changes}`` view was planned (``StagedCommit.changes``)."""
    seen: list[str] = []
    original = StagedCommit.changes

    def spy(self: StagedCommit) -> Any:
        seen.append(self.instant)
        return original(self)

    monkeypatch.setattr(StagedCommit, "changes", spy)
    return seen


def _verdicts(record: AuditRecord) -> dict[str, tuple[str, int, int | None, str]]:
    return {c.name: (c.status, c.failing_rows, c.total_rows, c.message) for c in record.checks}


def _both(spark: SparkSession, tmp_path: Path, suite: Suite, first: list[Any],
          batch: list[Any]) -> tuple[AuditRecord, AuditRecord]:
    """The same two batches through a gate on a commit-time table (inline audit) and on an event-time table (the
    audit's own pass: an incoming row may lose to a stored one there)."""
    out = []
    for mode in ("COMMIT_TIME_ORDERING", "EVENT_TIME_ORDERING"):
        gate = Gate(_table(spark, tmp_path / mode, mode), suite)
        assert gate.write(trips(spark, first)).decision == Decision.PUBLISHED
        out.append(gate.write(trips(spark, batch)))
    return out[0], out[1]


def test_a_clean_batch_is_audited_inside_the_write(spark: SparkSession, tmp_path: Path, passes: list[int],
                                                   planned: list[str]) -> None:
    first = [trip(i) for i in range(6)]
    batch = [trip(i, ts=5_000 + i, tip=1.5) for i in range(3, 9)]  # 3 updates, 3 inserts
    passes.clear()
    inline, own = _both(spark, tmp_path, _suite(), first, batch)
    assert inline.decision == own.decision == Decision.PUBLISHED
    assert inline.instant not in planned and own.instant in planned  # the staged files were not even listed
    assert _verdicts(inline) == _verdicts(own)
    assert _verdicts(inline)["row_count"][0] == "pass" and "6" in _verdicts(inline)["row_count"][3]
    # the event-time gate ran a pass of its own over {changes} for each batch (6 rows each); the commit-time gate none
    assert passes == [6, 6]


def test_failures_get_their_samples_from_a_pass_of_their_own(spark: SparkSession, tmp_path: Path,
                                                             passes: list[int]) -> None:
    first = [trip(i) for i in range(4)]
    batch = [trip(i, ts=5_000 + i, age=900 if i == 5 else 30, tip=150.0 if i == 6 else 1.0) for i in range(2, 8)]
    passes.clear()
    inline, own = _both(spark, tmp_path, _suite(), first, batch)
    assert inline.decision == own.decision == Decision.BLOCKED
    assert _verdicts(inline) == _verdicts(own)
    failed = {n: v[1] for n, v in _verdicts(inline).items() if v[0] == "fail"}
    assert failed == {"semantics": 1, "no_big_tips": 1}
    assert "trip-00005" in Path(inline.report or "").read_text()  # the sample of the failing row
    assert passes == [6, 4, 6]  # commit time: counted inline, then a pass for the samples; event time: 2 passes


def test_deduplicated_rows_are_not_counted_inline(spark: SparkSession, tmp_path: Path, passes: list[int]) -> None:
    table = _table(spark, tmp_path / "t")
    gate = Gate(table, _suite())
    rows = [trip(i) for i in range(5)] + [trip(2, ts=9_000, tip=3.0)]  # key 2 twice: 5 rows are written
    passes.clear()
    record = gate.write(trips(spark, rows))
    assert record.decision == Decision.PUBLISHED
    assert record.conservation.deduplicated == 1
    assert "5" in _verdicts(record)["row_count"][3]
    assert passes == [5]


def test_a_folded_check_failing_at_run_time_does_not_fail_the_write(spark: SparkSession, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    # folded (a cast inside sum), it fails at run time under ANSI: USD is no int
    boom = SqlCheck(name="boom", form="single_value", query="SELECT sum(CAST(currency AS INT)) FROM {changes}",
                    expect=ExpectValue(min=0))
    table = _table(spark, tmp_path / "t")
    gate = Gate(table, _suite(boom))
    with caplog.at_level(logging.WARNING, logger="governance.gate"):
        record = gate.write(trips(spark, [trip(i) for i in range(4)]))
    assert "writing again without it" in caplog.text  # the write job carrying the check failed, then the retry
    verdicts = _verdicts(record)
    assert verdicts["boom"][0] == "fail" and "error" in verdicts["boom"][3]
    assert verdicts["semantics"][0] == "pass" and verdicts["structure"][0] == "pass"
    assert record.decision == Decision.BLOCKED
    assert table.staged() == []


def test_the_registry_checks_of_the_batch_are_counted_inside_the_write_too(
        spark: SparkSession, tmp_path: Path, registry: RegistryClient, passes: list[int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def run(path: Path, batch: list[Any]) -> AuditRecord:
        gate = Gate(_table(spark, path), _suite(), registry=registry)
        return gate.write(trips(spark, batch))

    clean = [trip(i) for i in range(5)]
    dirty = [trip(i, age=900 if i == 2 else 30) for i in range(5)]  # fails registry.semantic on {batch}
    passes.clear()
    inline = [run(tmp_path / "a", clean), run(tmp_path / "b", dirty)]
    assert passes == [5, 5]  # only the dirty batch's, for the samples: its age fails on {batch} and on {changes}
    assert inline[0].decision == Decision.PUBLISHED and inline[1].decision == Decision.BLOCKED
    assert {"registry.schema", "registry.semantic"} <= set(_verdicts(inline[0]))
    # the same batches with every view audited by a pass of its own
    monkeypatch.setattr(_Run, "_inline_passes", lambda self, suite, batch_too: {})
    passes.clear()
    own = [run(tmp_path / "c", clean), run(tmp_path / "d", dirty)]
    assert passes == [5, 5, 5, 5]  # {batch} and {changes} of each
    assert [_verdicts(r) for r in inline] == [_verdicts(r) for r in own]
    assert _verdicts(inline[1])["registry.semantic"][:2] == ("fail", 1)


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The result of every ``DataFrame.count`` (a Spark job reading its rows; the classic DataFrame's, which
    every DataFrame of a local session is)."""
    seen: list[int] = []
    original = DataFrame.count

    def spy(self: DataFrame) -> int:
        n = original(self)
        seen.append(n)
        return n

    monkeypatch.setattr(DataFrame, "count", spy)
    return seen


def test_the_batch_is_counted_inside_the_write(spark: SparkSession, tmp_path: Path, counts: list[int]) -> None:
    table = _table(spark, tmp_path / "t")
    gate = Gate(table, _suite())
    rows = [trip(i) for i in range(5)] + [trip(2, ts=9_000, tip=3.0)]  # key 2 twice
    record = gate.write(trips(spark, rows))
    assert counts == []  # rows_in was observed in the write job: no job of its own read the batch
    c = record.conservation
    assert (c.rows_in, c.published, c.deduplicated) == (6, 5, 1)
    assert record.decision == Decision.PUBLISHED


def test_the_observed_count_is_checked_against_the_writers(spark: SparkSession, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # a gate whose count disagrees with the writer's own count of the rows it received publishes nothing
    table = _table(spark, tmp_path / "t")
    Gate(table, _suite()).write(trips(spark, [trip(i) for i in range(3)]))
    before = table.read().count()
    monkeypatch.setattr(RowCounter, "rows", property(lambda self: 7))
    with pytest.raises(ConservationError, match="counted 7 rows in, the writer received 4"):
        Gate(table, _suite()).write(trips(spark, [trip(i) for i in range(3, 7)]))
    assert table.read().count() == before and table.staged() == []


def test_a_write_with_no_job_counts_the_batch_itself(spark: SparkSession, tmp_path: Path, counts: list[int]) -> None:
    table = _table(spark, tmp_path / "t")
    record = Gate(table, _suite()).write(trips(spark, [trip(1)]).limit(0))
    assert counts[:1] == [0]  # the writer ran no job (nothing to write): the gate counted the batch itself
    assert (record.conservation.rows_in, record.decision) == (0, Decision.BLOCKED)  # row_count needs >= 1 row
