"""CDC reads (issue 23, acceptance 1): random inserts, updates (several per key per range), deletes, re-inserts and
partition overwrites over 30 commits, with compaction and clustering between them, on copy-on-write and
merge-on-read tables of versions 6 and 8. For random ranges, replaying the CDC rows in order onto the model's table
as of ``start`` gives exactly the model's table as of ``end`` (every before image is checked against the replayed
state), and each key's sequence of changes equals the model's."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest

from tablecore import CleanedRangeError, InvalidInputError, Table, TableConfig, TableCoreError
from tablecore.cdc_planning import plan_cdc
from tablecore.spark.cdc import contiguous_runs

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DDL = "id int, part string, ts long, val string"
KEYS = 24

State = dict[str, tuple[int, str]]  # record key -> (ts, val)
Change = tuple[str, str, tuple[int, str] | None, tuple[int, str] | None]  # key, op, before, after


def part_of(key: int) -> str:
    return f"p{key % 3}"


class Model:
    """The table as a dict, and every commit's changes."""

    def __init__(self) -> None:
        self.state: State = {}
        self.ts = 0

    def upsert(self, keys: list[int], tag: str) -> tuple[list[tuple[Any, ...]], list[Change]]:
        rows: list[tuple[Any, ...]] = []
        latest: dict[str, tuple[int, str]] = {}
        for i, k in enumerate(keys):  # ordering values rise: the last row of a key in the batch wins
            self.ts += 1
            row = (k, part_of(k), self.ts, f"{tag}-{i}")
            rows.append(row)
            latest[str(k)] = (self.ts, row[3])
        changes: list[Change] = [(k, "u" if k in self.state else "i", self.state.get(k), v)
                                 for k, v in latest.items()]
        self.state.update(latest)
        return rows, changes

    def delete(self, keys: list[int]) -> list[Change]:
        changes: list[Change] = [(str(k), "d", self.state.pop(str(k)), None) for k in dict.fromkeys(keys)
                                 if str(k) in self.state]
        return changes

    def overwrite(self, part: str, keys: list[int], tag: str) -> tuple[list[tuple[Any, ...]], list[Change]]:
        old = {k: v for k, v in self.state.items() if part_of(int(k)) == part}
        rows: list[tuple[Any, ...]] = []
        new: dict[str, tuple[int, str]] = {}
        for i, k in enumerate(keys):
            self.ts += 1
            rows.append((k, part, self.ts, f"{tag}-{i}"))
            new[str(k)] = (self.ts, f"{tag}-{i}")
        changes: list[Change] = [(k, "d", v, None) for k, v in old.items() if k not in new]
        changes += [(k, "u" if k in old else "i", old.get(k), v) for k, v in new.items()]
        for gone in old:
            del self.state[gone]
        self.state.update(new)
        return rows, changes


def boundary(t: Table) -> str | None:
    """The range boundary of the newest completed write: its completion time (version 8) or its instant."""
    done = [i for i in t.timeline() if i.state == "completed" and i.action in ("commit", "deltacommit",
                                                                               "replacecommit")]
    if t.config.table_version >= 8:
        return max((str(i.completed) for i in done), default=None)
    return max((i.instant for i in done), default=None)


def table_state(t: Table, as_of: str | None) -> State:
    """The table's rows as the model holds them, as of a completed instant (None: before the first write)."""
    if as_of is None:
        return {}
    return {str(r["id"]): (r["ts"], r["val"]) for r in t.read(as_of=as_of).select("id", "ts", "val").collect()}


def cdc_rows(t: Table, start: str | None, end: str | None) -> list[dict[str, Any]]:
    df = t.read_cdc(start, end)
    return [r.asDict(recursive=True) for r in df.collect()]


def image(img: dict[str, Any] | None) -> tuple[int, str] | None:
    return None if img is None else (img["ts"], img["val"])


def replay(state: State, rows: list[dict[str, Any]]) -> State:
    out = dict(state)
    for r in rows:
        key, before, after = r["record_key"], image(r["before"]), image(r["after"])
        assert out.get(key) == before, f"before of {r['op']} {key} at {r['commit_time']}: {before} != {out.get(key)}"
        assert (r["op"] == "i") == (before is None) and (r["op"] == "d") == (after is None), r
        if after is None:
            del out[key]
        else:
            assert after[0] is not None and r["after"]["_hoodie_commit_time"] == r["commit_time"]
            out[key] = after
    return out


@pytest.mark.parametrize(("table_type", "version", "cdc_logs"), [
    # copy-on-write merges log their changes in CDC log files, which the read takes as is; the rest (new file
    # groups, partition overwrites) is diffed. Diffing a merge is checked against the logs in the test below.
    ("COPY_ON_WRITE", 6, True), ("MERGE_ON_READ", 6, False), ("MERGE_ON_READ", 8, False),
])
def test_cdc_replays_every_change_of_random_ranges(spark: Any, tmp_path: Path, table_type: str, version: int,
                                                   cdc_logs: bool) -> None:
    rnd = random.Random(f"cdc-{table_type}-{version}")
    t = Table.create(str(tmp_path / "t"), TableConfig(name="cdc", record_key=["id"], ordering_field="ts",
                                                      partition_fields=["part"], table_type=table_type,
                                                      table_version=version, cdc_enabled=cdc_logs), spark=spark)
    model = Model()
    bounds: list[str | None] = [None]
    states: dict[str | None, State] = {None: {}}
    instants: dict[str | None, str | None] = {None: None}  # the instant of each range boundary
    changes: dict[str, list[Change]] = {}
    writes = 0
    for _ in range(60):
        if writes == 30:
            break
        tag = f"c{len(bounds)}"
        roll = rnd.random()
        if roll < 0.55 or not model.state:
            # several versions of some keys in one batch; keys updated again and again across commits
            keys = [rnd.randrange(KEYS) for _ in range(rnd.randint(1, 8))]
            rows, ch = model.upsert(keys, tag)
            t.upsert(spark.createDataFrame(rows, DDL))
        elif roll < 0.75:
            keys = [rnd.randrange(KEYS) for _ in range(rnd.randint(1, 4))]
            ch = model.delete(keys)
            t.delete(spark.createDataFrame([(k, part_of(k), 0, "") for k in keys], DDL))
        elif roll < 0.85:
            part = rnd.choice(["p0", "p1", "p2"])
            keys = rnd.sample([k for k in range(KEYS) if part_of(k) == part], rnd.randint(1, 3))
            rows, ch = model.overwrite(part, keys, tag)
            t.insert_overwrite(spark.createDataFrame(rows, DDL))
        elif roll < 0.93 and table_type == "MERGE_ON_READ":
            t.compact()
            ch = []
        else:
            t.cluster(small_file_limit=1 << 30, sort_by=["ts"])
            ch = []
        b = boundary(t)
        if b is None or b in states:  # a service that had nothing to do
            continue
        writes += 1
        bounds.append(b)
        states[b] = dict(model.state)
        instants[b] = t.latest_instant()
        changes[b] = ch

    assert writes == 30
    ranges: list[tuple[str | None, str | None]] = [(None, bounds[-1]), (None, None)]
    for _ in range(4):
        i, j = sorted(rnd.sample(range(len(bounds)), 2))
        ranges.append((bounds[i], bounds[j]))
    checked: set[str | None] = set()
    for start, end in ranges:
        # the model is the table: replaying onto the table as of start gives the table as of end
        for b in {start, end if end is not None else bounds[-1]} - checked:
            assert table_state(t, instants[b]) == states[b], b
            checked.add(b)
        got_rows = cdc_rows(t, start, end)
        assert replay(states[start], got_rows) == states[end if end is not None else bounds[-1]], (start, end)
        # each key's changes, in order, are the model's
        lo = bounds.index(start)
        hi = bounds.index(end) if end is not None else len(bounds) - 1
        expected: dict[str, list[tuple[str, Any, Any]]] = {}
        for b in bounds[lo + 1:hi + 1]:
            for key, op, before, after in changes[str(b)]:
                expected.setdefault(key, []).append((op, before, after))
        got: dict[str, list[tuple[str, Any, Any]]] = {}
        for r in got_rows:
            got.setdefault(r["record_key"], []).append((r["op"], image(r["before"]), image(r["after"])))
        assert got == expected, (start, end)
    # every commit boundary seen by the model is in commit order in the CDC rows
    all_rows = cdc_rows(t, None, None)
    order = [(r["completion_time"], r["commit_time"]) for r in all_rows]
    assert order == sorted(order)
    assert {r["op"] for r in all_rows} == {"i", "u", "d"}
    logged = plan_cdc(t.io, t.protocol.load_timeline(), t.config, start=None, end=None).descriptors
    assert any(logged.column("cdc_logs").to_pylist()) == cdc_logs


@pytest.mark.deployments  # also from a Spark Connect client and on a standalone cluster (make deployments)
def test_cdc_options_and_errors(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), TableConfig(name="cdc", record_key=["id"], ordering_field="ts",
                                                      partition_fields=["part"]), spark=spark)
    first = t.upsert(spark.createDataFrame([(1, "p1", 1, "a"), (2, "p2", 1, "b")], DDL)).instant
    second = t.upsert(spark.createDataFrame([(1, "p1", 2, "a2")], DDL)).instant
    third = t.delete(spark.createDataFrame([(2, "p2", 0, "")], DDL)).instant

    flat = t.read_cdc(first, flatten=True)
    assert "before_val" in flat.columns and "after_val" in flat.columns and "before" not in flat.columns
    got = [(r["op"], r["commit_time"], r["record_key"], r["before_val"], r["after_val"]) for r in flat.collect()]
    assert got == [("u", second, "1", "a", "a2"), ("d", third, "2", "b", None)]
    same = [r.asDict(recursive=True) for r in t.read_changes(first, mode="cdc").collect()]
    assert same == [r.asDict(recursive=True) for r in t.read_cdc(first).collect()]
    # the latest-state read is unchanged: the deleted key is simply absent
    assert sorted(r["id"] for r in t.read_changes(first).collect()) == [1]
    assert t.read_cdc(third).count() == 0
    with pytest.raises(TableCoreError, match="mode"):
        t.read_changes(first, mode="bogus")  # type: ignore[arg-type]
    with pytest.raises(TableCoreError, match="inverted"):
        t.read_cdc(third, first)

    # a clean that removed the file slices before `second` makes ranges starting before it unreadable, by name
    later = [t.upsert(spark.createDataFrame([(1, "p1", 10 + n, f"x{n}"), (2, "p2", 10 + n, f"y{n}")], DDL)).instant
             for n in range(3)]
    t.clean(retain_commits=2)
    with pytest.raises(CleanedRangeError, match="CDC start"):
        t.read_cdc(first)
    # the newest commit's before images are kept: its changes read
    latest = [(r["op"], r["record_key"], r["before"]["val"], r["after"]["val"])
              for r in t.read_cdc(later[1]).collect()]
    assert latest == [("u", "1", "x1", "x2"), ("u", "2", "y1", "y2")]


def test_cdc_log_files_are_read_as_is_and_need_no_file_slice(spark: Any, tmp_path: Path) -> None:
    """A copy-on-write table with CDC log files: the read takes the merges' changes from them, gives what diffing
    the file slices gives, and reads a commit whose slices before it a clean removed."""
    tables = {logs: Table.create(str(tmp_path / f"t{logs}"), TableConfig(
        name="cdc", record_key=["id"], ordering_field="ts", partition_fields=["part"], cdc_enabled=logs), spark=spark)
        for logs in (True, False)}
    batches = [[(1, "p1", 1, "a"), (2, "p2", 1, "b"), (3, "p1", 1, "c")],
               [(1, "p1", 2, "a2"), (4, "p1", 2, "d")], [(2, "p2", 3, "b3"), (5, "p2", 3, "e")]]
    firsts: dict[bool, str] = {}
    for logs, t in tables.items():
        firsts[logs] = t.upsert(spark.createDataFrame(batches[0], DDL)).instant
        for rows in batches[1:]:
            t.upsert(spark.createDataFrame(rows, DDL))
        t.delete(spark.createDataFrame([(3, "p1", 0, "")], DDL))

    def changes(t: Table, start: str) -> list[tuple[Any, ...]]:
        return [(r["op"], r["record_key"], r["partition_path"], image(r["before"]), image(r["after"]))
                for r in (x.asDict(recursive=True) for x in t.read_cdc(start).collect())]

    p1, p2 = "part=p1", "part=p2"  # hive-style partition paths
    expected = [("u", "1", p1, (1, "a"), (2, "a2")), ("i", "4", p1, None, (2, "d")),
                ("u", "2", p2, (1, "b"), (3, "b3")), ("i", "5", p2, None, (3, "e")), ("d", "3", p1, (1, "c"), None)]
    assert changes(tables[False], firsts[False]) == expected
    assert changes(tables[True], firsts[True]) == expected
    plan = plan_cdc(tables[True].io, tables[True].protocol.load_timeline(), tables[True].config, start=firsts[True],
                    end=None)
    assert all(plan.descriptors.column("cdc_logs").to_pylist())
    assert not any(plan.descriptors.column("before").to_pylist())  # no file slice is read
    rows = [r.asDict(recursive=True) for r in tables[True].read_cdc(firsts[True]).collect()]
    update = rows[0]
    assert update["after"]["_hoodie_commit_time"] == update["commit_time"]
    assert update["after"]["_hoodie_record_key"] == update["before"]["_hoodie_record_key"] == "1"
    assert update["after"]["_hoodie_file_name"].endswith(f"_{update['commit_time']}.parquet")
    assert update["before"]["_hoodie_commit_time"] is None  # CDC log files hold the images without meta columns

    # a clean removes CDC log files with their file slices: the newest commit's changes still read from its own
    # CDC log file, where diffing needs the slices before it, which the clean removed
    before_last = {logs: [i.instant for i in t.timeline() if i.action == "commit"][-2] for logs, t in tables.items()}
    for t in tables.values():
        t.clean(retain_commits=1)
    for logs, t in tables.items():
        with pytest.raises(CleanedRangeError, match="CDC start"):
            t.read_cdc(firsts[logs])
    with pytest.raises(CleanedRangeError, match="CDC start"):
        tables[False].read_cdc(before_last[False])
    assert changes(tables[True], before_last[True]) == expected[-1:]


@pytest.mark.parametrize(("table_type", "logs"), [("COPY_ON_WRITE", True), ("COPY_ON_WRITE", False),
                                                   ("MERGE_ON_READ", False)])
def test_a_cdc_read_of_some_columns_is_the_full_read_projected(spark: Any, tmp_path: Path, table_type: str,
                                                                logs: bool) -> None:
    """``columns`` keeps the images' columns named, in that order, whether the changes come from CDC log files or
    from diffing file slices; the record key is still computed when its column is not among them."""
    t = Table.create(str(tmp_path / "t"), TableConfig(name="cdc", record_key=["id"], ordering_field="ts",
                                                      partition_fields=["part"], table_type=table_type,
                                                      cdc_enabled=logs), spark=spark)
    first = t.upsert(spark.createDataFrame([(1, "p1", 1, "a"), (2, "p2", 1, "b"), (3, "p1", 1, "c")], DDL)).instant
    t.upsert(spark.createDataFrame([(1, "p1", 2, "a2"), (4, "p1", 2, "d")], DDL))
    t.delete(spark.createDataFrame([(3, "p1", 0, "")], DDL))
    heads = ["op", "commit_time", "completion_time", "record_key", "partition_path"]
    full = [r.asDict(recursive=True) for r in t.read_cdc(None).collect()]
    assert len(full) == 6
    for columns in (["val", "ts"], ["ts", "_hoodie_commit_time"], ["id"]):
        df = t.read_cdc(None, columns=columns)
        assert df.columns == [*heads, "before", "after"]
        got = [r.asDict(recursive=True) for r in df.collect()]
        want = [{**{h: r[h] for h in heads}, **{side: None if r[side] is None else
                                                {c: r[side][c] for c in columns} for side in ("before", "after")}}
                for r in full]
        assert got == want
        assert all(list(r[s]) == columns for r in got for s in ("before", "after") if r[s] is not None)
        flat = t.read_cdc(first, flatten=True, columns=columns)
        assert flat.columns == [*heads, *[f"{side}_{c}" for side in ("before", "after") for c in columns]]
        assert flat.count() == len([r for r in full if r["commit_time"] > first])
    with pytest.raises(InvalidInputError, match=r"no column 'fare'.*it has"):
        t.read_cdc(None, columns=["val", "fare"])
    with pytest.raises(InvalidInputError, match="'val' named twice"):
        t.read_cdc(None, columns=["val", "ts", "val"])


def test_contiguous_runs_cut_weights_into_even_contiguous_runs() -> None:
    rng = random.Random(7)
    for _ in range(200):
        weights = [rng.choice([1, 1, 2, 5, 400]) for _ in range(rng.randint(1, 40))]
        n = rng.randint(1, 6)
        runs = contiguous_runs(weights, n)
        assert 1 <= len(runs) <= n and runs[0][0] == 0 and runs[-1][1] == len(weights)
        assert all(a < b for a, b in runs) and all(r[1] == s[0] for r, s in itertools.pairwise(runs))
        # no run is heavier than an even share plus the heaviest single descriptor
        assert max(sum(weights[a:b]) for a, b in runs) <= sum(weights) / len(runs) + max(weights)
    assert contiguous_runs([1] * 10, 2) == [(0, 5), (5, 10)]
    assert contiguous_runs([1] * 9 + [9], 2) == [(0, 9), (9, 10)]  # the heavy last day alone, not five and five
    assert contiguous_runs([], 2) == [] and contiguous_runs([3], 4) == [(0, 1)]


def test_a_cdc_read_is_cut_by_the_bytes_each_commit_and_partition_reads(spark: Any, tmp_path: Path) -> None:
    """One upsert changes 300 rows of one partition and one row in each of nine others: the read's tasks take the
    heavy partition alone and the nine light ones together (cut by count, each would take five), in commit order."""
    t = Table.create(str(tmp_path / "t"), TableConfig(name="cdc", record_key=["id"], ordering_field="ts",
                                                      partition_fields=["part"], cdc_enabled=True), spark=spark)
    heavy = [(i, "p9", 1, f"v{i}") for i in range(300)]
    light = [(1000 + p, f"p{p}", 1, "x") for p in range(9)]
    first = t.upsert(spark.createDataFrame(heavy + light, DDL)).instant
    t.upsert(spark.createDataFrame([(k, part, 2, v + "'") for k, part, _, v in heavy + light], DDL))
    plan = plan_cdc(t.io, t.protocol.load_timeline(), t.config, start=first, end=None)
    assert plan.descriptors.column("partition").to_pylist() == [f"part=p{p}" for p in range(10)]
    weights = plan.descriptors.column("weight").to_pylist()
    cdc_bytes = [sum(Path(f["cdc_path"].removeprefix("file:")).stat().st_size for f in logs)
                 for logs in plan.descriptors.column("cdc_logs").to_pylist()]
    assert weights == cdc_bytes and weights[9] > sum(weights[:9])
    df = t.read_cdc(first)
    assert df.rdd.getNumPartitions() == 2
    per_task = df.rdd.mapPartitions(lambda rows: [[r["partition_path"] for r in rows]]).collect()
    assert [sorted(set(p)) for p in per_task] == [[f"part=p{p}" for p in range(9)], ["part=p9"]]
    assert [len(p) for p in per_task] == [9, 300]
