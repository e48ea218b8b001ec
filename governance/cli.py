"""The ``lakegate`` command line (a first slice: the tablecore demo and table inspection)."""

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
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")

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


if __name__ == "__main__":
    sys.exit(main())
