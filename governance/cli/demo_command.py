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
) -> None:
    """Create a trips table, upsert batches with late-arriving updates, show the timeline and an incremental pull."""
    from governance.demo import run_demo

    check_folder_option(directory, "--dir")
    run_demo(sys.stdout, directory)
