"""The Spark types tablecore's public API takes and returns (``Table.read() -> DataFrame``...), named in one place so
that the facade can annotate with them without importing Spark itself."""

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

__all__ = ["DataFrame", "SparkSession", "StructType"]
