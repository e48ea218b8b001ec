"""The command line under bad input (issue 22), in-process (Typer's CliRunner) and without a JVM: every command that
reads a user file, given bytes that are not UTF-8, a directory or text that does not parse, and every command that
takes a table path, given a file where a table directory is expected, ends with its documented exit code and one
``error:`` line naming the file — before Spark (or a server) starts.

The autouse fixture makes starting Spark, a registry server or the demo fail the test, so "before Spark starts" is
checked in-process whatever other tests of the session started; one subprocess test checks it for a fresh process
(the JVM gateway is never launched).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from governance.cli import app
from governance.cli.inputs import directory_problem, local_path
from governance.cli.output import ExitCode
from tests.governance.test_cli import run, runner
from tests.governance.test_cli_governance import write_pipeline
from tests.schema_registry.conftest import free_port

DEAD_REGISTRY = "http://127.0.0.1:9"
INSTANT = "20260101000000000"


@pytest.fixture(autouse=True)
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a Spark session, the registry server or the demo fails the command (exit 1), hence the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("started although the input was bad")

    monkeypatch.setattr("tablecore.spark.session.session_from_env", refuse)
    monkeypatch.setattr("uvicorn.run", refuse)
    monkeypatch.setattr("governance.demo.run_demo", refuse)


def one_error_line(result: Result, code: ExitCode, *texts: str) -> str:
    """The command ended with ``code``, nothing on stdout, and exactly one line ``error: ...`` on stderr holding every
    text of ``texts`` (no traceback); returns that line."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for text in texts:
        assert text in lines[0], (text, lines[0])
    return lines[0]


# ---- files: not UTF-8, a directory, not parsing ------------------------------------------------------------------

NOT_UTF8 = b"name: trips\ndescription: caf\xe9\n"  # Latin-1: the first bad byte is on line 2
BAD_SYNTAX = {
    "yaml": "name: trips\n  source: {kind: files}\n",  # mapping values are not allowed here (line 2)
    "json": '{"type": "record",\n "name": }\n',
    "toml": "[[users]]\nname = \n",
}


class FileCommand:
    """A command that reads a user file: how to run it on ``bad`` (the file put where the command reads it), in the
    folder ``tmp`` that holds a valid pipeline (``trips.yaml``) and its suite (``suite.yaml``)."""

    def __init__(self, name: str, syntax: str, args: Callable[[Path, Path], list[str]],
                 bad_file: Callable[[Path], Path] = lambda tmp: tmp / "input") -> None:
        self.name = name
        self.syntax = syntax
        self.args = args
        self.bad_file = bad_file

    def __repr__(self) -> str:
        return self.name


def _registry_args(tmp: Path) -> list[str]:
    return ["--port", str(free_port()), "--store", f"sqlite:///{tmp / 'registry.db'}"]


FILE_COMMANDS = [
    FileCommand("pipeline validate", "yaml", lambda tmp, bad: ["pipeline", "validate", str(bad)]),
    FileCommand("pipeline run", "yaml", lambda tmp, bad: ["pipeline", "run", str(bad)]),
    FileCommand("quarantine replay", "yaml", lambda tmp, bad: ["quarantine", "replay", str(bad)]),
    # the suite a valid pipeline names (validate and run load it before Spark starts)
    FileCommand("pipeline validate (suite)", "yaml", lambda tmp, bad: ["pipeline", "validate", str(tmp / "trips.yaml")],
                bad_file=lambda tmp: (tmp / "suite.yaml").resolve()),
    FileCommand("pipeline run (suite)", "yaml", lambda tmp, bad: ["pipeline", "run", str(tmp / "trips.yaml")],
                bad_file=lambda tmp: (tmp / "suite.yaml").resolve()),
    FileCommand("schema register", "json",
                lambda tmp, bad: ["schema", "register", "t-value", str(bad), "--url", DEAD_REGISTRY]),
    FileCommand("schema check", "json",
                lambda tmp, bad: ["schema", "check", "t-value", str(bad), "--url", DEAD_REGISTRY]),
    FileCommand("registry serve --auth-config", "toml",
                lambda tmp, bad: ["registry", "serve", "--auth-config", str(bad), *_registry_args(tmp)]),
]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder with a valid pipeline ``trips.yaml``, its suite and landing files."""
    write_pipeline(tmp_path, DEAD_REGISTRY)
    return tmp_path


def _replace(path: Path, content: bytes | None) -> None:
    """Put ``content`` at ``path`` (None: a directory)."""
    if path.exists():
        path.unlink()
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)


@pytest.mark.parametrize("command", FILE_COMMANDS, ids=repr)
def test_a_file_that_is_not_utf8_exits_2_naming_the_file_line_and_offset(command: FileCommand, folder: Path) -> None:
    bad = command.bad_file(folder)
    _replace(bad, NOT_UTF8)
    offset = NOT_UTF8.index(b"\xe9")
    one_error_line(run(*command.args(folder, bad)), ExitCode.USAGE, f"{bad}:2: ", "not UTF-8 text",
                   f"byte 0xe9 at offset {offset}")


@pytest.mark.parametrize("command", FILE_COMMANDS, ids=repr)
def test_a_directory_instead_of_a_file_exits_2_naming_it(command: FileCommand, folder: Path) -> None:
    bad = command.bad_file(folder)
    _replace(bad, None)
    one_error_line(run(*command.args(folder, bad)), ExitCode.USAGE, str(bad), "Is a directory")


@pytest.mark.parametrize("command", FILE_COMMANDS, ids=repr)
def test_a_file_that_does_not_parse_exits_2_naming_the_file_and_line(command: FileCommand, folder: Path) -> None:
    bad = command.bad_file(folder)
    _replace(bad, BAD_SYNTAX[command.syntax].encode())
    line = one_error_line(run(*command.args(folder, bad)), ExitCode.USAGE, str(bad))
    assert f"{bad}:2" in line or "line 2" in line, line  # the parser's line (TOML says "at line 2, column 8")


@pytest.mark.parametrize("command", FILE_COMMANDS, ids=repr)
def test_a_missing_file_exits_2_naming_it(command: FileCommand, folder: Path) -> None:
    bad = command.bad_file(folder)
    if bad.exists():
        bad.unlink()
    one_error_line(run(*command.args(folder, bad)), ExitCode.USAGE, str(bad))


def test_schema_on_stdin_that_is_not_utf8_or_not_json() -> None:
    raw = runner.invoke(app, ["schema", "register", "t-value", "-", "--url", DEAD_REGISTRY], input=NOT_UTF8)
    one_error_line(raw, ExitCode.USAGE, "<stdin>:2: the schema file is not UTF-8 text")
    one_error_line(run("schema", "check", "t-value", "-", "--url", DEAD_REGISTRY, input='{"type": \n'),
                   ExitCode.USAGE, "<stdin>:2:1: the schema file is not valid JSON")


def test_pipeline_file_with_a_control_character_names_its_line(folder: Path) -> None:
    bad = folder / "ctl.yaml"
    bad.write_bytes(b"name: trips\n\ndescription: bell \x07\n")
    one_error_line(run("pipeline", "validate", str(bad)), ExitCode.USAGE,
                   f"{bad}:3: not valid YAML: unacceptable character #x0007")


def test_a_schema_file_the_suite_names_that_is_not_utf8(folder: Path) -> None:
    """The file is read by validators' loader, which does not name it (see the report of issue 22): the message
    names the suite that references it."""
    (folder / "trips.avsc").write_bytes(b'{"type": "record", "name": "caf\xe9", "fields": []}')
    (folder / "suite.yaml").write_text("name: s\nchecks:\n  - {name: shape, kind: schema, schema: trips.avsc}\n")
    one_error_line(run("pipeline", "validate", str(folder / "trips.yaml")), ExitCode.USAGE,
                   f"validators {(folder / 'suite.yaml').resolve()}: a file the suite names is not UTF-8 text")


# ---- table paths: a file where a table directory is expected ----------------------------------------------------

TABLE_COMMANDS: list[tuple[str, Callable[[str], list[str]]]] = [
    ("table create", lambda p: ["table", "create", p, "--name", "t", "--key", "id"]),
    ("table show", lambda p: ["table", "show", p]),
    ("table history", lambda p: ["table", "history", p]),
    ("table read", lambda p: ["table", "read", p]),
    ("table changes", lambda p: ["table", "changes", p, "--start", "0"]),
    ("table compact", lambda p: ["table", "compact", p]),
    ("table cluster", lambda p: ["table", "cluster", p]),
    ("table clean", lambda p: ["table", "clean", p]),
    ("table rollback", lambda p: ["table", "rollback", p, INSTANT]),
    ("table savepoint", lambda p: ["table", "savepoint", p]),
    ("table restore", lambda p: ["table", "restore", p, INSTANT]),
    ("wap list", lambda p: ["wap", "list", p]),
    ("wap publish", lambda p: ["wap", "publish", p, INSTANT]),
    ("wap abort", lambda p: ["wap", "abort", p, INSTANT]),
    ("quarantine list", lambda p: ["quarantine", "list", p]),
    ("audit list", lambda p: ["audit", "list", p]),
    ("audit metrics", lambda p: ["audit", "metrics", p]),
]
NEEDS_A_TABLE = [c for c in TABLE_COMMANDS if c[0] != "table create"]


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    """A regular file."""
    path = tmp_path / "trips.parquet"
    path.write_bytes(b"PAR1")
    return path


@pytest.mark.parametrize(("name", "args"), TABLE_COMMANDS, ids=[c[0] for c in TABLE_COMMANDS])
def test_a_table_path_that_is_a_file_exits_2(name: str, args: Callable[[str], list[str]], a_file: Path) -> None:
    one_error_line(run(*args(str(a_file))), ExitCode.USAGE, f"error: {a_file} is a file, not a table directory")
    below = f"{a_file}/trips"
    one_error_line(run(*args(below)), ExitCode.USAGE, f"error: {below}: {a_file} is a file, not a directory")
    uri = f"file://{a_file}"
    one_error_line(run(*args(uri)), ExitCode.USAGE, f"error: {uri} is a file")


@pytest.mark.parametrize(("name", "args"), NEEDS_A_TABLE, ids=[c[0] for c in NEEDS_A_TABLE])
def test_a_folder_without_a_table_exits_3(name: str, args: Callable[[str], list[str]], tmp_path: Path) -> None:
    one_error_line(run(*args(str(tmp_path))), ExitCode.NOT_FOUND,
                   f"error: no table at {tmp_path}: .hoodie/hoodie.properties not found")


def test_create_over_an_existing_table_exits_4_before_spark(tmp_path: Path) -> None:
    (tmp_path / ".hoodie").mkdir()
    (tmp_path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=t\n")
    one_error_line(run("table", "create", str(tmp_path), "--name", "t", "--key", "id"), ExitCode.CONFLICT,
                   f"error: a table already exists at {tmp_path}")


FOLDER_OPTIONS = {
    "audit list --audit-dir": ["audit", "list", "{missing}", "--audit-dir", "{file}"],
    "audit metrics --audit-dir": ["audit", "metrics", "{missing}", "--audit-dir", "{file}"],
    "wap list --audit-dir": ["wap", "list", "{missing}", "--audit-dir", "{file}"],
    "wap publish --audit-dir": ["wap", "publish", "{missing}", INSTANT, "--audit-dir", "{file}"],
    "quarantine list --quarantine-path": ["quarantine", "list", "{missing}", "--quarantine-path", "{file}"],
    "demo --dir": ["demo", "--dir", "{file}"],
}


@pytest.mark.parametrize("args", FOLDER_OPTIONS.values(), ids=FOLDER_OPTIONS.keys())
def test_a_folder_option_that_is_a_file_exits_2(args: list[str], a_file: Path, tmp_path: Path) -> None:
    """Checked before the table itself (here: missing) and before Spark."""
    given = [a.format(file=a_file, missing=tmp_path / "no-table") for a in args]
    one_error_line(run(*given), ExitCode.USAGE, f"{args[-2]}: {a_file} is a file")


@pytest.fixture
def pipeline_into_a_file(folder: Path) -> Iterator[Path]:
    """The valid pipeline of :func:`folder` whose target path ``tables/trips`` is a file."""
    (folder / "tables").mkdir()
    (folder / "tables" / "trips").write_text("not a table\n")
    yield folder / "trips.yaml"


@pytest.mark.parametrize("command", ["validate", "run", "replay"])
def test_a_pipeline_target_that_is_a_file_exits_2(command: str, pipeline_into_a_file: Path) -> None:
    group = "quarantine" if command == "replay" else "pipeline"
    target = pipeline_into_a_file.parent.resolve() / "tables" / "trips"
    one_error_line(run(group, command, str(pipeline_into_a_file)), ExitCode.USAGE,
                   f"error: {pipeline_into_a_file}: target.path: {target} is a file, not a table directory")


def test_a_pipeline_source_folder_that_is_a_file_exits_2(folder: Path) -> None:
    landing = folder / "landing"
    for f in landing.iterdir():
        f.unlink()
    landing.rmdir()
    landing.write_text("")
    one_error_line(run("pipeline", "run", str(folder / "trips.yaml")), ExitCode.USAGE,
                   f"source.path: {landing.resolve()} is a file, not a folder")


def test_directory_problem_and_local_path(tmp_path: Path, a_file: Path) -> None:
    assert directory_problem(str(tmp_path), "folder") is None
    assert directory_problem(str(tmp_path / "not" / "yet"), "folder") is None  # created later: fine
    assert directory_problem(f"{a_file}/x/y", "folder") == f"{a_file}/x/y: {a_file} is a file, not a directory"
    assert directory_problem("s3://bucket/is/not/checked", "folder") is None
    assert local_path("file:///data/t") == Path("/data/t") and local_path("t") == Path("t")
    assert local_path("s3://b/t") is None and local_path("memory://t") is None


def test_create_on_a_file_starts_no_jvm_and_is_fast(a_file: Path) -> None:
    """In a fresh process: exit 2 naming the path, and no JVM gateway was launched (``table create`` used to start
    Spark, 17 s, then fail with a raw NotADirectoryError). The time bound is only a generous sanity check."""
    code = ("import sys, time\n"
            "from governance.cli import main\n"
            "started = time.monotonic()\n"
            f"rc = main(['table', 'create', {str(a_file)!r}, '--name', 't', '--key', 'id'])\n"
            "took = time.monotonic() - started\n"
            "from pyspark import SparkContext\n"
            "print(rc, SparkContext._gateway is None, SparkContext._active_spark_context is None, f'{took:.2f}')\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - started
    rc, no_gateway, no_context, took = done.stdout.split()
    assert (int(rc), no_gateway, no_context) == (ExitCode.USAGE, "True", "True"), done
    assert done.stderr == f"error: {a_file} is a file, not a table directory\n"
    assert float(took) < 10 and wall < 60, (took, wall)  # a JVM start alone takes several seconds
