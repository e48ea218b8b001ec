"""The ``lakegate`` command line (Typer): ``registry``, ``schema``, ``table``, ``pipeline``, ``wap``, ``quarantine``,
``audit`` and ``demo``.

Each command group lives in its own module and is one ``app.add_typer(...)`` line here. Errors of every command
are turned into an exit code and a one-line ``error: ...`` on stderr in one place, :class:`LakegateGroup`
(mapping: :mod:`governance.cli.output`). Command modules import pyspark and the other packages inside their
functions, so ``lakegate --help`` starts no JVM and imports no Spark.
"""

from __future__ import annotations

import enum
import errno
import logging
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from governance.cli.audit_commands import audit_app
from governance.cli.demo_command import demo
from governance.cli.doctor_commands import doctor as _doctor  # noqa: F401  (registers `table doctor`)
from governance.cli.metadata_commands import metadata_app  # noqa: F401  (registers `table metadata`)
from governance.cli.output import ExitCode, configure_logging, report_error
from governance.cli.pipeline_commands import pipeline_app
from governance.cli.quarantine_commands import quarantine_app
from governance.cli.registry_commands import registry_app
from governance.cli.repair_commands import repair  # noqa: F401  (registers `table repair`)
from governance.cli.replicate_command import replicate  # noqa: F401  (registers `table replicate`)
from governance.cli.schema_commands import schema_app
from governance.cli.table_commands import table_app
from governance.cli.upgrade_command import upgrade  # noqa: F401  (registers `table upgrade`)
from governance.cli.wap_commands import wap_app

logger = logging.getLogger(__name__)

DEBUG_KEY = "lakegate.debug"


class LakegateGroup(TyperGroup):
    """The root command group: runs the command and maps any error it raises to an exit code (the one place)."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        """Invoke the command line; usage errors and exits pass through, every other error becomes an exit code."""
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException, KeyboardInterrupt, EOFError):
            raise
        except OSError as e:
            if e.errno == errno.EPIPE:  # stdout closed early (`lakegate ... | head`): Typer handles it
                raise
            raise typer.Exit(report_error(e, debug=bool(ctx.meta.get(DEBUG_KEY)))) from e
        except Exception as e:
            raise typer.Exit(report_error(e, debug=bool(ctx.meta.get(DEBUG_KEY)))) from e


class LogLevel(enum.StrEnum):
    """Log levels of ``--log-level``."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


app = typer.Typer(
    name="lakegate",
    cls=LakegateGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)
app.add_typer(registry_app, name="registry")
app.add_typer(schema_app, name="schema")
app.add_typer(table_app, name="table")
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(wap_app, name="wap")
app.add_typer(quarantine_app, name="quarantine")
app.add_typer(audit_app, name="audit")
app.command("demo")(demo)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"lakegate {version('lakegate')}")
        except PackageNotFoundError:
            typer.echo("lakegate (not installed)")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    log_level: Annotated[LogLevel, typer.Option(
        "--log-level", envvar="LAKEGATE_LOG_LEVEL", case_sensitive=False,
        help="Log records of this level and above go to stderr.")] = LogLevel.WARNING,
    debug: Annotated[bool, typer.Option(
        "--debug", help="DEBUG logging, and the traceback of every error.")] = False,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """lakegate: governed tables on PySpark — Hudi-format tables, a schema registry, validators.

    Exit codes: 0 ok, 1 internal error, 2 usage or invalid input, 3 not found, 4 conflict, 5 blocked, 6 corrupt table.
    """
    level = LogLevel.DEBUG if debug else log_level
    configure_logging(level.value)
    ctx.meta[DEBUG_KEY] = level is LogLevel.DEBUG
    logger.debug("lakegate %s", " ".join(sys.argv[1:]))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lakegate`` console script; returns the exit code (see :class:`ExitCode`)."""
    try:
        app(args=argv, prog_name="lakegate")
    except SystemExit as e:
        if e.code is None:
            return ExitCode.OK
        if isinstance(e.code, int):
            return e.code
        sys.stderr.write(f"error: {e.code}\n")
        return ExitCode.INTERNAL
    return ExitCode.OK


__all__ = ["ExitCode", "LakegateGroup", "app", "main"]
