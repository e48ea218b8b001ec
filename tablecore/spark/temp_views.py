"""Temporary views over DataFrames that may be cached, registered so that dropping the view leaves the cache alone.

Spark uncaches a temporary view's plan when the view is dropped (``Catalog.dropTempView``): when the view is a
persisted DataFrame as it is, dropping the view removes that DataFrame's cache, and the next reader of the DataFrame
computes it again. A view registered here is the DataFrame under an always-true filter: queries over it still read
the cache (the filter is optimized away), and its plan is not the cached one, so dropping it uncaches nothing.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def register_temp_view(df: DataFrame, name: str) -> None:
    """Register ``df`` as the temporary view ``name``; dropping the view later does not uncache ``df``."""
    df.filter(F.lit(True)).createOrReplaceTempView(name)
