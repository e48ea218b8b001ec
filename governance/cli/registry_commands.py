"""``lakegate registry serve|hash-password``: run the schema registry server, make password hashes for its auth."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from governance.cli.inputs import read_text_file
from governance.cli.output import CliError, ExitCode

logger = logging.getLogger(__name__)

registry_app = typer.Typer(help="Run the Confluent-compatible schema registry server.", no_args_is_help=True)

INCOMPATIBLE_CODES = (409, 40901)


def _incompatible_code(value: int) -> int:
    if value not in INCOMPATIBLE_CODES:
        raise typer.BadParameter(f"{value} is not one of {', '.join(map(str, INCOMPATIBLE_CODES))}")
    return value


@registry_app.command("serve")
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port.")] = 8081,
    store: Annotated[str, typer.Option(
        help="SQLAlchemy URL of the store: sqlite:///path/registry.db or postgresql+psycopg://user@host/db.")
    ] = "sqlite:///registry.db",
    auth_config: Annotated[Path | None, typer.Option(
        "--auth-config", help="TOML file of users and tokens (default: no auth).")] = None,
    default_compatibility: Annotated[str, typer.Option(
        "--default-compatibility", help="Global compatibility level until PUT /config sets one.")] = "BACKWARD",
    incompatible_error_code: Annotated[int, typer.Option(
        "--incompatible-error-code", callback=_incompatible_code,
        help="error_code of an incompatible registration: 409 (Confluent < 8.0.4) or 40901 (later).")] = 409,
) -> None:
    """Run the schema registry until interrupted (Ctrl-C stops it cleanly)."""
    from schema_registry.errors import SchemaRegistryError
    from schema_registry.model import CompatibilityLevel
    from schema_registry.server import serve as run_server
    from schema_registry.settings import Settings

    if auth_config is not None:  # a directory or bytes that are not UTF-8, named here (the registry reports TOML)
        read_text_file(auth_config, "auth config")
    try:
        settings = Settings(host=host, port=port, store_url=store, auth_config=auth_config,
                            default_compatibility=CompatibilityLevel.parse(default_compatibility),
                            incompatible_error_code=incompatible_error_code)
        run_server(settings)
    except SchemaRegistryError as e:  # at start-up every registry error is the configuration's (store, auth)
        raise CliError(e.message, ExitCode.USAGE) from e


@registry_app.command("hash-password")
def hash_password() -> None:
    """Read a password on stdin (prompted on a terminal) and print a password_hash for --auth-config."""
    from schema_registry.server.auth import hash_password as make_hash

    if sys.stdin.isatty():
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True, err=True)
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise CliError("no password on stdin", ExitCode.USAGE)
    typer.echo(make_hash(password))
