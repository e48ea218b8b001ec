"""The ``lakegate`` command line (a first slice: the tablecore demo, table inspection, the schema registry server)."""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lakegate`` console script."""
    parser = argparse.ArgumentParser(prog="lakegate", description="lakegate: governed tables on PySpark")
    parser.add_argument("--log-level", default="WARNING")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="create a trips table, upsert batches with late updates, show the timeline")
    demo.add_argument("--dir", default=None, help="where to create the table (default: a temporary folder)")
    show = sub.add_parser("table", help="inspect a table")
    show.add_argument("action", choices=["show", "history"])
    show.add_argument("path")
    show.add_argument("--json", action="store_true")
    _add_registry_commands(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")

    if args.command == "registry":
        return _run_registry(args)
    if args.command == "demo":
        from governance.demo import run_demo

        run_demo(sys.stdout, args.dir)
        return 0
    from tablecore import Table, TableCoreError
    from tablecore.spark.session import local_session
    from tablecore.table import describe

    try:
        table = Table.open(args.path, spark=local_session("lakegate-cli"))
    except TableCoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    info = describe(table)
    if args.json:
        print(json.dumps(info if args.action == "show" else info["timeline"], indent=2))
        return 0
    if args.action == "show":
        for k, v in info["config"].items():
            print(f"{k:<24} {v}")
    for i in info["timeline"]:
        print(f"{i['instant']}  {i['action']:<14} {i['state']:<10} {i['operation'] or ''}")
    return 0


def _add_registry_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    registry = sub.add_parser("registry", help="the schema registry server")
    actions = registry.add_subparsers(dest="registry_command", required=True)
    serve = actions.add_parser("serve", help="run the Confluent-compatible schema registry")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8081)
    serve.add_argument("--store", default="sqlite:///registry.db",
                       help="SQLAlchemy URL: sqlite:///path/registry.db (default) or postgresql+psycopg://user@host/db")
    serve.add_argument("--auth-config", default=None, help="TOML file of users and tokens (default: no auth)")
    serve.add_argument("--default-compatibility", default="BACKWARD", help="global level until PUT /config sets one")
    serve.add_argument("--incompatible-error-code", type=int, choices=[409, 40901], default=409,
                       help="error_code of an incompatible registration (Confluent < 8.0.4: 409, later: 40901)")
    actions.add_parser("hash-password", help="read a password on stdin, print a password_hash for --auth-config")


def _run_registry(args: argparse.Namespace) -> int:
    from schema_registry.errors import SchemaRegistryError

    if args.registry_command == "hash-password":
        from schema_registry.server.auth import hash_password

        password = sys.stdin.readline().rstrip("\n")
        if not password:
            print("error: no password on stdin", file=sys.stderr)
            return 2
        print(hash_password(password))
        return 0
    from pydantic import ValidationError

    from schema_registry.model import CompatibilityLevel
    from schema_registry.server import serve
    from schema_registry.settings import Settings

    try:
        settings = Settings(host=args.host, port=args.port, store_url=args.store, auth_config=args.auth_config,
                            default_compatibility=CompatibilityLevel.parse(args.default_compatibility),
                            incompatible_error_code=args.incompatible_error_code)
        serve(settings)
    except (SchemaRegistryError, ValidationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
