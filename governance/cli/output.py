"""The output layer every ``lakegate`` command shares: exit codes, errors, logging, JSON and Rich rendering.

- :class:`ExitCode`: the codes scripts can rely on.
- :func:`exit_codes` / :func:`exit_code_for` / :func:`report_error`: the one place where the exception trees of
  tablecore, schema_registry, validators and governance (and pyspark's analysis errors) become an exit code and a
  one-line ``error: ...`` on stderr; :func:`register_exit_code` adds a type (new command groups register theirs).
- :class:`Output`: human output (Rich tables and key/value panels on stdout, spinners on stderr) or ``--json``
  (one JSON document on stdout, nothing else there).

The exit-code table (:func:`exit_codes`) maps exception types; it is built on first use, so ``lakegate --help``
imports none of the packages it maps.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import json
import logging
import math
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table as RichTable
from rich.text import Text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


class ExitCode(enum.IntEnum):
    """Exit codes of ``lakegate``; scripts may rely on them."""

    OK = 0
    INTERNAL = 1  # an unexpected error (a bug), or the environment failed (registry unreachable, store down)
    USAGE = 2  # bad usage, invalid input or configuration
    NOT_FOUND = 3  # table, subject, version, schema or instant not found
    CONFLICT = 4  # concurrent commit, incompatible schema, table already exists, refused by the table's state
    BLOCKED = 5  # an audit blocked the data, checks failed
    CORRUPT = 6  # a table file is damaged or missing (see lakegate table doctor / repair)


class CliError(Exception):
    """An error a command raises to end with ``error: <message>`` and a given exit code."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


@functools.cache
def exit_codes() -> dict[type[BaseException], ExitCode]:
    """The one table of exit codes: exception type -> code. An exception gets the code of the most specific type of
    its MRO listed here (or registered with :func:`register_exit_code`), else INTERNAL. Built on first use, so that
    ``lakegate --help`` imports none of the packages it maps."""
    import pydantic

    from governance import errors as gov
    from schema_registry import errors as reg
    from tablecore import exceptions as tc
    from validators import errors as val

    table: dict[type[BaseException], ExitCode] = {
        # tablecore (the bare TableCoreError is raised for invalid read arguments: unknown view, inverted range)
        tc.TableCoreError: ExitCode.USAGE,
        tc.ConfigError: ExitCode.USAGE,
        tc.InvalidInputError: ExitCode.USAGE,
        tc.SchemaEvolutionError: ExitCode.USAGE,
        tc.TableNotFoundError: ExitCode.NOT_FOUND,
        tc.InstantNotFoundError: ExitCode.NOT_FOUND,
        tc.CleanedRangeError: ExitCode.NOT_FOUND,
        tc.TableExistsError: ExitCode.CONFLICT,
        tc.CommitConflictError: ExitCode.CONFLICT,
        tc.LockTimeoutError: ExitCode.CONFLICT,
        tc.StagedCommitError: ExitCode.CONFLICT,
        tc.RollbackError: ExitCode.CONFLICT,
        tc.ReplicationError: ExitCode.CONFLICT,
        tc.TableCorruptError: ExitCode.CORRUPT,
        tc.StorageUnavailableError: ExitCode.INTERNAL,  # the store kept failing: the environment, not the input
        # schema_registry
        reg.SchemaRegistryError: ExitCode.INTERNAL,
        reg.NotFoundError: ExitCode.NOT_FOUND,
        reg.IncompatibleSchemaError: ExitCode.CONFLICT,
        reg.UnprocessableError: ExitCode.USAGE,
        reg.HttpError: ExitCode.USAGE,  # 401 / 403 included: credentials are configuration
        reg.SettingsError: ExitCode.USAGE,
        reg.StoreError: ExitCode.INTERNAL,
        reg.TransportError: ExitCode.INTERNAL,
        # validators
        val.ValidatorsError: ExitCode.INTERNAL,
        val.SuiteConfigError: ExitCode.USAGE,
        val.SchemaResolutionError: ExitCode.NOT_FOUND,
        val.MissingViewError: ExitCode.USAGE,
        val.ExpectationsUnavailableError: ExitCode.USAGE,
        val.ValidationFailed: ExitCode.BLOCKED,
        # governance
        gov.GovernanceError: ExitCode.INTERNAL,
        gov.PipelineConfigError: ExitCode.USAGE,
        gov.SourceError: ExitCode.USAGE,
        gov.TransformError: ExitCode.USAGE,
        gov.SchemaRefusedError: ExitCode.CONFLICT,
        gov.BatchBlockedError: ExitCode.BLOCKED,
        gov.StagedNotFoundError: ExitCode.NOT_FOUND,
        # pydantic: settings or configs that do not validate
        pydantic.ValidationError: ExitCode.USAGE,
    }
    # pyspark: a --where expression or --schema DDL that does not parse or resolve (only when Spark was loaded: an
    # exception of it cannot exist otherwise)
    spark_errors = sys.modules.get("pyspark.errors")
    if spark_errors is not None:
        table[spark_errors.AnalysisException] = ExitCode.USAGE
        table[spark_errors.IllegalArgumentException] = ExitCode.USAGE
    table.update(_REGISTERED)
    return table


_REGISTERED: dict[type[BaseException], ExitCode] = {}


def register_exit_code(exc: type[BaseException], code: ExitCode) -> None:
    """Map an exception type and its subclasses to an exit code (new command groups register their own errors)."""
    _REGISTERED[exc] = code
    exit_codes.cache_clear()


def _code_of(exc: BaseException) -> ExitCode | None:
    table = exit_codes()
    if "pyspark.errors" in sys.modules and not any(t.__module__.startswith("pyspark") for t in table):
        exit_codes.cache_clear()  # Spark was loaded after the table was built
        table = exit_codes()
    for cls in type(exc).__mro__:
        code = table.get(cls)
        if code is not None:
            return code
    return None


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code of an exception: the code of the most specific listed type in its MRO, else INTERNAL."""
    if isinstance(exc, CliError):
        return exc.code
    return _code_of(exc) or ExitCode.INTERNAL


def is_known(exc: BaseException) -> bool:
    """True if ``exc`` is an error the CLI expects (a listed type or a :class:`CliError`), not a bug."""
    return isinstance(exc, CliError) or _code_of(exc) is not None


def error_message(exc: BaseException) -> str:
    """One line describing ``exc``: its first non-empty message line (the class name when there is none)."""
    text = getattr(exc, "message", None)
    if not isinstance(text, str) or not text.strip():
        text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def report_error(exc: BaseException, *, debug: bool = False) -> ExitCode:
    """Write ``error: ...`` for ``exc`` on stderr (and the traceback with ``debug``); return its exit code.

    A damaged table found by a Spark task (Spark's wrapper of the task's ``TableCorruptError``) is reported as the
    ``TableCorruptError`` it is."""
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    if "tablecore" in sys.modules:
        from tablecore.exceptions import corrupt_error_in

        exc = corrupt_error_in(exc) or exc
    code = exit_code_for(exc)
    if is_known(exc):
        line = f"error: {error_message(exc)}"
    else:
        hint = "" if debug else " (run with --debug for the traceback)"
        line = f"error: internal error: {type(exc).__name__}: {error_message(exc)}{hint}"
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    logger.debug("exit code %d for %s", code, type(exc).__name__)
    return code


# ---- logging --------------------------------------------------------------------------------------------------

class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (test runners swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging(level: str) -> None:
    """Send log records of ``level`` and above to stderr (idempotent: one lakegate handler on the root logger)."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise CliError(f"unknown log level {level!r}")
    root = logging.getLogger()
    if not any(isinstance(h, _StderrHandler) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(numeric)
    logging.getLogger("py4j").setLevel(max(numeric, logging.INFO))  # py4j's DEBUG is one line per JVM call
    global _LEVEL
    _LEVEL = numeric


_LEVEL = logging.WARNING


def cli_spark_session(app_name: str) -> SparkSession:
    """The command line's Spark session: local, or the cluster / Spark Connect server the environment names
    (:func:`tablecore.spark.session.session_from_env`).

    PySpark logs every analysis error it raises, with a traceback, on a handler of its own (bound to the stderr of the
    moment); the CLI reports such an error itself in one line, so those loggers (SQL text and DataFrame API errors)
    are silenced unless the log level is DEBUG. (It must be PySpark's own logger class: PySpark passes it extra
    keyword arguments.)
    """
    from pyspark.logger import PySparkLogger

    from tablecore.spark.session import session_from_env

    session = session_from_env(app_name)
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):  # SQL text and DataFrame API errors
        PySparkLogger.getLogger(name).disabled = _LEVEL > logging.DEBUG
    return session


# ---- JSON -----------------------------------------------------------------------------------------------------

def to_jsonable(value: Any) -> Any:
    """``value`` with dataclasses, pydantic models, dates, decimals, bytes, enums and sets made JSON-able."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value).replace("inf", "Infinity").replace("nan", "NaN")  # JSON has no NaN: a string says it
    if isinstance(value, str | int | float | bool) or value is None:
        return value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump") and callable(value.model_dump):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return [to_jsonable(v) for v in sorted(value, key=str)]
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


def dumps(doc: Any) -> str:
    """The JSON text of ``doc`` (see :func:`to_jsonable`), indented."""
    return json.dumps(to_jsonable(doc), indent=2, ensure_ascii=False, allow_nan=False)


JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout (logs and progress go to stderr).")
]


# ---- human output ---------------------------------------------------------------------------------------------

def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    terminal = hasattr(stream, "isatty") and stream.isatty()
    width = None if terminal or os.environ.get("COLUMNS") else 160
    return Console(file=stream, stderr=stderr, width=width, highlight=False, soft_wrap=False)


def cell(value: Any) -> Text:
    """A table cell for a data value (never interpreted as Rich markup; null dimmed)."""
    if value is None:
        return Text("null", style="dim")
    if isinstance(value, bytes | bytearray):
        return Text(base64.b64encode(bytes(value)).decode("ascii"))
    if isinstance(value, dict | list | tuple):
        return Text(json.dumps(to_jsonable(value), ensure_ascii=False))
    if isinstance(value, dt.datetime | dt.date):
        return Text(value.isoformat())
    return Text(str(value))


class Output:
    """Where a command's results go: Rich on stdout for humans, or one JSON document with ``--json``.

    Args:
        json_mode: print :meth:`result` documents as JSON and skip every human rendering.
    """

    def __init__(self, json_mode: bool = False) -> None:
        self.json_mode = json_mode
        self.console = _console(stderr=False)
        self.err = _console(stderr=True)

    def result(self, doc: Any, human: Callable[[], None]) -> None:
        """Print ``doc`` as JSON (``--json``), or call ``human`` to render it."""
        if self.json_mode:
            sys.stdout.write(dumps(doc) + "\n")
            sys.stdout.flush()
        else:
            human()

    def line(self, text: str | Text) -> None:
        """A line of human output (plain text: never markup)."""
        self.console.print(text if isinstance(text, Text) else Text(text))

    def fields(self, values: Mapping[str, Any], title: str | None = None) -> None:
        """A key/value panel."""
        grid = RichTable.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column(overflow="fold")
        for key, value in values.items():
            grid.add_row(Text(key), cell(value))
        self.console.print(Panel(grid, title=Text(title) if title else None, title_align="left", expand=False))

    def table(self, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None,
              caption: str | None = None) -> None:
        """A table of rows (values rendered with :func:`cell`)."""
        table = RichTable(title=Text(title) if title else None, caption=Text(caption) if caption else None,
                          title_justify="left", caption_justify="left")
        for name in columns:
            table.add_column(Text(name), overflow="fold")
        for row in rows:
            table.add_row(*(cell(v) for v in row))
        self.console.print(table)

    def warn(self, text: str) -> None:
        """A warning on stderr (also in JSON mode)."""
        self.err.print(Text(f"warning: {text}", style="yellow"))

    @contextmanager
    def progress(self, description: str) -> Iterator[None]:
        """A spinner with the elapsed time on stderr while a long step runs (only on a terminal)."""
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=self.err,
                      transient=True, disable=not self.err.is_terminal) as bar:
            bar.add_task(description, total=None)
            yield


__all__ = [
    "CliError",
    "ExitCode",
    "JsonOption",
    "Output",
    "cell",
    "configure_logging",
    "dumps",
    "error_message",
    "exit_code_for",
    "exit_codes",
    "is_known",
    "register_exit_code",
    "report_error",
    "to_jsonable",
]
