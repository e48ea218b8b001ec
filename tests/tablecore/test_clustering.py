"""Clustering: small file groups rewritten into fewer, optionally sorted ones through a ``replacecommit`` with a
clustering plan; every view (ours and hudi-rs) returns the same rows before and after."""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow.parquet as pq
import pytest

from tablecore import CommitConflictError, ConfigError, InvalidInputError, Table, TableConfig
from tablecore.format.file_view import latest_file_slices, list_table_files
from tablecore.format.service_metadata import read_clustering_plan
from tablecore.services import clustering as clustering_service
from tests.tablecore.oracle import assert_same_as_hudi, spark_rows

pytestmark = [pytest.mark.spark, pytest.mark.deployments]

DDL = "id int, part string, ts long, val string"
TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
KB = 1024


def _table(spark: Any, path: str, table_type: str, **kw: Any) -> Table:
    # small_file_limit=0: every insert makes new file groups, so there are small files to cluster
    cfg = TableConfig(name="cl", record_key=["id"], ordering_field="ts", partition_fields=["part"],
                      table_type=table_type, small_file_limit=0, **kw)
    return Table.create(path, cfg, spark=spark)


def _rows(spark: Any, ids: list[int], version: int) -> Any:
    return spark.createDataFrame([(i, f"p{i % 2}", version * 1000 - i, f"v{version}-{i}") for i in ids], DDL)


def _groups(t: Table) -> dict[str, set[str]]:
    tl = t.protocol.load_timeline()
    out: dict[str, set[str]] = {}
    for s in latest_file_slices(list_table_files(t.io), tl):
        out.setdefault(s.partition, set()).add(s.file_id)
    return out


def _small_files(spark: Any, path: str, table_type: str, **kw: Any) -> Table:
    """Four inserts of 5 keys per partition each (4 file groups per partition), then updates and a delete."""
    t = _table(spark, path, table_type, **kw)
    for batch in range(4):
        t.insert(_rows(spark, list(range(batch * 10, batch * 10 + 10)), 1))
    t.upsert(_rows(spark, [0, 1, 13, 27], 2))
    t.delete(spark.createDataFrame([(34, "p0")], "id int, part string"))
    return t


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.s3_in_deployments
def test_cluster_rewrites_small_groups_and_every_view_is_unchanged(spark, lake_path: str, table_type: str) -> None:
    t = _small_files(spark, lake_path, table_type)
    before = spark_rows(t.read())
    history = {i.instant: spark_rows(t.read(as_of=i.instant)) for i in t.timeline() if i.state == "completed"}
    old_groups = _groups(t)
    assert {p: len(g) for p, g in old_groups.items()} == {"part=p0": 4, "part=p1": 4}

    r = t.cluster(small_file_limit=1024 * KB)
    assert r is not None and r.operation == "CLUSTER"
    assert r.replaced_file_groups == 8 and r.files_written == 2 and r.inserted == r.updated == r.deleted == 0
    new_groups = _groups(t)
    assert {p: len(g) for p, g in new_groups.items()} == {"part=p0": 1, "part=p1": 1}
    assert not (new_groups["part=p0"] | new_groups["part=p1"]) & (old_groups["part=p0"] | old_groups["part=p1"])

    # same rows (meta columns included: commit times are preserved), same history, nothing new incrementally
    assert spark_rows(t.read()) == before
    assert spark_rows(t.read(view="read_optimized")) == before  # logs were merged into the new base files
    for instant, rows in history.items():
        assert spark_rows(t.read(as_of=instant)) == rows
    assert t.read_changes(start=t.timeline()[-2].instant).count() == 0

    # the timeline holds a replacecommit with operation CLUSTER and the Avro clustering plan
    last = t.timeline()[-1]
    assert (last.action, last.state, last.operation) == ("replacecommit", "completed", "CLUSTER")
    md = t.commit_metadata(last.instant)
    assert md.replaced_file_ids == {p: tuple(sorted(g)) for p, g in old_groups.items()}
    requested = t.io.join(".hoodie", f"{last.instant}.replacecommit.requested")
    plan = read_clustering_plan(t.io.read_bytes(requested))
    assert sorted((s.partition_path, s.file_id) for g in plan for s in g.slices) == \
        sorted((p, f) for p, g in old_groups.items() for f in g)
    assert t.io.read_bytes(t.io.join(".hoodie", f"{last.instant}.replacecommit.inflight")) == b""
    assert_same_as_hudi(t)

    # the table keeps working: updates land in the new groups, a compaction and a clean follow
    t.upsert(_rows(spark, [1, 2, 3], 3))
    t.compact()
    cleaned = t.clean(retain_commits=1)
    assert cleaned is not None and cleaned.files_deleted >= 8  # the replaced groups' files are gone
    assert {s.file_id for s in list_table_files(t.io).bases} <= (new_groups["part=p0"] | new_groups["part=p1"])
    expected = {r["id"]: r["val"] for r in before} | {i: f"v3-{i}" for i in (1, 2, 3)}
    assert {r.id: r.val for r in t.read().collect()} == expected
    assert_same_as_hudi(t)


def test_cluster_sorts_rows_and_sizes_files(spark, table_path: str) -> None:
    t = _small_files(spark, table_path, "COPY_ON_WRITE")
    before = spark_rows(t.read())
    # a target size below the input size: several output groups per partition, each sorted by ts
    sizes = sum(f.size for f in list_table_files(t.io).bases if f.partition == "part=p0"
                and f.file_id in _groups(t)["part=p0"])
    r = t.cluster(small_file_limit=1024 * KB, target_file_size=sizes // 2, sort_by=["ts"])
    assert r is not None and r.files_written >= 4
    assert spark_rows(t.read()) == before
    tl = t.protocol.load_timeline()
    for s in latest_file_slices(list_table_files(t.io), tl):
        assert s.base is not None
        ts = pq.read_table(s.base.path, columns=["ts"]).column("ts").to_pylist()
        assert ts == sorted(ts)
    # sorted across the files of a group: their ts ranges do not overlap
    per_part: dict[str, list[tuple[int, int]]] = {}
    for s in latest_file_slices(list_table_files(t.io), tl):
        assert s.base is not None
        ts = pq.read_table(s.base.path, columns=["ts"]).column("ts").to_pylist()
        per_part.setdefault(s.partition, []).append((min(ts), max(ts)))
    for ranges in per_part.values():
        ranges.sort()
        assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    plan = read_clustering_plan(t.io.read_bytes(t.io.join(".hoodie", f"{r.instant}.replacecommit.requested")))
    assert all(g.num_output_file_groups >= 2 for g in plan)
    assert_same_as_hudi(t)


def test_cluster_selects_partitions_and_small_files_only(spark, table_path: str) -> None:
    t = _small_files(spark, table_path, "MERGE_ON_READ")
    groups = _groups(t)
    assert t.cluster(small_file_limit=1) is None  # no file group is below one byte
    r = t.cluster(partitions=["part=p1"], small_file_limit=1024 * KB)
    assert r is not None and r.replaced_file_groups == 4
    after = _groups(t)
    assert after["part=p0"] == groups["part=p0"] and len(after["part=p1"]) == 1
    with pytest.raises(InvalidInputError, match="p9"):
        t.cluster(partitions=["p9"], small_file_limit=1024 * KB)
    with pytest.raises(InvalidInputError, match="nope"):
        t.cluster(sort_by=["nope"], small_file_limit=1024 * KB)
    assert _groups(t) == after


def test_cluster_refuses_bucket_index(spark, table_path: str) -> None:
    t = _table(spark, table_path, "MERGE_ON_READ", index_type="BUCKET", bucket_count=2)
    t.insert(_rows(spark, list(range(10)), 1))
    with pytest.raises(ConfigError, match="bucket index"):
        t.cluster(small_file_limit=1024 * KB)
    assert [i.action for i in t.timeline()] == ["deltacommit"]


@pytest.mark.parametrize("table_type", TYPES)
def test_cluster_conflicting_with_a_concurrent_write_is_rolled_back(spark, table_path: str, table_type: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    t = _small_files(spark, table_path, table_type)
    before = spark_rows(t.read())
    groups = _groups(t)
    run = clustering_service._run

    def run_then_write(table: Table, *args: Any) -> Any:
        stats = run(table, *args)
        # another writer updates a key of a file group being clustered and completes first
        Table.open(table_path, spark=spark).upsert(_rows(spark, [3], 9))
        return stats

    monkeypatch.setattr(clustering_service, "_run", run_then_write)
    with pytest.raises(CommitConflictError, match="conflicts with"):
        t.cluster(small_file_limit=1024 * KB)
    # the clustering left nothing behind; the concurrent update is there
    assert _groups(t) == groups
    assert [i.action for i in t.timeline() if i.action == "replacecommit"] == []
    assert not [f for f in list_table_files(t.io).bases if f.instant > t.timeline()[-1].instant]
    expected = {r["id"]: r["val"] for r in before} | {3: "v9-3"}
    assert {r.id: r.val for r in t.read().collect()} == expected
    assert_same_as_hudi(t)


def test_rollback_of_a_clustering_brings_back_the_old_groups(spark, table_path: str) -> None:
    t = _small_files(spark, table_path, "MERGE_ON_READ")
    before, groups = spark_rows(t.read()), _groups(t)
    r = t.cluster(small_file_limit=1024 * KB)
    assert r is not None
    t.rollback(r.instant)
    assert _groups(t) == groups
    assert spark_rows(t.read()) == before
    assert not [f for f in list_table_files(t.io).bases if f.instant == r.instant]
    assert_same_as_hudi(t)
