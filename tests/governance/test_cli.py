"""The ``lakegate`` command line in-process (Typer's CliRunner): every command on real tables and a live registry,
``--json`` documents, and each exit code."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner, Result

from governance.cli import app
from governance.cli.output import ExitCode, exit_code_for, register_exit_code
from governance.cli.schema_commands import parse_reasons
from governance.cli.table_commands import parse_size
from schema_registry.server.auth import Authenticator
from schema_registry.settings import Settings
from tablecore import Table
from tests.schema_registry.conftest import LiveServer, free_port

COLUMNS = "uuid string, dt string, ts long, fare double"
DAY1, DAY2 = "2026-11-18", "2026-11-19"

# the width a wide terminal gives Rich's tables (pytest-xdist's workers set COLUMNS=80, which the CLI honours and
# which folds the cells these tests look for)
runner = CliRunner(env={"COLUMNS": "200"})


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """Invoke ``lakegate ARGS``; stdout and stderr stay apart."""
    return runner.invoke(app, list(args), input=input, env=env)


def run_json(*args: str, code: int = 0) -> Any:
    """Invoke with ``--json``, check the exit code and that stdout is exactly one JSON document."""
    result = run(*args, "--json")
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def fails(result: Result, code: ExitCode, text: str) -> None:
    """The command ended with ``code``, one ``error: ...`` line naming ``text`` on stderr and nothing on stdout."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    assert text in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def rows(spark: SparkSession, data: list[tuple[str, str, int, float]]) -> Any:
    return spark.createDataFrame(data, COLUMNS)


def batch1() -> list[tuple[str, str, int, float]]:
    return [(f"trip-{i:05d}", DAY1 if i < 6 else DAY2, 1_000 + i, 10.0 + i) for i in range(10)]


def batch2() -> list[tuple[str, str, int, float]]:
    updates = [(f"trip-{i:05d}", DAY1, 2_000 + i, 100.0 + i) for i in range(3)]
    return updates + [(f"trip-{i:05d}", DAY2, 2_000 + i, 20.0 + i) for i in (10, 11)]


def make_table(spark: SparkSession, path: Path | str, kind: str = "mor") -> tuple[Table, list[str]]:
    """A trips table created through the CLI, then two upserts: 10 inserts; 3 updates on DAY1 + 2 inserts."""
    result = run("table", "create", str(path), "--name", "trips", "--key", "uuid", "--ordering-field", "ts",
                 "--partition", "dt", "--type", kind)
    assert result.exit_code == 0, result.stderr
    table = Table.open(str(path), spark=spark)
    instants = [table.upsert(rows(spark, batch1())).instant, table.upsert(rows(spark, batch2())).instant]
    return table, instants


@pytest.fixture(scope="module", params=["local", "s3"])
def trips(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory,
          request: pytest.FixtureRequest) -> tuple[str, list[str]]:
    """A merge-on-read trips table shared by the read-only tests, on a local disk, then on the S3 test server: its
    path and two write instants."""
    where = request.getfixturevalue("s3").table_uri("trips") if request.param == "s3" else \
        tmp_path_factory.mktemp("cli") / "trips"
    table, instants = make_table(spark, where)
    return table.path, instants


@pytest.fixture(params=["local", "s3"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """Table locations by name: in ``tmp_path``, then under a fresh prefix of the S3 test server."""
    if request.param == "s3":
        server = request.getfixturevalue("s3")
        return lambda name: server.table_uri(name)
    return lambda name: str(tmp_path / name)


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A live registry server on 127.0.0.1 (SQLite) for the module."""
    live = LiveServer(Settings(store_url=f"sqlite:///{tmp_path_factory.mktemp('registry') / 'r.db'}", port=0))
    yield live.url
    live.stop()


# ---- root, help, exit-code mapping ------------------------------------------------------------------------------

def test_help_lists_the_command_tree() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for group in ("registry", "schema", "table", "demo", "--log-level", "--debug"):
        assert group in result.stdout
    table_help = run("table", "--help").stdout
    for command in ("create", "show", "history", "read", "changes", "compact", "cluster", "clean", "rollback",
                    "savepoint", "restore"):
        assert command in table_help
    assert "--limit" in run("table", "read", "--help").stdout
    assert "LAKEGATE_REGISTRY_URL" in run("schema", "check", "--help").stdout


def test_help_imports_no_spark() -> None:
    import subprocess
    import sys

    code = "import sys; from governance.cli import main; main(['--help']); print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False")


def test_usage_errors_exit_2() -> None:
    assert run("table", "nosuch").exit_code == ExitCode.USAGE
    assert run("--log-level", "LOUD", "table", "--help").exit_code == ExitCode.USAGE
    assert run("table", "read").exit_code == ExitCode.USAGE  # PATH missing
    assert run("table", "read", "/x", "--view", "sideways").exit_code == ExitCode.USAGE


def test_exit_codes_of_the_exception_trees() -> None:
    from schema_registry.errors import (
        IncompatibleSchemaError,
        InvalidSchemaError,
        SubjectNotFoundError,
        TransportError,
        VersionNotFoundError,
    )
    from tablecore import (
        CommitConflictError,
        ConfigError,
        InstantNotFoundError,
        LockTimeoutError,
        RollbackError,
        TableExistsError,
        TableNotFoundError,
    )
    from validators import SchemaResolutionError, SuiteConfigError, ValidationFailed

    expected = {
        ConfigError("x"): 2, TableNotFoundError("x"): 3, InstantNotFoundError("x"): 3, TableExistsError("x"): 4,
        CommitConflictError("x"): 4, LockTimeoutError("x"): 4, RollbackError("x"): 4, InvalidSchemaError("x"): 2,
        SubjectNotFoundError("x"): 3, VersionNotFoundError("x"): 3, IncompatibleSchemaError("x"): 4,
        TransportError("x"): 1, SuiteConfigError("x"): 2, SchemaResolutionError("x"): 3,
        ValidationFailed(SimpleNamespace(checks=[], suite="s")): 5, RuntimeError("x"): 1,  # type: ignore[arg-type]
    }
    assert {type(e).__name__: exit_code_for(e) for e in expected} == {type(e).__name__: c for e, c in expected.items()}

    class AuditBlocked(Exception):
        pass

    register_exit_code(AuditBlocked, ExitCode.BLOCKED)
    assert exit_code_for(AuditBlocked()) == ExitCode.BLOCKED


def test_every_exception_of_every_package_has_a_deliberate_exit_code() -> None:
    """Each exception type the four packages define is in the exit-code table itself, or inherits from one that is
    and belongs to the same package (a new error type never falls through to INTERNAL by accident)."""
    import inspect

    import governance.errors
    import schema_registry.errors
    import tablecore.exceptions
    import validators.errors
    from governance.cli.output import exit_codes

    table = exit_codes()
    for module in (tablecore.exceptions, schema_registry.errors, validators.errors, governance.errors):
        package = module.__name__.split(".")[0]
        defined = [c for _, c in inspect.getmembers(module, inspect.isclass)
                   if issubclass(c, Exception) and c.__module__ == module.__name__]
        assert defined, module.__name__
        for cls in defined:
            mapped = next((base for base in cls.__mro__ if base in table), None)
            assert mapped is not None and mapped.__module__.split(".")[0] == package, f"{cls.__qualname__}"


def test_internal_error_is_one_line_without_traceback_unless_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(out: Any, base_dir: str | None) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr("governance.demo.run_demo", boom)
    result = run("demo")
    fails(result, ExitCode.INTERNAL, "error: internal error: RuntimeError: boom (run with --debug for the traceback)")
    assert result.stderr.count("\n") == 1
    debug = run("--debug", "demo")
    assert debug.exit_code == ExitCode.INTERNAL
    assert "Traceback" in debug.stderr and "RuntimeError: boom" in debug.stderr


def test_demo_calls_run_demo_with_the_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[str | None] = []

    def fake(out: Any, base_dir: str | None) -> str:
        calls.append(base_dir)
        out.write("demo ran\n")
        return str(tmp_path)

    monkeypatch.setattr("governance.demo.run_demo", fake)
    result = run("demo", "--dir", str(tmp_path))
    assert result.exit_code == 0 and calls == [str(tmp_path)] and result.stdout == "demo ran\n"


def test_parse_size_and_reasons() -> None:
    assert parse_size("128MB") == 128 * 1024**2 and parse_size("1g") == 1024**3 and parse_size("4096") == 4096
    reasons = parse_reasons([
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'b' at path '/fields/1' in the new "
        "schema has no default value and is missing in the old schema', additionalInfo:'b'}",
        "{oldSchemaVersion: 1}", "{compatibility: 'BACKWARD'}"])
    assert [(r.error_type, r.additional_info) for r in reasons] == [("READER_FIELD_MISSING_DEFAULT_VALUE", "b")]
    assert reasons[0].description.startswith("The field 'b' at path '/fields/1'")


# ---- tables: create, show, history, read, changes ----------------------------------------------------------------


@pytest.mark.spark
def test_create_json_and_errors(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    doc = run_json("table", "create", path, "--name", "rides", "-k", "city,uuid", "-p", "dt", "--type", "mor",
                   "--index", "bucket", "--buckets", "4", "--merge-mode", "event-time", "--ordering-field", "ts",
                   "--target-file-size", "64MB", "--small-file-limit", "8MB", "--schema", "uuid string, city string, "
                   "dt string, ts long")
    config = doc["config"]
    assert (doc["name"], config["table_type"], config["record_key"], config["partition_fields"]) == \
        ("rides", "MERGE_ON_READ", ["city", "uuid"], ["dt"])
    assert (config["index_type"], config["bucket_count"], config["merge_mode"]) == ("BUCKET", 4, "EVENT_TIME_ORDERING")
    assert (config["target_file_size"], config["small_file_limit"]) == (64 * 1024**2, 8 * 1024**2)
    assert [f.name for f in Table.open(path, spark=spark).schema().fields] == ["uuid", "city", "dt", "ts"]  # type: ignore[union-attr]

    fails(run("table", "create", path, "--name", "rides", "-k", "uuid"), ExitCode.CONFLICT, "already exists")
    fails(run("table", "create", str(tmp_path / "u"), "--name", "no/slash", "-k", "uuid"), ExitCode.USAGE,
          "error: invalid table config: name")
    fails(run("table", "create", str(tmp_path / "u"), "--name", "u", "-k", "uuid", "--index", "bucket"),
          ExitCode.USAGE, "bucket_count")
    fails(run("table", "create", str(tmp_path / "u"), "--name", "u", "-k", "uuid", "--schema", "uuid strin g,"),
          ExitCode.USAGE, "error: ")
    assert run("table", "create", str(tmp_path / "u"), "--name", "u", "-k", "uuid",
               "--target-file-size", "huge").exit_code == ExitCode.USAGE
    bloom = run_json("table", "create", str(tmp_path / "b"), "--name", "b", "-k", "uuid", "--index", "bloom")
    assert bloom["config"]["index_type"] == "BLOOM"


@pytest.mark.spark
def test_show_and_history(trips: tuple[str, list[str]]) -> None:
    path, (i1, i2) = trips
    doc = run_json("table", "show", path)
    assert doc["name"] == "trips" and doc["config"]["table_type"] == "MERGE_ON_READ"
    assert [c["name"] for c in doc["schema"]] == ["uuid", "dt", "ts", "fare"]
    assert doc["latest_instant"] == i2 and doc["savepoints"] == [] and doc["staged"] == []
    assert doc["rows"] == 12  # 10 inserted, then 2 more and 3 updated
    assert [i["instant"] for i in doc["timeline"]] == [i1, i2]
    human = run("table", "show", path)
    assert human.exit_code == 0 and "MERGE_ON_READ" in human.stdout and "fare" in human.stdout

    history = run_json("table", "history", path)["instants"]
    assert [(h["instant"], h["action"], h["state"], h["operation"]) for h in history] == \
        [(i1, "deltacommit", "completed", "UPSERT"), (i2, "deltacommit", "completed", "UPSERT")]
    assert (history[0]["inserted"], history[0]["updated"]) == (10, 0)
    assert (history[1]["inserted"], history[1]["updated"]) == (2, 3)
    human = run("table", "history", path)
    assert human.exit_code == 0 and i1 in human.stdout and "UPSERT" in human.stdout


@pytest.mark.spark
def test_read_snapshot_time_travel_view_where_limit(trips: tuple[str, list[str]]) -> None:
    path, (i1, _) = trips
    doc = run_json("table", "read", path, "--limit", "5")
    assert doc["limit"] == 5 and doc["truncated"] is True and len(doc["rows"]) == 5
    assert doc["columns"] == ["_hoodie_commit_time", "uuid", "dt", "ts", "fare"]

    doc = run_json("table", "read", path, "--limit", "100")
    assert doc["truncated"] is False and len(doc["rows"]) == 12
    assert {r["uuid"]: r["fare"] for r in doc["rows"]}["trip-00001"] == 101.0

    where = "uuid = 'trip-00001'"
    assert [r["fare"] for r in run_json("table", "read", path, "--where", where)["rows"]] == [101.0]
    assert [r["fare"] for r in run_json("table", "read", path, "--where", where, "--as-of", i1)["rows"]] == [11.0]
    # merge-on-read: the update is still in a log file, the read-optimized view reads base files only
    ro = run_json("table", "read", path, "--where", where, "--view", "read_optimized")
    assert [r["fare"] for r in ro["rows"]] == [11.0] and ro["view"] == "read_optimized"

    doc = run_json("table", "read", path, "--where", where, "-c", "uuid", "-c", "fare")
    assert doc["columns"] == ["uuid", "fare"] and doc["rows"] == [{"uuid": "trip-00001", "fare": 101.0}]
    meta = run_json("table", "read", path, "--where", where, "--meta")
    assert meta["rows"][0]["_hoodie_record_key"] == "trip-00001" and meta["rows"][0]["_hoodie_partition_path"] == \
        f"dt={DAY1}"
    assert run_json("table", "read", path, "--limit", "0")["rows"] == []

    human = run("table", "read", path, "--limit", "3")
    assert human.exit_code == 0 and "3 rows shown, more match" in human.stdout and "trip-" in human.stdout


@pytest.mark.spark
def test_read_errors(trips: tuple[str, list[str]], tmp_path: Path) -> None:
    path, _ = trips
    fails(run("table", "read", str(tmp_path / "nothing"), "--json"), ExitCode.NOT_FOUND, "error: no table at")
    fails(run("table", "read", path, "--as-of", "20000101000000000"), ExitCode.NOT_FOUND,
          "is not a completed commit")
    fails(run("table", "read", path, "--where", "no_such_column = 1"), ExitCode.USAGE, "no_such_column")
    fails(run("table", "read", path, "--where", "uuid = = ="), ExitCode.USAGE, "error: ")
    fails(run("table", "read", path, "-c", "nope"), ExitCode.USAGE, "nope")


@pytest.mark.spark
def test_changes(trips: tuple[str, list[str]]) -> None:
    path, (i1, i2) = trips
    doc = run_json("table", "changes", path, "--start", i1)
    assert (doc["start"], doc["end"]) == (i1, None)
    assert sorted((r["uuid"], r["fare"]) for r in doc["rows"]) == \
        [("trip-00000", 100.0), ("trip-00001", 101.0), ("trip-00002", 102.0), ("trip-00010", 30.0),
         ("trip-00011", 31.0)]
    assert {r["_hoodie_commit_time"] for r in doc["rows"]} == {i2}
    first = run_json("table", "changes", path, "--start", "0", "--end", i1, "--limit", "50")
    assert len(first["rows"]) == 10 and {r["_hoodie_commit_time"] for r in first["rows"]} == {i1}
    assert len(run_json("table", "changes", path, "--start", "0", "--limit", "4")["rows"]) == 4
    fails(run("table", "changes", path, "--start", i2, "--end", i1), ExitCode.USAGE, "empty or inverted")
    fails(run("table", "changes", path, "--start", "0", "--end", "20000101000000000"), ExitCode.NOT_FOUND,
          "not a completed commit")
    assert run("table", "changes", path).exit_code == ExitCode.USAGE  # --start is required


# ---- table services ----------------------------------------------------------------------------------------------

@pytest.mark.spark
def test_compact(spark: SparkSession, lake: Callable[[str], str]) -> None:
    table, _ = make_table(spark, lake("mor"))
    doc = run_json("table", "compact", table.path)
    assert doc["compacted"] is True and doc["result"]["operation"] == "COMPACT"
    where = "uuid = 'trip-00001'"
    ro = run_json("table", "read", table.path, "--where", where, "--view", "read_optimized")
    assert [r["fare"] for r in ro["rows"]] == [101.0]  # now in a base file
    assert run_json("table", "compact", table.path)["compacted"] is False
    history = run_json("table", "history", table.path)["instants"]
    assert history[-1]["action"] == "commit" and history[-1]["operation"] == "COMPACT"

    cow, _ = make_table(spark, lake("cow"), kind="cow")
    human = run("table", "compact", cow.path)
    assert human.exit_code == 0 and "nothing to compact: a copy-on-write table" in human.stdout


@pytest.mark.spark
def test_cluster(spark: SparkSession, lake: Callable[[str], str]) -> None:
    table, _ = make_table(spark, lake("cow"), kind="cow")
    before = sorted(tuple(r.values()) for r in run_json("table", "read", table.path, "-c", "uuid,fare")["rows"])
    doc = run_json("table", "cluster", table.path, "--sort-by", "ts")
    assert doc["clustered"] is True and doc["result"]["operation"] == "CLUSTER"
    after = sorted(tuple(r.values()) for r in run_json("table", "read", table.path, "-c", "uuid,fare")["rows"])
    assert after == before
    fails(run("table", "cluster", table.path, "--sort-by", "nope"), ExitCode.USAGE, "nope")


@pytest.mark.spark
def test_clean(spark: SparkSession, lake: Callable[[str], str]) -> None:
    table, (i1, _) = make_table(spark, lake("cow"), kind="cow")
    table.upsert(rows(spark, batch2()))
    assert run("table", "clean", table.path, "--retain-commits", "1", "--retain-file-versions", "1").exit_code == \
        ExitCode.USAGE
    assert run("table", "clean", table.path, "--retain-commits", "0").exit_code == ExitCode.USAGE
    doc = run_json("table", "clean", table.path, "--retain-commits", "1")
    assert doc["cleaned"] is True and doc["result"]["files_deleted"] > 0
    assert doc["result"]["earliest_retained"] > i1
    fails(run("table", "read", table.path, "--as-of", i1), ExitCode.NOT_FOUND, "cleaned range")
    assert run_json("table", "clean", table.path, "--retain-commits", "1")["cleaned"] is False


@pytest.mark.spark
def test_rollback(spark: SparkSession, lake: Callable[[str], str]) -> None:
    table, (i1, i2) = make_table(spark, lake("mor"))
    fails(run("table", "rollback", table.path, i1), ExitCode.CONFLICT, "error: ")  # not the newest write
    fails(run("table", "rollback", table.path, "20000101000000000"), ExitCode.NOT_FOUND, "not on the timeline")
    doc = run_json("table", "rollback", table.path, i2)
    assert doc["rolled_back"] == i2 and doc["action"] == "deltacommit"
    read = run_json("table", "read", table.path, "--limit", "50")["rows"]
    assert len(read) == 10 and {r["uuid"]: r["fare"] for r in read}["trip-00001"] == 11.0
    assert [h["instant"] for h in run_json("table", "history", table.path)["instants"]
            if h["action"] == "deltacommit"] == [i1]


@pytest.mark.spark
def test_savepoint_and_restore(spark: SparkSession, lake: Callable[[str], str]) -> None:
    table, (i1, i2) = make_table(spark, lake("cow"), kind="cow")
    fails(run("table", "restore", table.path, i1), ExitCode.NOT_FOUND, "error: ")  # not savepointed
    fails(run("table", "savepoint", table.path, "20000101000000000"), ExitCode.NOT_FOUND, "error: ")
    doc = run_json("table", "savepoint", table.path, i1)
    assert doc["savepoint"] == i1 and doc["savepoints"] == [i1]
    human = run("table", "savepoint", table.path)  # default: the latest write
    assert human.exit_code == 0 and f"savepointed {i2}" in human.stdout
    fails(run("table", "restore", table.path, i1), ExitCode.CONFLICT, "error: ")  # a later instant is savepointed
    table.delete_savepoint(i2)
    doc = run_json("table", "restore", table.path, i1)
    assert doc["restored_to"] == i1 and doc["rolled_back"] == [i2]
    read = run_json("table", "read", table.path, "--limit", "50")["rows"]
    assert len(read) == 10 and {r["uuid"]: r["fare"] for r in read}["trip-00002"] == 12.0
    assert run_json("table", "show", table.path)["savepoints"] == [i1]


# ---- schemas and the registry ------------------------------------------------------------------------------------

def _schema(tmp_path: Path, name: str, *fields: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.avsc"
    path.write_text(json.dumps({"type": "record", "name": "Trip", "fields": list(fields)}))
    return str(path)


UUID = {"name": "uuid", "type": "string", "semanticType": "uuid"}
AGE = {"name": "rider_age", "type": "int", "semanticType": "age_years"}


@pytest.mark.integration
def test_schema_register_show_check(registry_url: str, tmp_path: Path) -> None:
    v1 = _schema(tmp_path, "v1", UUID, AGE)
    doc = run_json("schema", "register", "trips-value", v1, "--url", registry_url)
    assert (doc["subject"], doc["version"]) == ("trips-value", 1)
    assert run_json("schema", "register", "trips-value", v1, "--url", registry_url) == doc  # idempotent

    # a compatible evolution: a new field with a default; FILE from stdin, URL from the environment
    v2 = json.dumps({"type": "record", "name": "Trip",
                     "fields": [UUID, AGE, {"name": "tip", "type": "double", "default": 0.0}]})
    env = {"LAKEGATE_REGISTRY_URL": registry_url}
    check = run("schema", "check", "trips-value", "-", "--json", input=v2, env=env)
    assert check.exit_code == 0 and json.loads(check.stdout)["is_compatible"] is True
    assert json.loads(check.stdout)["level"] == "BACKWARD"
    registered = run("schema", "register", "trips-value", "-", "--json", input=v2, env=env)
    assert registered.exit_code == 0 and json.loads(registered.stdout)["version"] == 2

    shown = run_json("schema", "show", "trips-value", "--url", registry_url)
    assert (shown["version"], shown["versions"]) == (2, [1, 2])
    assert [f["name"] for f in shown["schema"]["fields"]] == ["uuid", "rider_age", "tip"]
    assert run_json("schema", "show", "trips-value", "--version", "1", "--url", registry_url)["id"] == doc["id"]
    human = run("schema", "show", "trips-value", "--url", registry_url)
    assert human.exit_code == 0 and "age_years" in human.stdout and "rider_age" in human.stdout

    # incompatible: a new field without a default; narrowing a semantic type
    bad = _schema(tmp_path, "bad", UUID, AGE, {"name": "tip", "type": "double", "default": 0.0},
                  {"name": "city", "type": "string"})
    report = run_json("schema", "check", "trips-value", bad, "--url", registry_url, code=ExitCode.CONFLICT)
    assert report["is_compatible"] is False
    assert [(r["error_type"], r["additional_info"]) for r in report["reasons"]] == \
        [("READER_FIELD_MISSING_DEFAULT_VALUE", "city")]
    human = run("schema", "check", "trips-value", bad, "--url", registry_url)
    assert human.exit_code == ExitCode.CONFLICT and "incompatible" in human.stdout and "'city'" in human.stdout
    fails(run("schema", "register", "trips-value", bad, "--url", registry_url), ExitCode.CONFLICT,
          "error: Schema being registered is incompatible")
    assert run_json("schema", "check", "trips-value", bad, "--version", "1", "--url", registry_url,
                    code=ExitCode.CONFLICT)["against"] == "1"


@pytest.mark.integration
def test_schema_errors(registry_url: str, tmp_path: Path) -> None:
    url = ("--url", registry_url)
    fails(run("schema", "show", "no-such-subject", *url), ExitCode.NOT_FOUND, "error: Subject 'no-such-subject'")
    run_json("schema", "register", "errs-value", _schema(tmp_path, "e", UUID), *url)
    fails(run("schema", "show", "errs-value", "--version", "9", *url), ExitCode.NOT_FOUND, "error: ")
    fails(run("schema", "show", "errs-value", "--version", "x", *url), ExitCode.USAGE, "error: ")
    invalid = tmp_path / "invalid.avsc"
    invalid.write_text('{"type": "record", "name": "T", "fields": [{"name": "a", "type": "strang"}]}')
    fails(run("schema", "register", "errs-value", str(invalid), *url), ExitCode.USAGE, "error: ")
    unknown = _schema(tmp_path, "u", {"name": "a", "type": "string", "semanticType": "no_such_type"})
    fails(run("schema", "register", "errs-value", unknown, *url), ExitCode.USAGE, "no_such_type")
    (tmp_path / "empty.avsc").write_text("  \n")
    fails(run("schema", "register", "errs-value", str(tmp_path / "empty.avsc"), *url), ExitCode.USAGE, "empty")
    assert run("schema", "register", "errs-value", str(tmp_path / "missing.avsc"), *url).exit_code == ExitCode.USAGE
    fails(run("schema", "show", "errs-value", "--user", "alice", *url), ExitCode.USAGE, "go together")
    down = f"http://127.0.0.1:{free_port()}"
    fails(run("schema", "show", "errs-value", "--url", down), ExitCode.INTERNAL, "error: GET /subjects")


def test_registry_hash_password_and_bad_store(tmp_path: Path) -> None:
    result = run("registry", "hash-password", input="s3cret\n")
    assert result.exit_code == 0
    config = tmp_path / "auth.toml"
    config.write_text(f'[[users]]\nname = "ops"\npassword_hash = "{result.stdout.strip()}"\nrole = "admin"\n')
    principal = Authenticator.from_file(config).authenticate("Basic " + base64.b64encode(b"ops:s3cret").decode())
    assert principal.name == "ops"
    fails(run("registry", "hash-password", input=""), ExitCode.USAGE, "error: no password on stdin")
    fails(run("registry", "serve", "--port", str(free_port()), "--store", "mysql://nowhere/x"), ExitCode.USAGE,
          "unsupported store URL")
    assert run("registry", "serve", "--incompatible-error-code", "500").exit_code == ExitCode.USAGE
    fails(run("registry", "serve", "--port", str(free_port()), "--store", f"sqlite:///{tmp_path / 'r.db'}",
              "--default-compatibility", "SIDEWAYS"), ExitCode.USAGE, "error: ")


@pytest.mark.spark
def test_changes_cdc(trips: tuple[str, list[str]]) -> None:
    path, (i1, i2) = trips
    doc = run_json("table", "changes", path, "--start", i1, "--cdc")
    assert doc["cdc"] is True
    # the second commit updated three trips and inserted two: each with its before and after image
    got = sorted((r["op"], r["record_key"], r["before_fare"], r["after_fare"]) for r in doc["rows"])
    assert got == [("i", "trip-00010", None, 30.0), ("i", "trip-00011", None, 31.0),
                   ("u", "trip-00000", 10.0, 100.0), ("u", "trip-00001", 11.0, 101.0),
                   ("u", "trip-00002", 12.0, 102.0)]
    assert {r["commit_time"] for r in doc["rows"]} == {i2}
    assert not any(c.startswith(("before__hoodie", "after__hoodie")) for c in doc["columns"])
    with_meta = run_json("table", "changes", path, "--start", i1, "--cdc", "--meta")
    assert "after__hoodie_commit_time" in with_meta["columns"]
    first = run_json("table", "changes", path, "--start", "0", "--end", i1, "--cdc", "--limit", "50")
    assert len(first["rows"]) == 10 and {r["op"] for r in first["rows"]} == {"i"}
    fails(run("table", "changes", path, "--start", i2, "--end", i1, "--cdc"), ExitCode.USAGE, "empty or inverted")


@pytest.mark.spark
def test_create_with_cdc_log_files(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    doc = run_json("table", "create", path, "--name", "trips", "--key", "uuid", "--partition", "dt",
                   "--cdc", "data_before")
    assert (doc["config"]["cdc_enabled"], doc["config"]["cdc_mode"]) == (True, "DATA_BEFORE")
    props = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.cdc.supplemental.logging.mode=DATA_BEFORE" in props
    plain = run_json("table", "create", str(tmp_path / "u"), "--name", "u", "--key", "uuid")
    assert plain["config"]["cdc_enabled"] is False
    assert "hoodie.table.cdc" not in (tmp_path / "u" / ".hoodie" / "hoodie.properties").read_text()
    fails(run("table", "create", str(tmp_path / "v"), "--name", "v", "--key", "uuid", "--cdc", "everything"),
          ExitCode.USAGE, "everything")
