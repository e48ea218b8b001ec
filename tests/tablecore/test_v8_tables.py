"""Tables of version 8 (Hudi 1.0) that we write: every write operation and table service, each state read by hudi-rs
(the independent oracle) exactly like our reader and a model of the rows; the timeline in Hudi 1.x's layout
(``.hoodie/timeline/``, completion times, Avro commit metadata, log files named by their delta commit); incremental
pulls by completion time, including a staged commit published after a later one (the late-publish hole of
version 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pytest

from tablecore import CleanedRangeError, Table, TableConfig
from tablecore.exceptions import ConfigError
from tablecore.format.log_format import LogFileName
from tablecore.format.lsm_timeline import decode_data_file
from tests.tablecore.oracle import assert_same_as_hudi, hudi_incremental, hudi_snapshot, spark_rows

pytestmark = pytest.mark.spark

DDL = "id int, part string, ts long, val string"
TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


def _v8(spark: Any, path: str, table_type: str, **kw: Any) -> Table:
    cfg = TableConfig(name="v8", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                      table_type=table_type, table_version=8, **kw)
    return Table.create(path, cfg, spark=spark)


def _df(spark: Any, rows: list[tuple[int, str, int, str]]) -> Any:
    return spark.createDataFrame(rows, DDL)


class Model:
    """The rows the table should hold: key -> (part, ts, val)."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[str, int, str]] = {}

    def upsert(self, rows: list[tuple[int, str, int, str]]) -> None:
        for i, p, ts, v in rows:
            cur = self.rows.get(i)
            if cur is None or ts >= cur[1]:
                self.rows[i] = (p, ts, v)

    def overwrite(self, rows: list[tuple[int, str, int, str]], *, table: bool) -> None:
        parts = {p for _, p, _, _ in rows}
        self.rows = {} if table else {i: r for i, r in self.rows.items() if r[0] not in parts}
        self.upsert(rows)

    def expected(self) -> list[tuple[int, str, int, str]]:
        return sorted((i, *r) for i, r in self.rows.items())


def _state(t: Table) -> list[tuple[int, str, int, str]]:
    return sorted((r["id"], r["part"], r["ts"], r["val"]) for r in spark_rows(t.read()))


def _check(t: Table, model: Model, *, full: bool = False) -> None:
    """Our snapshot is the model's and hudi-rs's; ``full``: also every as_of and incremental step (costly)."""
    assert _state(t) == model.expected()
    if full:
        assert_same_as_hudi(t)
    else:
        assert spark_rows(t.read()) == hudi_snapshot(t.uri)


@pytest.mark.parametrize("table_type", TYPES)
def test_every_operation_and_service_on_a_version_8_table_reads_the_same_through_hudi_rs(
        table_type: str, tmp_path: Path, spark: Any) -> None:
    t = _v8(spark, str(tmp_path / "t"), table_type)
    m = Model()

    def write(op: str, rows: list[tuple[int, str, int, str]]) -> str:
        result = getattr(t, op)(_df(spark, rows))
        if op in ("upsert", "insert", "bulk_insert"):
            m.upsert(rows)
        elif op == "delete":
            for i, *_ in rows:
                m.rows.pop(i, None)
        else:
            m.overwrite(rows, table=op == "insert_overwrite_table")
        _check(t, m)
        return str(result.instant)

    first = write("insert", [(i, f"p{i % 3}", 1, "a") for i in range(12)])
    write("upsert", [(i, f"p{i % 3}", 2, "b") for i in range(0, 12, 2)] + [(20, "p2", 2, "new")])
    write("delete", [(1, "p1", 3, ""), (4, "p1", 3, "")])
    if table_type == "MERGE_ON_READ":  # each delta commit writes its own log files, named by its instant
        deltas = {i.instant for i in t.timeline() if i.action == "deltacommit"}
        logs = [LogFileName.parse(p.name) for p in Path(t.path).rglob(".*.log.*")]
        assert logs and {lg.base_instant for lg in logs if lg} <= deltas - {first}
    write("upsert", [(3, "p0", 1, "stale"), (5, "p2", 4, "c")])  # a stale update loses (event-time ordering)
    if table_type == "MERGE_ON_READ":
        assert t.compact() is not None
        _check(t, m, full=True)
    write("insert_overwrite", [(30, "p0", 5, "over"), (31, "p0", 5, "over")])
    write("bulk_insert", [(40, "p3", 6, "bulk"), (41, "p3", 6, "bulk")])
    write("bulk_insert", [(42, "p3", 6, "bulk")])  # a second small file group in p3 to cluster
    assert t.cluster(partitions=["part=p3"]) is not None
    _check(t, m, full=True)
    sp = t.latest_instant()
    assert sp is not None
    t.savepoint(sp)
    saved = m.expected()
    write("upsert", [(40, "p3", 7, "after-savepoint")])
    rolled = write("upsert", [(41, "p3", 8, "rolled-back")])
    t.rollback(rolled)
    m.rows[41] = ("p3", 6, "bulk")
    _check(t, m)
    t.restore(sp)
    assert _state(t) == saved
    m.rows = {r[0]: (r[1], r[2], r[3]) for r in saved}
    _check(t, m)
    t.clean(retain_commits=1)
    _check(t, m, full=True)
    write("insert_overwrite_table", [(50, "p0", 9, "table")])
    # time travel is by requested time: the savepointed instant stays readable past the clean, the first one is not
    assert sorted((r["id"], r["val"]) for r in spark_rows(t.read(as_of=sp))) == [(r[0], r[3]) for r in saved]
    with pytest.raises(CleanedRangeError):
        t.read(as_of=first)

    # the timeline is Hudi 1.x's: instant files under .hoodie/timeline, completed ones named <requested>_<completed>
    names = sorted(f.name for f in t.io.list(t.io.join(".hoodie", "timeline")))
    completed = [n for n in names if "_" in n and "." in n]
    assert completed and all(n.split(".")[0].split("_")[0] < n.split(".")[0].split("_")[1] for n in completed)
    assert not [f for f in t.io.list(t.io.join(".hoodie")) if f.name.endswith((".commit", ".deltacommit"))]
    for n in completed:
        if n.endswith((".commit", ".deltacommit", ".replacecommit")):
            with open(Path(t.path, ".hoodie", "timeline", n), "rb") as fh:
                assert fastavro.reader(fh).writer_schema["name"].endswith(("CommitMetadata",))
    props = Path(t.path, ".hoodie", "hoodie.properties").read_text()
    assert "hoodie.table.version=8" in props and "hoodie.timeline.layout.version=2" in props


def test_a_staged_commit_published_after_a_later_commit_reaches_the_next_incremental_pull(
        tmp_path: Path, spark: Any) -> None:
    """Acceptance 3 on version 8: A staged, B committed, A published; a consumer that read up to B sees A next."""
    t = _v8(spark, str(tmp_path / "t"), "COPY_ON_WRITE")
    t.insert(_df(spark, [(0, "p0", 1, "base")]))
    a = t.upsert(_df(spark, [(1, "p1", 1, "A")]), stage=True)
    b = t.upsert(_df(spark, [(2, "p2", 1, "B")]))
    assert a.instant < b.instant
    b_done = next(i.completed for i in t.timeline() if i.instant == b.instant)
    assert b_done is not None
    position = b_done  # the consumer has read everything completed up to B
    assert [r["val"] for r in spark_rows(t.read_changes(end=position))] == ["base", "B"]
    a.publish()
    assert a.published_behind is None  # completion times: nothing to warn about
    a_done = next(i.completed for i in t.timeline() if i.instant == a.instant)
    assert a_done is not None and a_done > b_done
    pulled = spark_rows(t.read_changes(start=position))
    assert [(r["val"], r["_hoodie_commit_time"]) for r in pulled] == [("A", a.instant)]
    assert pulled == hudi_incremental(t.uri, position, a_done)


@pytest.mark.parametrize("table_type", TYPES)
def test_archival_moves_old_instants_into_the_lsm_history(table_type: str, tmp_path: Path, spark: Any) -> None:
    """Version 8 archives into .hoodie/timeline/history as Hudi 1.x does (data file, manifest, _version_); the
    snapshot stays what hudi-rs reads; incremental reads into the archived range raise instead of returning part."""
    t = _v8(spark, str(tmp_path / "t"), table_type)
    m = Model()
    for n in range(6):
        rows = [(i, f"p{i % 2}", n, f"v{n}") for i in range(n, n + 3)]
        t.upsert(_df(spark, rows))
        m.upsert(rows)
    if table_type == "MERGE_ON_READ":
        assert t.compact() is not None  # archival stops before delta commits whose logs a latest slice still needs
    before = [i for i in t.timeline() if i.state == "completed"]
    moved = t.archive(keep_min=2, keep_max=3)
    assert moved > 0
    history = Path(t.path, ".hoodie", "timeline", "history")
    data = sorted(history.glob("*.parquet"))
    assert len(data) == 1 and (history / "_version_").read_text() == "1"
    manifest = json.loads((history / "manifest_1").read_text())
    assert manifest == {"files": [{"fileName": data[0].name, "fileLen": data[0].stat().st_size}]}
    rows = decode_data_file(data[0].read_bytes())
    after = {i.instant for i in t.timeline()}
    archived = [i for i in before if i.instant not in after]
    assert [(r.instant, r.completion, r.action) for r in rows] == [(i.instant, i.completed, i.action) for i in archived]
    assert all(r.metadata for r in rows)
    _check(t, m)
    with pytest.raises(CleanedRangeError):
        t.read_changes(start=archived[0].completed)
    for n in range(6, 9):
        t.upsert(_df(spark, [(n, f"p{n % 2}", n, f"v{n}")]))
        m.upsert([(n, f"p{n % 2}", n, f"v{n}")])
    if table_type == "MERGE_ON_READ":
        t.compact()
    assert t.archive(keep_min=2, keep_max=3) > 0
    assert (history / "_version_").read_text() == "2"
    assert len(json.loads((history / "manifest_2").read_text())["files"]) == 2
    _check(t, m)
    active = [i for i in t.timeline() if i.state == "completed" and i.action in ("commit", "deltacommit")]
    start, end = active[-2].completed, active[-1].completed
    assert start is not None and end is not None
    assert spark_rows(t.read_changes(start=start, end=end)) == hudi_incremental(t.uri, start, end)


def test_writing_a_version_9_table_is_refused(tmp_path: Path, spark: Any) -> None:
    with pytest.raises(ConfigError, match="9"):
        Table.create(str(tmp_path / "t9"), TableConfig(name="v9", record_key=["id"], table_version=9), spark=spark)
