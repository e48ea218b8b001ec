"""The gate's own counts riding on the write job: a row counter observed in the job that writes the files, inline
audit passes chained onto the same job, and the tests of whether what an inline pass counted is exactly a view's
rows (so the audit can take its numbers instead of reading the view again)."""

from __future__ import annotations

import logging
import uuid

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tablecore import RowObserver, StagedCommit
from tablecore.spark.schema import table_spark_schema
from validators import InlinePass
from validators.onepass import completed_metrics

logger = logging.getLogger(__name__)


class RowCounter:
    """A row count observed in the write job (tablecore's ``RowObserver``): the gate's count of the batch without a
    Spark job of its own. :attr:`rows` is None until a job ran it (never waits)."""

    def __init__(self) -> None:
        self._observation = Observation(f"lakegate_gate_rows_{uuid.uuid4().hex}")
        self._attached = False

    def __call__(self, df: DataFrame, data_columns: list[str]) -> DataFrame:
        if self._attached:
            raise ValueError("a row counter observes one job only")
        self._attached = True
        return df.observe(self._observation, F.count(F.lit(1)).alias("rows"))

    @property
    def rows(self) -> int | None:
        """The rows the job saw; None when no job ran it (or it failed: the write then failed too)."""
        if not self._attached:
            return None
        try:
            metrics = completed_metrics(self._observation)
        except Exception:  # the observed job failed
            logger.debug("the gate's row counter has no result", exc_info=True)
            return None
        return int(metrics["rows"]) if metrics is not None else None


def chained(observers: list[RowObserver]) -> RowObserver | None:
    """One observer applying every observer (each adds its own observed aggregate to the same job)."""
    if not observers:
        return None
    if len(observers) == 1:
        return observers[0]

    def observe(df: DataFrame, data_columns: list[str]) -> DataFrame:
        for o in observers:
            df = o(df, data_columns)
        return df

    return observe


def same_columns(inline: InlinePass, schema: StructType) -> bool:
    """Whether the pass was compiled against columns of these names and types."""
    return inline.schema is not None and \
        {f.name: f.dataType for f in inline.schema.fields} == {f.name: f.dataType for f in schema.fields}


def wrote_exactly(staged: StagedCommit, inline: InlinePass) -> bool:
    """Whether the rows the inline pass counted are exactly the rows of the staged ``{changes}``: every row it saw
    was written (no deduplication, no delete) and the table's columns are the observed ones with the same types."""
    if inline.rows is None or inline.schema is None:
        return False
    res = staged.result
    if res.deleted or res.inserted + res.updated != res.input_rows or inline.rows != res.input_rows:
        return False
    table_schema = staged.metadata.schema
    return table_schema is not None and same_columns(inline, table_spark_schema(table_schema, with_meta=False))
