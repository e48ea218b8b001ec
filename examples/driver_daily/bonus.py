"""The Python step of ``driver_daily.yaml``: a day's bonus, in Spark column expressions (nothing is collected).

A driver earns ``BONUS_USD`` for a day with at least ``MIN_TRIPS`` completed trips and ``MIN_MINUTES`` minutes
online. The bonus rule lives in Python so that it can be unit-tested and shared; the pipeline calls it between
two SQL steps with the output of the first.
"""

from __future__ import annotations

import logging
from decimal import Decimal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from governance.transforms import TransformContext

logger = logging.getLogger(__name__)

BONUS_USD = Decimal("5.00")
MIN_TRIPS = 3
MIN_MINUTES = 60


def bonus(trips: int, online_minutes: int) -> Decimal:
    """The rule itself, for one (driver, dt) group (what :func:`add_bonus` computes in Spark)."""
    return BONUS_USD if trips >= MIN_TRIPS and online_minutes >= MIN_MINUTES else Decimal("0.00")


def add_bonus(df: DataFrame, ctx: TransformContext) -> DataFrame:
    """``df`` (the ``day_totals`` step's groups) with a ``bonus_usd`` column."""
    logger.info("%s: batch up to %s, status read to %s", ctx.step, ctx.position, ctx.source_ends.get("status"))
    earned = (F.col("trips") >= MIN_TRIPS) & (F.col("online_minutes") >= MIN_MINUTES)
    amount = F.when(earned, F.lit(BONUS_USD)).otherwise(F.lit(Decimal("0.00")))
    return df.withColumn("bonus_usd", amount.cast("decimal(10,2)"))
