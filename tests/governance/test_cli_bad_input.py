"""The command line under bad input (issue 22), in-process (Typer's CliRunner) and without a JVM: every command that
reads a user file, given bytes that are not UTF-8, a directory or text that does not parse, ends with exit 2 and one
``error:`` line naming the file (and the line, and the byte offset of a bad byte) — before Spark (or a server)
starts. The autouse fixture makes starting Spark, a registry server or the demo fail the test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from governance.cli import app
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
