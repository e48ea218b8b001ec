"""``Table.verify`` / ``tablecore.verify_table`` / ``lakegate table doctor`` (issue 22): every entry of the damage
matrix of ``test_integrity.py`` is reported with its kind, file and instant, on copy-on-write and merge-on-read
tables, on disk and on S3; the CLI prints it as JSON and exits 6; reads either return the committed rows or raise a
``TableCorruptError`` naming the same file and instant; clean tables pass, without Spark unless ``--deep``.

One table per (storage, table type) is written once; each case damages a copy of it."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from governance.cli import app
from governance.cli.output import ExitCode
from tablecore import IntegrityReport, Problem, Table, TableConfig, TableCorruptError, verify_table
from tablecore.commit import CommitProtocol
from tablecore.format.commit_metadata import CommitMetadata, WriteStat
from tablecore.format.instant import Action, Instant, State
from tablecore.format.log_format import read_block_at
from tablecore.format.log_integrity import checksum
from tablecore.io import file_io_for
from tests.conftest import FIXTURES
from tests.governance.test_cli import runner  # wide (COLUMNS=200): pytest-xdist sets 80
from tests.s3server import S3Server
from tests.tablecore.test_integrity import DDL, _block, build

pytestmark = [pytest.mark.spark]

COW, MOR = "COPY_ON_WRITE", "MERGE_ON_READ"


@dataclass(frozen=True)
class Pristine:
    """A small table (two upserts into two partitions) and what it holds."""

    path: str
    table_type: str
    model: dict[int, tuple[str, int, str]]
    base_instant: str  # the first upsert: it wrote the base files
    last: str  # the second upsert: updates (copy-on-write: new base files; merge-on-read: log files)


@pytest.fixture(scope="module")
def pristine(spark: Any, s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Pristine]:
    """The pristine table of a (storage, table type), written on first use on disk (and copied, file for file, to
    the S3 test server: a table holds no absolute paths)."""
    cache: dict[tuple[str, str], Pristine] = {}

    def get(storage: str, table_type: str) -> Pristine:
        if ("local", table_type) not in cache:
            where = str(tmp_path_factory.mktemp("pristine") / "t")
            b = build(where, spark, table_type)
            cache[("local", table_type)] = Pristine(where, table_type, b.model, b.base_instant, b.last)
        if (storage, table_type) not in cache:
            local = cache[("local", table_type)]
            copy_table(local.path, where := s3.table_uri("pristine"))
            cache[(storage, table_type)] = Pristine(where, table_type, local.model, local.base_instant, local.last)
        return cache[(storage, table_type)]

    return get


def copy_table(source: str, target: str) -> None:
    """Every file of the table at ``source``, byte for byte, at ``target``."""
    if "://" not in source and "://" not in target:
        shutil.copytree(source, target)
        return
    src, dst = file_io_for(source), file_io_for(target)
    for f in src.list(src.base, recursive=True):
        dst.write_bytes(dst.join(f.path[len(src.base) + 1:]), src.read_bytes(f.path))


@pytest.fixture
def fresh(pristine: Callable[[str, str], Pristine], s3: S3Server,
          tmp_path: Path) -> Callable[[str, str], tuple[str, Pristine]]:
    """A copy of the pristine table of a (storage, table type): its path, and what the pristine one holds."""

    def make(storage: str, table_type: str) -> tuple[str, Pristine]:
        p = pristine(storage, table_type)
        where = s3.table_uri("damaged") if storage == "s3" else str(tmp_path / "t")
        copy_table(p.path, where)
        return where, p

    return make


# ---- the damage matrix ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Expected:
    """The one problem a damage must be reported as."""

    kind: str
    severity: str
    rel: str  # the file, relative to the table base
    instant: str


def _stats(path: str, instant: str) -> list[WriteStat]:
    tl = CommitProtocol(file_io_for(path)).load_timeline()
    found = next(i for i in tl.completed_writes() if i.time == instant)
    return [s for s in tl.metadata(found).write_stats if s.path]


def _log(path: str, p: Pristine) -> WriteStat:
    return next(s for s in _stats(path, p.last) if s.log_version is not None)


def _base(path: str, p: Pristine) -> tuple[WriteStat, str]:
    """The newest base file of a group and the instant that wrote it."""
    instant = p.last if p.table_type == COW else p.base_instant
    return next(s for s in _stats(path, instant) if s.log_version is None), instant


def _write_action(p: Pristine) -> Action:
    return Action.COMMIT if p.table_type == COW else Action.DELTA_COMMIT


def _rewrite(path: str, rel: str, change: Callable[[bytes], bytes]) -> None:
    io = file_io_for(path)
    io.write_bytes(io.join(rel), change(io.read_bytes(io.join(rel))))


def _flip_middle(data: bytes) -> bytes:
    out = bytearray(data)
    out[len(out) // 2] ^= 0x20
    return bytes(out)


def torn_log_tail(path: str, p: Pristine) -> Expected:
    stat = _log(path, p)
    assert stat.path
    _rewrite(path, stat.path, lambda d: d + _block("99991231235959999")[:-9])
    return Expected("torn_log_tail", "warning", stat.path, p.last)


def log_cut_short(path: str, p: Pristine) -> Expected:
    stat = _log(path, p)
    assert stat.path
    _rewrite(path, stat.path, lambda d: d[:-20])
    return Expected("size_mismatch", "error", stat.path, p.last)


def zero_length_log(path: str, p: Pristine) -> Expected:
    stat = _log(path, p)
    assert stat.path
    _rewrite(path, stat.path, lambda d: b"")
    return Expected("size_mismatch", "error", stat.path, p.last)


def missing_log(path: str, p: Pristine) -> Expected:
    stat = _log(path, p)
    assert stat.path
    file_io_for(path).delete(file_io_for(path).join(stat.path))
    return Expected("missing_file", "error", stat.path, p.last)


def flipped_log_byte(path: str, p: Pristine) -> Expected:
    stat = _log(path, p)
    assert stat.path
    _rewrite(path, stat.path, _flip_middle)
    return Expected("log_damage", "error", stat.path, p.last)


def garbage_commit(path: str, p: Pristine) -> Expected:
    rel = f".hoodie/{Instant(p.last, _write_action(p), State.COMPLETED).file_name}"
    _rewrite(path, rel, lambda d: b"\x00\xffnot json")
    return Expected("timeline", "error", rel, p.last)


def empty_commit(path: str, p: Pristine) -> Expected:
    rel = f".hoodie/{Instant(p.last, _write_action(p), State.COMPLETED).file_name}"
    _rewrite(path, rel, lambda d: b"")
    return Expected("timeline", "error", rel, p.last)


def truncated_base(path: str, p: Pristine) -> Expected:
    stat, instant = _base(path, p)
    assert stat.path
    _rewrite(path, stat.path, lambda d: d[:100])
    return Expected("size_mismatch", "error", stat.path, instant)


def missing_base(path: str, p: Pristine) -> Expected:
    stat, instant = _base(path, p)
    assert stat.path
    file_io_for(path).delete(file_io_for(path).join(stat.path))
    return Expected("missing_file", "error", stat.path, instant)


def deleted_inflight(path: str, p: Pristine) -> Expected:
    rel = f".hoodie/{Instant(p.last, _write_action(p), State.INFLIGHT).file_name}"
    io = file_io_for(path)
    assert io.exists(io.join(rel)), rel
    io.delete(io.join(rel))
    return Expected("timeline", "warning", rel, p.last)


DAMAGES: dict[str, Callable[[str, Pristine], Expected]] = {
    f.__name__: f for f in (torn_log_tail, log_cut_short, garbage_commit, empty_commit, truncated_base, missing_base,
                            missing_log, zero_length_log, flipped_log_byte, deleted_inflight)
}
LOG_ONLY = {"torn_log_tail", "log_cut_short", "missing_log", "zero_length_log", "flipped_log_byte"}
CASES = [(storage, table_type, damage) for storage in ("local", "s3") for table_type in (COW, MOR)
         for damage in DAMAGES if table_type == MOR or damage not in LOG_ONLY]


def _matches(problem: Problem, expected: Expected) -> bool:
    return (problem.kind == expected.kind and problem.instant == expected.instant and problem.path is not None
            and problem.path.endswith(expected.rel))


def _doctor(path: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["table", "doctor", path, "--json", *args])
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize(("storage", "table_type", "damage"), CASES)
def test_every_damage_is_reported_with_its_kind_file_and_instant(
        fresh: Callable[[str, str], tuple[str, Pristine]], spark: Any, storage: str, table_type: str,
        damage: str) -> None:
    path, p = fresh(storage, table_type)
    expected = DAMAGES[damage](path, p)
    table = Table.open(path, spark=spark)
    report = table.verify()
    assert not report.ok
    # exactly this problem: nothing else of the table is taken for damage
    assert [(x.kind, x.severity, x.instant) for x in report.problems] == [
        (expected.kind, expected.severity, expected.instant)], report.problems
    assert _matches(report.problems[0], expected), report.problems[0]
    assert any(todo in report.problems[0].message for todo in ("`lakegate table ", "delete", "recreate"))
    # the command line: the report as JSON, exit code 6
    code, doc = _doctor(path)
    assert code == ExitCode.CORRUPT
    assert doc["ok"] is False and doc["path"] == path
    assert [(x["kind"], x["instant"], x["path"]) for x in doc["problems"]] == [
        (x.kind, x.instant, x.path) for x in report.problems]
    # and a read returns the committed rows, or fails naming the same file and instant
    try:
        rows = table.count()
    except TableCorruptError as err:
        assert expected.severity == "error"
        assert err.instant == expected.instant and err.path is not None and err.path.endswith(expected.rel), err
    else:
        assert expected.severity == "warning", f"{damage}: read {rows} rows of a damaged table"
        assert rows == len(p.model)


@pytest.mark.parametrize("storage", ["local", "s3"])
@pytest.mark.parametrize("table_type", [COW, MOR])
def test_clean_tables_pass_without_spark(pristine: Callable[[str, str], Pristine], storage: str, table_type: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def no_spark(*_: Any) -> Any:
        raise AssertionError("the doctor started Spark without --deep")

    monkeypatch.setattr("governance.cli.output.cli_spark_session", no_spark)
    path = pristine(storage, table_type).path
    report = verify_table(path)  # no engine: a check that needed one would raise ConfigError
    assert report.ok, report.problems
    assert report.partitions == 2 and report.files_checked >= 6 and not report.deep
    code, doc = _doctor(path)
    assert code == ExitCode.OK and doc == {**report.to_dict(), "elapsed": doc["elapsed"]}


def test_the_command_line_prints_problems_for_humans(fresh: Callable[[str, str], tuple[str, Pristine]],
                                                     pristine: Callable[[str, str], Pristine]) -> None:
    path, p = fresh("local", MOR)
    expected = missing_log(path, p)
    result = runner.invoke(app, ["table", "doctor", path], env={"COLUMNS": "300"})
    assert result.exit_code == ExitCode.CORRUPT
    assert "missing_file" in result.stdout and expected.rel in result.stdout and p.last in result.stdout
    assert "1 problem (1 error, 0 warnings)" in result.stdout
    result = runner.invoke(app, ["table", "doctor", p.path])
    assert result.exit_code == ExitCode.OK and "is intact" in result.stdout


def test_what_the_doctor_reports_is_not_logged_as_well(fresh: Callable[[str, str], tuple[str, Pristine]],
                                                       caplog: pytest.LogCaptureFixture) -> None:
    path, p = fresh("local", MOR)
    expected = torn_log_tail(path, p)
    with caplog.at_level(logging.WARNING):
        (problem,) = verify_table(path).problems
    assert problem.kind == "torn_log_tail" and not caplog.records, caplog.text
    text = str(problem)
    assert text.startswith("warning: torn_log_tail: ") and expected.rel in text and p.last in text


def test_importing_tablecore_and_verifying_loads_no_spark(fresh: Callable[[str, str], tuple[str, Pristine]]) -> None:
    path, _ = fresh("local", MOR)
    code = (f"import sys, tablecore; r = tablecore.verify_table({path!r}); "
            f"print(r.ok, sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "True []", out.stdout + out.stderr


def test_tables_after_services_staged_commits_and_rollbacks_pass(
        fresh: Callable[[str, str], tuple[str, Pristine]], spark: Any) -> None:
    """Nothing a service leaves behind is taken for damage: rolled-back logs voided by command blocks, compacted,
    archived and cleaned slices, savepoints, replaced file groups, a staged commit's files, a restore."""
    path, p = fresh("local", MOR)
    table = Table.open(path, spark=spark)
    voided = _log(path, p)
    assert voided.path
    table.rollback(p.last)
    assert table.io.exists(table.io.join(voided.path))  # kept: its blocks are voided by a rollback command block
    assert table.verify().ok
    table.upsert(spark.createDataFrame([(2, "a", 3, "w2"), (3, "b", 3, "w3")], DDL))
    assert table.compact() is not None
    assert table.archive(keep_min=1, keep_max=2) > 0  # the base files' and the voided log's instants are archived
    saved = table.savepoint()
    table.upsert(spark.createDataFrame([(4, "a", 4, "w4")], DDL))
    assert table.clean(retain_commits=1) is not None
    table.insert_overwrite(spark.createDataFrame([(5, "b", 5, "w5")], DDL))
    staged = table.upsert(spark.createDataFrame([(6, "a", 6, "w6")], DDL), stage=True)
    report = table.verify()
    assert report.ok, report.problems
    staged.abort()
    assert table.restore(saved)
    report = table.verify()
    assert report.ok, report.problems


# ---- deep: every row -----------------------------------------------------------------------------------------------

def _corrupt_first_record_length(path: str, p: Pristine) -> WriteStat:
    """Make the first record of the log's data block claim a length past its end, and record the new bytes' CRC-32
    in the commit (as if the file had been written so): the framing and the checksum hold, the records do not
    decode."""
    io = file_io_for(path)
    stat = _log(path, p)
    assert stat.path
    data = bytearray(io.read_bytes(io.join(stat.path)))
    block, _ = read_block_at(bytes(data), 0)
    start = bytes(data).find(block.content)
    assert start > 0
    data[start + 8:start + 12] = (0x7FFF0000).to_bytes(4, "big")  # after int32 version and int32 record count
    io.write_bytes(io.join(stat.path), bytes(data))
    commit = io.join(f".hoodie/{p.last}.deltacommit")
    meta = CommitMetadata.from_bytes(io.read_bytes(commit))
    raw = json.loads(meta.to_bytes())
    for stats in raw["partitionToWriteStats"].values():
        for s in stats:
            if s["path"] == stat.path:
                s["lakegateCrc32"] = checksum(bytes(data))
    io.write_bytes(commit, json.dumps(raw).encode())
    return stat


def test_deep_reads_every_row_and_finds_data_that_does_not_decode(
        fresh: Callable[[str, str], tuple[str, Pristine]], spark: Any) -> None:
    path, p = fresh("local", MOR)
    table = Table.open(path, spark=spark)
    clean = table.verify(deep=True)
    assert clean.ok and clean.deep, clean.problems
    stat = _corrupt_first_record_length(path, p)
    assert verify_table(path).ok  # framing and checksum hold: only reading the rows finds it
    report = table.verify(deep=True)
    assert [(x.kind, x.severity, x.instant) for x in report.problems] == [("unreadable_data", "error", p.last)]
    assert stat.path and report.problems[0].path and report.problems[0].path.endswith(stat.path)
    code, doc = _doctor(path, "--deep")
    assert code == ExitCode.CORRUPT and [x["kind"] for x in doc["problems"]] == ["unreadable_data"]
    # a file the quick checks found damaged is reported once: the deep check does not read its slice again
    expected = flipped_log_byte(path, p)
    assert [(x.kind, x.path and x.path.endswith(expected.rel)) for x in table.verify(deep=True).problems] == [
        ("log_damage", True)]


def test_deep_needs_an_engine(fresh: Callable[[str, str], tuple[str, Pristine]]) -> None:
    from tablecore import ConfigError

    path, _ = fresh("local", COW)
    with pytest.raises(ConfigError, match="engine"):
        verify_table(path, deep=True)


# ---- properties, orphans, leftovers --------------------------------------------------------------------------------

def test_properties_damaged_or_differing_from_their_backup(fresh: Callable[[str, str], tuple[str, Pristine]]) -> None:
    path, _ = fresh("local", COW)
    io = file_io_for(path)
    props, backup = io.join(".hoodie/hoodie.properties"), io.join(".hoodie/hoodie.properties.backup")
    good = io.read_bytes(props)
    io.write_bytes(backup, good)  # a backup equal to the main file: a rewrite that wrote the same text
    assert verify_table(path).ok
    io.write_bytes(backup, good.replace(b"hoodie.table.precombine.field=ts", b"hoodie.table.precombine.field=v"))
    (problem,) = verify_table(path).problems
    assert (problem.kind, problem.severity, problem.path) == ("properties", "warning", backup)
    assert "hoodie.table.precombine.field" in problem.message and "--properties-from-backup" in problem.message
    io.write_bytes(backup, good)
    io.write_bytes(props, re.sub(rb"hoodie.table.checksum=\d+", b"hoodie.table.checksum=1", good))
    (problem,) = verify_table(path).problems
    assert (problem.kind, problem.severity, problem.path) == ("properties", "error", props)
    assert f"lakegate table repair {path} --properties-from-backup" in problem.message
    io.delete(backup)
    io.write_bytes(props, b"\xff\xfe")
    (problem,) = verify_table(path).problems
    assert problem.severity == "error" and "no intact backup" in problem.message
    io.delete(props)
    (problem,) = verify_table(path).problems
    assert (problem.kind, problem.path) == ("properties", props) and "missing" in problem.message


def test_no_table_exits_3(tmp_path: Path) -> None:
    result = runner.invoke(app, ["table", "doctor", str(tmp_path / "nothing"), "--json"])
    assert result.exit_code == ExitCode.NOT_FOUND and result.stdout == ""
    assert "no table at" in result.stderr


def test_orphan_and_half_written_files(fresh: Callable[[str, str], tuple[str, Pristine]]) -> None:
    path, p = fresh("local", COW)
    io = file_io_for(path)
    stat, instant = _base(path, p)
    assert stat.path
    partition, name = stat.path.rsplit("/", 1)
    data = io.read_bytes(io.join(stat.path))
    file_id = name.split("_", 1)[0]
    gone = f"{partition}/{file_id}_0-1-1_99991231235959999.parquet"  # an instant the timeline does not have
    uncommitted = f"{partition}/deadbeef-0000-0000-0000-000000000000-0_0-1-1_{instant}.parquet"
    io.write_bytes(io.join(gone), data)
    io.write_bytes(io.join(uncommitted), data)
    io.write_bytes(io.join(f"{partition}/x.parquet.0123abcd.tmp"), b"half")
    io.write_bytes(io.join(f".hoodie/.temp/{p.last}/{partition}/.f.log.1_0-1-1"), b"half")
    older = f"{partition}/{file_id}_0-1-1_00000000000001.parquet"  # archived: older than the active timeline
    io.write_bytes(io.join(older), data)
    problems = {(x.kind, x.severity, x.path.rsplit("/", 1)[-1] if x.path else None, x.instant)
                for x in verify_table(path).problems}
    assert problems == {
        ("orphan_file", "warning", gone.rsplit("/", 1)[-1], "99991231235959999"),
        ("orphan_file", "error", uncommitted.rsplit("/", 1)[-1], instant),
        ("half_written", "warning", "x.parquet.0123abcd.tmp", None),
        ("half_written", "warning", p.last, p.last),
    }


# ---- tables written by Apache Hudi, and a year of partitions -------------------------------------------------------

@pytest.mark.parametrize("name", sorted(z.stem for z in (FIXTURES / "hudi-v6").glob("*.zip")))
def test_tables_apache_hudi_wrote_pass(name: str, tmp_path: Path) -> None:
    with zipfile.ZipFile(FIXTURES / "hudi-v6" / f"{name}.zip") as z:
        z.extractall(tmp_path)
    (props,) = [q for q in tmp_path.rglob(".hoodie/hoodie.properties") if "__MACOSX" not in q.parts]
    report = verify_table(str(props.parent.parent))
    assert report.ok, report.problems


@pytest.fixture(scope="module")
def year_table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """365 daily partitions, two rows each, one bulk insert (the doctor's timing is measured in
    ``benchmarks/doctor.py``)."""
    path = str(tmp_path_factory.mktemp("year") / "t")
    cfg = TableConfig(name="year", record_key=["id"], ordering_field="ts", partition_fields=["dt"])
    table = Table.create(path, cfg, spark=spark)
    rows = spark.sql("SELECT id, date_format(date_add(DATE'2024-01-01', CAST(id % 365 AS INT)), 'yyyy-MM-dd') AS dt, "
                     "id AS ts FROM range(730)")
    table.bulk_insert(rows)
    yield path


def test_a_clean_table_of_365_partitions_passes_without_spark(year_table: str) -> None:
    report: IntegrityReport = verify_table(year_table)  # no engine: nothing here may need one
    assert report.ok, report.problems[:5]
    assert report.partitions == 365 and report.files_checked >= 365 + 3


def test_deep_names_the_keys_read_more_than_once_in_a_partition(spark: Any, tmp_path: Path) -> None:
    """An insert looks at nothing stored: keys it writes again (no small file takes them) go to a second file group,
    and every reader returns both copies. The deep check names the first ten as warnings and counts the rest;
    deleting the keys and upserting the rows to keep clears them."""
    from tests.tablecore.data import frame, row
    from tests.tablecore.oracle import hudi_snapshot

    cfg = TableConfig(name="dups", record_key=["id"], ordering_field="ts", partition_fields=["city"],
                      table_type="MERGE_ON_READ", small_file_limit=0)
    path = str(tmp_path / "dups")
    table = Table.create(path, cfg, spark=spark)
    table.upsert(frame(spark, [row(i) for i in range(12)]))
    assert table.verify(deep=True).ok
    table.insert(frame(spark, [row(i, version=1) for i in range(12)]))
    assert len(hudi_snapshot(path)) == 24  # every reader returns both copies
    assert verify_table(path).ok  # the files are sound: only reading the rows finds it
    report = table.verify(deep=True)
    assert [(p.kind, p.severity, p.instant) for p in report.problems] == [("duplicate_key", "warning", None)] * 11
    named = [re.search(r"key '(\d+)' of partition 'city=sf' is read 2 times \(file groups (\S+), (\S+)\)", p.message)
             for p in report.problems if p.path == file_io_for(path).join("city=sf")]
    assert len(named) == 10 and all(m is not None for m in named)
    assert sorted(m.group(1) for m in named if m) == sorted(str(i) for i in range(12))[:10]
    assert all(m.group(2) != m.group(3) for m in named if m)
    (rest,) = [p for p in report.problems if p.path == file_io_for(path).base]
    assert rest.message.startswith("2 more keys are read more than once")
    code, doc = _doctor(path, "--deep")
    assert code == ExitCode.CORRUPT and {x["kind"] for x in doc["problems"]} == {"duplicate_key"}
    # the repair the message gives: delete the keys, upsert the rows to keep
    table.delete(frame(spark, [row(i) for i in range(12)]).select("id", "city"))
    table.upsert(frame(spark, [row(i, version=2) for i in range(12)]))
    assert table.verify(deep=True).ok
    assert len(hudi_snapshot(path)) == 12
