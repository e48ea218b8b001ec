"""The Spark engine (:class:`tablecore.spark.engine.SparkEngine`): the only package of tablecore that imports pyspark.
JVM handles are reached in :mod:`tablecore.spark.jvm` only."""
