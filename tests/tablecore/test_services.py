"""Table services: clean (both policies), savepoint / restore and timeline archival, on copy-on-write and
merge-on-read tables, checked file by file and through hudi-rs; cleaned and archived ranges raise
``CleanedRangeError`` instead of returning partial data."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from tablecore import CleanedRangeError, InstantNotFoundError, RollbackError, Table, TableConfig
from tablecore.format.archived_timeline import ArchivedFile, decode_archive, encode_archive, last_archived_instant
from tablecore.format.commit_metadata import CommitMetadata, WriteStat
from tablecore.format.file_view import files_from_listing, list_table_files
from tablecore.format.instant import Action, Instant, State
from tablecore.format.instant_avro import decode_instant_avro
from tablecore.format.service_metadata import read_savepoint_files, restore_plan
from tablecore.format.timeline import InstantsOrEarlier, Timeline
from tablecore.services.archive import archived_files
from tablecore.services.clean import CleanPolicy, plan_clean
from tablecore.services.rollback import rollback_instant
from tests.tablecore.oracle import hudi_incremental, hudi_read_optimized, hudi_snapshot, spark_rows

DDL = "id int, part string, ts long, val string"
TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


# ---- helpers ---------------------------------------------------------------------------------------------------------

def _table(spark: Any, path: str, table_type: str) -> Table:
    cfg = TableConfig(name="svc", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                      table_type=table_type)
    return Table.create(path, cfg, spark=spark)


def _rows(spark: Any, ids: list[int], version: int, part: str | None = None) -> Any:
    return spark.createDataFrame([(i, part or f"p{i % 2}", version, f"v{version}-{i}") for i in ids], DDL)


@dataclass
class History:
    """A table with several file slices in group p0 and one untouched slice in group p1."""

    table: Table
    writes: list[str] = field(default_factory=list)  # completed write instants, oldest first


def _history(spark: Any, path: str, table_type: str) -> History:
    """COW: w1 insert, w2..w4 upserts of p0 (each a new p0 slice). MOR: w1 insert, d2 upsert (log), c3 compaction,
    d4 upsert, c5 compaction, d6 upsert: p0 slices w1, c3, c5 with logs; p1 keeps its w1 slice."""
    t = _table(spark, path, table_type)
    h = History(t)
    h.writes.append(t.insert(_rows(spark, list(range(6)), 0)).instant)
    for version, ids in enumerate([[0, 2], [4], [0]], start=1):
        h.writes.append(t.upsert(_rows(spark, ids, version)).instant)
        if table_type == "MERGE_ON_READ" and version < 3:
            r = t.compact()
            assert r is not None
            h.writes.append(r.instant)
    assert [i.instant for i in t.timeline() if i.state == "completed"] == h.writes
    return h


def data_files(t: Table) -> dict[str, str]:
    """Relative path -> slice base instant of every base and log file."""
    files = list_table_files(t.io)
    out = {b.relative_path: b.instant for b in files.bases}
    out.update({lg.relative_path: lg.base_instant for lg in files.logs})
    return out


def timeline_files(t: Table) -> list[str]:
    return sorted(f.name for f in t.io.list(t.io.join(".hoodie")))


def assert_snapshot_same_as_hudi(t: Table, expected: list[dict[str, Any]] | None = None) -> None:
    """The latest snapshot (and read-optimized view) read the same through hudi-rs as through our reader."""
    ours = spark_rows(t.read())
    assert ours == hudi_snapshot(t.uri), "snapshot differs from hudi-rs"
    assert spark_rows(t.read(view="read_optimized")) == hudi_read_optimized(t.uri), "read-optimized view differs"
    if expected is not None:
        assert ours == expected


def assert_as_of_same_as_hudi(t: Table, instant: str, expected: list[dict[str, Any]] | None = None) -> None:
    ours = spark_rows(t.read(as_of=instant))
    assert ours == hudi_snapshot(t.uri, instant), f"as_of {instant} differs from hudi-rs"
    if expected is not None:
        assert ours == expected


# ---- clean -----------------------------------------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("table_type", TYPES)
def test_clean_keep_latest_commits(table_type: str, lake_path: str, spark: Any) -> None:
    h = _history(spark, lake_path, table_type)
    t, w = h.table, h.writes
    before = data_files(t)
    snapshot = spark_rows(t.read())
    as_of = {i: spark_rows(t.read(as_of=i)) for i in w[-3:]}
    changes = spark_rows(t.read_changes(start=w[0]))

    r = t.clean(retain_commits=2)

    assert r is not None
    after = data_files(t)
    # window = the latest two writes; p0 keeps the slices live as of them, p1 its only slice
    kept_p0 = {w[4]} if table_type == "MERGE_ON_READ" else {w[2], w[3]}
    expected = {f: b for f, b in before.items() if not f.startswith("part=p0/") or b in kept_p0}
    assert after == expected
    assert r.files_deleted == len(before) - len(after) > 0
    assert r.earliest_retained == w[-2]
    assert {b for f, b in after.items() if f.startswith("part=p1/")} == {w[0]}
    clean_instants = [i for i in t.timeline() if i.action == "clean"]
    assert [(i.instant, i.state) for i in clean_instants] == [(r.instant, "completed")]
    assert {f"{r.instant}.clean.requested", f"{r.instant}.clean.inflight", f"{r.instant}.clean"} \
        <= set(timeline_files(t))
    meta = decode_instant_avro(t.io.read_bytes(t.io.join(".hoodie", f"{r.instant}.clean")), "clean_metadata")
    assert meta["earliestCommitToRetain"] == w[-2]
    assert meta["totalFilesDeleted"] == r.files_deleted

    # the snapshot and the retained window read as before (and as hudi-rs reads them)
    assert_snapshot_same_as_hudi(t, snapshot)
    for i in w[-2:]:
        assert_as_of_same_as_hudi(t, i, as_of[i])
    # ... a range starting before the window is still complete: it only needs the slices as of its end
    assert spark_rows(t.read_changes(start=w[0])) == changes
    # time travel and incremental reads ending in the cleaned range raise, naming the earliest readable instant
    with pytest.raises(CleanedRangeError, match=f"earliest instant still readable is {w[-2]}") as e:
        t.read(as_of=w[-3])
    assert (e.value.instant, e.value.earliest_readable) == (w[-3], w[-2])
    with pytest.raises(CleanedRangeError):
        t.read_changes(start=w[0], end=w[-3])

    # nothing left to clean: no instant
    timeline = timeline_files(t)
    assert t.clean(retain_commits=2) is None
    assert timeline_files(t) == timeline


@pytest.mark.spark
@pytest.mark.parametrize("table_type", TYPES)
def test_clean_keep_latest_file_versions(table_type: str, table_path: str, spark: Any) -> None:
    h = _history(spark, table_path, table_type)
    t, w = h.table, h.writes
    before = data_files(t)
    snapshot = spark_rows(t.read())

    r = t.clean(retain_file_versions=2)

    assert r is not None
    p0_slices = sorted({b for f, b in before.items() if f.startswith("part=p0/")})
    kept = set(p0_slices[-2:])
    assert data_files(t) == {f: b for f, b in before.items() if not f.startswith("part=p0/") or b in kept}
    # the oldest write from which on every snapshot is complete: the one that created the older kept slice
    assert r.earliest_retained == p0_slices[-2]
    assert_snapshot_same_as_hudi(t, snapshot)
    assert_as_of_same_as_hudi(t, r.earliest_retained)
    older = w[w.index(r.earliest_retained) - 1]
    with pytest.raises(CleanedRangeError):
        t.read(as_of=older)
    assert t.clean(retain_file_versions=2) is None
    # a narrower policy afterwards never moves the readable range back
    r2 = t.clean(retain_file_versions=1)
    assert r2 is not None and r2.earliest_retained == p0_slices[-1]
    assert_snapshot_same_as_hudi(t, snapshot)


@pytest.mark.spark
@pytest.mark.parametrize("table_type", TYPES)
def test_clean_removes_replaced_file_groups_once_older_than_the_window(table_type: str, table_path: str,
                                                                      spark: Any) -> None:
    t = _table(spark, table_path, table_type)
    w1 = t.insert(_rows(spark, list(range(6)), 0)).instant
    w2 = t.insert_overwrite(_rows(spark, [10, 12], 1, part="p0")).instant
    w3 = t.upsert(_rows(spark, [1], 2)).instant
    replaced = {f for f, b in data_files(t).items() if f.startswith("part=p0/") and b == w1}
    assert replaced
    snapshot = spark_rows(t.read())

    # the replacecommit is inside the window of the last two writes: the replaced group stays
    assert t.clean(retain_commits=2) is None
    assert replaced <= set(data_files(t))
    w4 = t.upsert(_rows(spark, [3], 3)).instant
    snapshot4 = spark_rows(t.read())
    # now it is older than the window: all its files go
    r = t.clean(retain_commits=2)
    assert r is not None and r.earliest_retained == w3
    assert not replaced & set(data_files(t))
    assert_snapshot_same_as_hudi(t, snapshot4)
    assert_as_of_same_as_hudi(t, w3)
    with pytest.raises(CleanedRangeError):
        t.read(as_of=w2)
    assert snapshot != snapshot4
    assert w4 == t.latest_instant()


# ---- savepoint and restore -------------------------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("table_type", TYPES)
def test_savepoint_protects_files_from_clean_and_restore_returns_to_it(table_type: str, lake_path: str,
                                                                      spark: Any) -> None:
    t = _table(spark, lake_path, table_type)
    w = [t.insert(_rows(spark, list(range(6)), 0)).instant]
    w.append(t.upsert(_rows(spark, [0, 2], 1)).instant)
    sp = t.savepoint()
    assert sp == w[-1]
    assert t.savepoint(sp) == sp  # idempotent
    assert t.savepoints() == [sp]
    saved_files = data_files(t)
    saved = spark_rows(t.read(as_of=sp))
    listed = read_savepoint_files(t.io.read_bytes(t.io.join(".hoodie", f"{sp}.savepoint")))
    live = {f"{p}/{n}" for p, names in listed.items() for n in names}
    assert live and live <= set(saved_files)
    mor = table_type == "MERGE_ON_READ"
    if mor:
        assert any("/." in f for f in live), "the savepoint lists the slices' log files too"
        w.append(t.compact().instant)  # type: ignore[union-attr]
    w += [t.upsert(_rows(spark, [0, 4], 2)).instant, t.upsert(_rows(spark, [1, 6], 3)).instant]
    if mor:
        w.append(t.compact().instant)  # type: ignore[union-attr]

    r = t.clean(retain_commits=1)

    assert r is not None and r.earliest_retained == w[-1]
    assert live <= set(data_files(t)), "clean deleted files the savepoint keeps"
    assert_as_of_same_as_hudi(t, sp, saved)  # the savepoint stays readable inside the cleaned range
    with pytest.raises(CleanedRangeError, match="savepointed instant"):
        t.read(as_of=w[-2])

    rolled_back = t.restore(sp)

    assert rolled_back == list(reversed(w[w.index(sp) + 1:]))
    assert t.latest_instant() == sp
    assert_snapshot_same_as_hudi(t, saved)
    assert [i.action for i in t.timeline() if i.state != "completed"] == []
    restores = [i for i in t.timeline() if i.action == "restore"]
    assert len(restores) == 1
    meta = decode_instant_avro(t.io.read_bytes(t.io.join(".hoodie", f"{restores[0].instant}.restore")),
                               "restore_metadata")
    assert meta["instantsToRollback"] == rolled_back
    # the table takes writes again after the restore
    t.upsert(_rows(spark, [7], 4))
    assert_snapshot_same_as_hudi(t)
    t.delete_savepoint(sp)
    assert t.savepoints() == []


@pytest.mark.spark
def test_bad_service_inputs_raise_specific_errors_and_change_nothing(table_path: str, spark: Any) -> None:
    t = _table(spark, table_path, "COPY_ON_WRITE")
    with pytest.raises(InstantNotFoundError, match="no completed commit"):
        t.savepoint()
    w1 = t.insert(_rows(spark, [0, 1], 0)).instant
    w2 = t.upsert(_rows(spark, [0], 1)).instant
    w3 = t.upsert(_rows(spark, [0], 2)).instant
    state = (timeline_files(t), data_files(t))

    with pytest.raises(InstantNotFoundError, match="not a savepoint"):
        t.restore(w1)
    with pytest.raises(InstantNotFoundError, match="not a completed commit"):
        t.savepoint("20000101000000000")
    with pytest.raises(InstantNotFoundError, match="not a savepoint"):
        t.delete_savepoint(w2)
    with pytest.raises(ValueError, match="not both"):
        t.clean(retain_commits=1, retain_file_versions=1)
    with pytest.raises(ValueError, match="at least 1"):
        t.clean(retain_commits=0)
    with pytest.raises(ValueError, match="keep_min"):
        t.archive(keep_min=3, keep_max=3)
    assert (timeline_files(t), data_files(t)) == state

    t.savepoint(w1)
    t.savepoint(w2)
    state = (timeline_files(t), data_files(t))
    with pytest.raises(RollbackError, match=f"later instants are savepointed \\({w2}\\)"):
        t.restore(w1)
    assert (timeline_files(t), data_files(t)) == state

    t.delete_savepoint(w1)
    t.delete_savepoint(w2)
    r = t.clean(retain_commits=1)
    assert r is not None and r.earliest_retained == w3
    state = (timeline_files(t), data_files(t))
    with pytest.raises(CleanedRangeError, match="cannot savepoint"):
        t.savepoint(w1)
    assert (timeline_files(t), data_files(t)) == state


@pytest.mark.spark
def test_a_clean_killed_midway_is_finished_by_the_next_write(table_path: str, spark: Any) -> None:
    t = _table(spark, table_path, "COPY_ON_WRITE")
    for v in range(3):
        t.upsert(_rows(spark, [0, 1], v))
    timeline = t.protocol.load_timeline()
    files = list_table_files(t.io)
    plan = plan_clean(timeline, files, CleanPolicy.of(retain_commits=1))
    assert plan is not None and plan.file_count == 4
    instant, heartbeat = t.protocol.start(Action.CLEAN, plan.to_avro())
    t.protocol.transition(instant, State.INFLIGHT, plan.to_avro())
    first = next(iter(plan.files.values()))[0]
    t.io.delete(first)
    heartbeat.stop()  # the cleaner "dies": its heartbeat is gone, the clean stays inflight
    with pytest.raises(CleanedRangeError):  # the pending plan already guards the range it is deleting
        t.read(as_of=timeline.completed_writes()[0].time)

    t.upsert(_rows(spark, [2], 9))

    done = [i for i in t.timeline() if i.action == "clean"]
    assert [(i.instant, i.state) for i in done] == [(instant.time, "completed")]
    assert not any(t.io.exists(p) for paths in plan.files.values() for p in paths)
    assert_snapshot_same_as_hudi(t)


@pytest.mark.spark
def test_a_restore_or_savepoint_killed_midway_is_finished_by_rollback_failed(table_path: str, spark: Any) -> None:
    t = _table(spark, table_path, "COPY_ON_WRITE")
    w = [t.upsert(_rows(spark, [0, 1], v)).instant for v in range(4)]
    t.savepoint(w[1])
    saved = spark_rows(t.read(as_of=w[1]))
    plan = restore_plan([(w[3], "commit"), (w[2], "commit")], savepoint_to_restore=w[1])
    instant, heartbeat = t.protocol.start(Action.RESTORE, plan)
    t.protocol.transition(instant, State.INFLIGHT, plan)
    rollback_instant(t.ctx, w[3], record=False)  # the restore got this far, then died
    heartbeat.stop()
    dangling = Instant(w[2], Action.SAVEPOINT, State.INFLIGHT)  # a savepoint that died before completing
    t.protocol.transition(dangling.with_state(State.REQUESTED), State.INFLIGHT)

    assert t.rollback_failed() == [w[2]]

    assert [(i.instant, i.state) for i in t.timeline() if i.action == "restore"] == [(instant.time, "completed")]
    assert t.savepoints() == [w[1]] and dangling.file_name not in timeline_files(t)
    assert t.latest_instant() == w[1]
    assert_snapshot_same_as_hudi(t, saved)


# ---- archive ---------------------------------------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("table_type", TYPES)
def test_archive_shortens_the_timeline_and_keeps_the_snapshot(table_type: str, lake_path: str, spark: Any) -> None:
    t = _table(spark, lake_path, table_type)
    w = [t.insert(_rows(spark, list(range(6)), 0)).instant]
    w.append(t.insert_overwrite(_rows(spark, [10, 12], 1, part="p0")).instant)
    # MOR: log blocks on p1's slice; keys 3 and 5 are updated only by delta commits that get archived
    for v, ids in enumerate([[3], [5], [1], [1, 7]], start=2):
        w.append(t.upsert(_rows(spark, ids, v)).instant)
    snapshot = spark_rows(t.read())
    assert_snapshot_same_as_hudi(t, snapshot)

    # the replacecommit's replaced group still has files: archival stops right before it
    assert t.archive(keep_min=2, keep_max=3) == 1
    assert t.timeline()[0].instant == w[1]
    assert_snapshot_same_as_hudi(t, snapshot)

    t.clean(retain_commits=2)
    n = t.archive(keep_min=2, keep_max=3)

    assert n == 3
    active = [i for i in t.timeline() if i.action in ("commit", "deltacommit", "replacecommit")]
    assert [i.instant for i in active] == w[-2:]
    archived = archived_files(t.io)
    assert {a.instant.time for a in archived} == set(w[:-2])
    first = next(a for a in archived if a.instant.time == w[0] and a.instant.is_completed)
    assert CommitMetadata.from_bytes(first.content).write_stats
    assert_snapshot_same_as_hudi(t, snapshot)
    assert_as_of_same_as_hudi(t, w[-2])
    # archived instants are gone from time travel; incremental reads into them would be partial
    with pytest.raises(InstantNotFoundError):
        t.read(as_of=w[2])
    with pytest.raises(CleanedRangeError, match="archived"):
        t.read_changes(start=w[2])
    assert spark_rows(t.read_changes(start=w[-3])) == hudi_incremental(t.uri, w[-3], w[-1])
    assert t.archive(keep_min=2, keep_max=3) == 0
    if table_type == "MERGE_ON_READ":  # compaction merges the archived delta commits' blocks too
        assert t.compact() is not None
        assert_snapshot_same_as_hudi(t, snapshot)


@pytest.mark.spark
def test_archive_stops_before_the_oldest_savepoint_and_pending_instants(table_path: str, spark: Any) -> None:
    t = _table(spark, table_path, "MERGE_ON_READ")
    w = [t.insert(_rows(spark, [0, 1], 0)).instant]
    for v in range(1, 5):
        w.append(t.upsert(_rows(spark, [0, 1], v)).instant)
    t.savepoint(w[1])
    assert t.archive(keep_min=1, keep_max=2) == 1  # only w[0]: w[1] is savepointed
    t.delete_savepoint(w[1])
    staged = t.upsert(_rows(spark, [5], 9), stage=True)
    w.append(t.upsert(_rows(spark, [0], 10)).instant)
    snapshot = spark_rows(t.read())
    # up to the last completed write before the staged (pending) instant: hudi-rs must still not see its files
    assert t.archive(keep_min=1, keep_max=2) == 3
    assert [i.instant for i in t.timeline()][:2] == [w[4], staged.instant]
    assert_snapshot_same_as_hudi(t, snapshot)


# ---- pure format code ------------------------------------------------------------------------------------------------

def test_archive_file_round_trip() -> None:
    files = [ArchivedFile(Instant("20250101000000000", Action.COMMIT, State.REQUESTED), b""),
             ArchivedFile(Instant("20250101000000000", Action.COMMIT, State.COMPLETED), b'{"a": "\xc3\xa9"}'),
             ArchivedFile(Instant("20250101000000001", Action.CLEAN, State.COMPLETED), b"Obj\x01\x00\xff")]
    assert decode_archive(encode_archive(files)) == files
    assert last_archived_instant(["lakegate-archive.20250101000000000_20250101000000001.jsonl",
                                  ".commits_.archive.1_1-0-1", "lakegate-archive.2024_x.jsonl"]) \
        == "20250101000000001"


def test_valid_instants_admit_archived_blocks_and_pickle() -> None:
    s = InstantsOrEarlier({"20250102000000000"}, before="20250101000000000")
    assert "20241231000000000" in s and "20250102000000000" in s
    assert "20250101500000000" not in s
    back = pickle.loads(pickle.dumps(s))
    assert "20241231000000000" in back and back.before == s.before and back == s


class _Files(dict[str, bytes]):
    def read_bytes(self, path: str) -> bytes:
        return self[path.rsplit("/", 1)[-1]]


def _timeline(writes: list[tuple[str, str, CommitMetadata]]) -> Timeline:
    store = _Files({f"{t}.{a}": m.to_bytes() for t, a, m in writes})
    return Timeline.from_files(store, "/t/.hoodie", store)


def test_plan_clean_policies_on_a_listing() -> None:
    t1, t2, t3, t4 = (f"2025010100000000{i}" for i in range(1, 5))
    meta = CommitMetadata("upsert", (WriteStat("g1", None, "p"),))
    replace = CommitMetadata("insert_overwrite", (WriteStat("g3", None, "p"),), replaced_file_ids={"p": ("g2",)})
    timeline = _timeline([(t1, "commit", meta), (t2, "commit", meta), (t3, "replacecommit", replace),
                          (t4, "commit", meta)])
    names = [f"g1_0-0-0_{t}.parquet" for t in (t1, t2, t4)] + [f"g2_0-0-0_{t1}.parquet", f"g3_0-0-0_{t3}.parquet",
                                                               f"g9_0-0-0_{'20250101000000009'}.parquet"]
    files = files_from_listing("/t", [(f"/t/p/{n}", 1) for n in names])

    def planned(policy: CleanPolicy, protected: set[tuple[str, str]] | None = None) -> set[str]:
        plan = plan_clean(timeline, files, policy, protected or set())
        return {p.rsplit("/", 1)[-1] for paths in (plan.files.values() if plan else []) for p in paths}

    # window t3, t4: g1 as of t3 is the t2 slice; g2 was replaced at t3 = inside the window: its slice stays
    assert planned(CleanPolicy.of(retain_commits=2)) == {f"g1_0-0-0_{t1}.parquet"}
    # window t4: g2 replaced before it goes whole; g9 (a pending instant's file) is never touched
    assert planned(CleanPolicy.of(retain_commits=1)) == {f"g1_0-0-0_{t1}.parquet", f"g1_0-0-0_{t2}.parquet",
                                                         f"g2_0-0-0_{t1}.parquet"}
    assert planned(CleanPolicy.of(retain_commits=1), {("p", f"g1_0-0-0_{t1}.parquet")}) == \
        {f"g1_0-0-0_{t2}.parquet", f"g2_0-0-0_{t1}.parquet"}
    plan = plan_clean(timeline, files, CleanPolicy.of(retain_file_versions=2))
    assert plan is not None
    assert {p.rsplit("/", 1)[-1] for p in plan.files["p"]} == {f"g1_0-0-0_{t1}.parquet", f"g2_0-0-0_{t1}.parquet"}
    assert plan.earliest_retained == (t3, "replacecommit")  # as of t2, g2's slice is needed and gone
    assert plan_clean(timeline, files, CleanPolicy.of(retain_commits=4)) is None
