"""Run the driver-earnings example: land trips batch by batch, maintain the derived table after each one.

::

    PYTHONPATH=. PYSPARK_PYTHON=.venv/bin/python .venv/bin/python -m examples.driver_earnings.run \\
        --workdir /tmp/driver-earnings --batches 6 --verify

For every landing file: the ``trips-ingest`` pipeline (``trips.yaml``) lands it as one commit of the trips table,
then the ``driver-earnings`` pipeline (``earnings.yaml``) pulls the new commits incrementally and upserts the
recomputed (driver, dt) groups into ``driver_daily_earnings``. With ``--verify`` every earnings batch is compared
with a full recomputation from scratch (:data:`FULL_RECOMPUTATION_SQL` over the trips table as of the batch's last
commit); a difference stops the run with exit code 1.
"""

from __future__ import annotations

import argparse
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from examples.driver_earnings.generate import GeneratorConfig, generate, write_landing
from governance.audit import AuditRecord
from governance.pipeline import PipelineRunner, load_pipeline
from governance.sources import Batch
from tablecore import Table

logger = logging.getLogger(__name__)

EXAMPLE_DIR = Path(__file__).resolve().parent
PIPELINE_FILES = ("trips.yaml", "trips_checks.yaml", "earnings.yaml", "earnings_cdc.yaml")
"""The files a work folder needs (relative paths in them resolve against the work folder)."""

TRIPS_TABLE = "tables/trips"
EARNINGS_TABLE = "tables/driver_daily_earnings"
COLUMNS = ("driver", "dt", "trips", "cancelled", "fares", "tips", "earnings", "ts")
"""The derived table's columns (without the ``_hoodie_*`` meta columns)."""

FULL_RECOMPUTATION_SQL = """
SELECT driver, dt,
       CAST(SUM(CASE WHEN status = 'completed' THEN 1 ELSE 0 END) AS INT) AS trips,
       CAST(SUM(CASE WHEN status = 'cancelled' THEN 1 ELSE 0 END) AS INT) AS cancelled,
       CAST(COALESCE(SUM(CASE WHEN status = 'completed' THEN fare END), 0) AS DECIMAL(12, 2)) AS fares,
       CAST(COALESCE(SUM(CASE WHEN status = 'completed' THEN tip END), 0) AS DECIMAL(12, 2)) AS tips,
       CAST(COALESCE(SUM(CASE WHEN status = 'completed' THEN fare + tip END), 0) AS DECIMAL(12, 2)) AS earnings,
       MAX(ts) AS ts
FROM {trips}
GROUP BY driver, dt
"""
"""The derived table from scratch: the incremental transform of ``earnings.yaml`` without the ``touched`` join."""


def prepare(workdir: Path, config: GeneratorConfig | None = None) -> list[Path]:
    """Set up a work folder: the pipeline files (copied unless it is this folder) and the landing files of
    ``config`` (default: :class:`GeneratorConfig` ()).

    Returns:
        the landing files, in arrival order.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    if workdir.resolve() != EXAMPLE_DIR:
        for name in PIPELINE_FILES:
            shutil.copyfile(EXAMPLE_DIR / name, workdir / name)
    return write_landing(workdir / "landing", generate(config))


def full_recomputation(spark: SparkSession, trips_path: str, as_of: str | None = None) -> DataFrame:
    """:data:`FULL_RECOMPUTATION_SQL` over the trips table (as of ``as_of``, else its latest snapshot)."""
    trips = Table.open(trips_path, spark=spark)
    view = "__driver_earnings_trips"
    (trips.read(as_of=as_of) if as_of else trips.read()).createOrReplaceTempView(view)
    return spark.sql(FULL_RECOMPUTATION_SQL.replace("{trips}", view))


def differences(spark: SparkSession, earnings_path: str, trips_path: str, as_of: str | None = None) -> int:
    """Rows in which the derived table and the full recomputation differ (both directions, duplicates counted)."""
    derived = Table.open(earnings_path, spark=spark).read().select(*COLUMNS)
    full = full_recomputation(spark, trips_path, as_of).select(*COLUMNS)
    return int(derived.exceptAll(full).count() + full.exceptAll(derived).count())


@dataclass
class Summary:
    """What a run did."""

    trips_batches: int = 0
    earnings_batches: int = 0
    groups_written: int = 0
    mismatches: list[str] = field(default_factory=list)


def run(spark: SparkSession, workdir: Path, *, verify: bool = False,
        on_earnings: Callable[[Batch, AuditRecord], None] | None = None) -> Summary:
    """Run both pipelines of ``workdir`` landing file by landing file (see the module docstring)."""
    trips = PipelineRunner(load_pipeline(workdir / "trips.yaml"), spark)
    earnings = PipelineRunner(load_pipeline(workdir / "earnings.yaml"), spark)
    summary = Summary()

    def after_earnings(batch: Batch, record: AuditRecord) -> None:
        summary.earnings_batches += 1
        summary.groups_written += record.conservation.published
        logger.info("earnings: %s -> %s (%d groups)", batch.description, record.decision.value,
                    record.conservation.published)
        if verify:
            n = differences(spark, str(workdir / EARNINGS_TABLE), str(workdir / TRIPS_TABLE), batch.end_instant)
            if n:
                summary.mismatches.append(f"{batch.description}: {n} rows differ from the full recomputation")
                logger.error("%s", summary.mismatches[-1])
        if on_earnings is not None:
            on_earnings(batch, record)

    while True:
        landed = trips.run_once(max_batches=1)
        if not landed:
            break
        summary.trips_batches += 1
        logger.info("trips: %s", landed[0].summary())
        earnings.run_once(on_batch=after_earnings)
        if summary.mismatches:
            break
    return summary


def _show(spark: SparkSession, workdir: Path) -> None:
    rows: list[Any] = (Table.open(str(workdir / EARNINGS_TABLE), spark=spark).read().select(*COLUMNS)
                       .orderBy("dt", "driver").collect())
    print(f"{'dt':<11} {'driver':<10} {'trips':>5} {'canc.':>5} {'fares':>9} {'tips':>8} {'earnings':>9}")
    for r in rows:
        print(f"{r['dt']:<11} {r['driver']:<10} {r['trips']:>5} {r['cancelled']:>5} {r['fares']:>9} "
              f"{r['tips']:>8} {r['earnings']:>9}")


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description="Run the driver-earnings example batch by batch.")
    p.add_argument("--workdir", type=Path, default=Path("driver-earnings-run"),
                   help="where landing/ and tables/ go (default ./driver-earnings-run)")
    p.add_argument("--batches", type=int, default=GeneratorConfig.batches)
    p.add_argument("--trips-per-batch", type=int, default=GeneratorConfig.trips_per_batch)
    p.add_argument("--seed", type=int, default=GeneratorConfig.seed)
    p.add_argument("--verify", action="store_true", help="compare with a full recomputation after every batch")
    p.add_argument("--quiet", action="store_true", help="do not print the derived table at the end")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if (args.workdir / "tables").exists():
        p.error(f"{args.workdir}/tables exists: use a fresh --workdir (or delete it)")
    prepare(args.workdir, GeneratorConfig(batches=args.batches, trips_per_batch=args.trips_per_batch,
                                          seed=args.seed))
    from tablecore.spark.session import local_session

    spark = local_session("driver-earnings")
    try:
        summary = run(spark, args.workdir, verify=args.verify)
        if not args.quiet:
            _show(spark, args.workdir)
    finally:
        spark.stop()
    print(f"{summary.trips_batches} trips batches, {summary.earnings_batches} earnings batches, "
          f"{summary.groups_written} (driver, dt) groups written"
          + (f"; verified: {'OK' if not summary.mismatches else 'MISMATCH'}" if args.verify else ""))
    for m in summary.mismatches:
        print("MISMATCH", m)
    return 1 if summary.mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
