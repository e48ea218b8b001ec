"""Secondary sources: other tables a pipeline's transform joins with, each read only as much as the batch needs.

A pipeline has one main source (its batches and its checkpoint) and any number of named secondary table sources,
each a view of the transform's SQL (``{drivers}``) and of a Python step's context (``ctx.view("drivers")``)::

    sources:
      driver_status_changes: {path: tables/driver_status, mode: incremental, lookback: 24h}
      fx_rates: {path: tables/fx_rates, mode: affected_partitions, partitions_from: {dt: dt}}
      cities: {path: tables/cities, mode: snapshot}
      earnings_days: {path: "{target}", mode: affected_partitions, partitions_from: {dt: dt}}

Modes:

- ``snapshot``: the table as of its latest data commit when the batch starts.
- ``affected_partitions``: the same, but only the partitions the batch's rows map to. ``partitions_from`` maps each
  partition field of the table to a SQL expression over the rows of ``{source}`` (and of the views named in
  ``affected_by``); ``explode(array(before_dt, after_dt))`` maps a row to several partitions. Only the distinct
  partition paths reach the driver; only those partitions are listed and read. A late update months old reads its
  own month's partition, not the table.
- ``incremental``: the latest state of the rows changed by the table's commits in ``(previous end - lookback,
  end]``: *end* is the table's latest commit when the batch starts (its completion time from table version 8),
  *previous end* the end the pipeline's previous batch read to (recorded in that batch's commit, beside the
  checkpoint). So no change is skipped between batches whatever the lookback, and ``lookback`` (``24h``, ``90m``)
  re-reads a window before it: changes that must meet main-source rows arriving up to that much later. The first
  batch reads every change up to *end*.

Only the main source's position is the pipeline's checkpoint; the secondary ends are recorded in the same commit
(``extraMetadata["lakegate.sources"]``) so the next batch knows where the previous one read to. The main source
drives the batches: a change in a secondary table is read with the next batch of the main source.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pyspark.sql import DataFrame, SparkSession

from governance.errors import SourceError
from governance.source_batch import without_meta
from governance.sources import TableSource
from governance.transforms import LocatedError
from tablecore import CleanedRangeError, Table, TableCoreError, TableNotFoundError
from tablecore.spark.keys import partition_path_column

__all__ = ["SOURCES_KEY", "SecondarySource", "SecondarySourceSpec", "last_source_ends", "parse_duration",
           "source_ends_metadata"]

logger = logging.getLogger(__name__)

SOURCES_KEY = "lakegate.sources"
"""The ``extraMetadata`` key recording where a batch read its secondary sources to (compact JSON)."""

TARGET = "{target}"
"""A secondary source's ``path`` naming the pipeline's own target table."""

_DURATION = re.compile(r"(\d+)(ms|d|h|m|s)")
_UNITS = {"ms": dt.timedelta(milliseconds=1), "s": dt.timedelta(seconds=1), "m": dt.timedelta(minutes=1),
          "h": dt.timedelta(hours=1), "d": dt.timedelta(days=1)}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_duration(text: str) -> dt.timedelta:
    """``24h``, ``90m``, ``1h30m``, ``7d``, ``500ms`` as a timedelta.

    Raises:
        ValueError: not a duration.
    """
    compact = text.replace(" ", "")
    parts = _DURATION.findall(compact)
    if not compact or "".join(n + u for n, u in parts) != compact:
        raise ValueError(f"{text!r} is not a duration (e.g. 24h, 90m, 1h30m, 7d, 500ms)")
    return sum((int(n) * _UNITS[u] for n, u in parts), dt.timedelta())


class SecondarySourceSpec(BaseModel):
    """A named secondary table source (see the module docstring).

    Attributes:
        path: the table's path or URI (relative paths resolve against the pipeline file's folder), or ``{target}``
            for the pipeline's own target table (``snapshot`` and ``affected_partitions`` only).
        mode: ``incremental``, ``affected_partitions`` or ``snapshot``.
        lookback: ``incremental``: how far before the previous batch's end to read again (default: nothing).
        partitions_from: ``affected_partitions``: partition field -> SQL expression over the batch's rows.
        affected_by: ``affected_partitions``: the views whose rows map to partitions (default ``[source]``; others
            must be ``incremental`` or ``snapshot`` secondary sources).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    mode: Literal["incremental", "affected_partitions", "snapshot"]
    lookback: str | None = None
    partitions_from: dict[str, str] | None = None
    affected_by: list[str] = Field(default_factory=lambda: ["source"])

    @field_validator("lookback")
    @classmethod
    def _duration(cls, v: str | None) -> str | None:
        if v is not None:
            parse_duration(v)
        return v

    @model_validator(mode="after")
    def _fits_mode(self) -> SecondarySourceSpec:
        if self.lookback is not None and self.mode != "incremental":
            raise ValueError(f"lookback is for mode incremental, not {self.mode}")
        if self.mode == "affected_partitions":
            if not self.partitions_from:
                raise ValueError("mode affected_partitions needs partitions_from (partition field -> SQL expression "
                                 "over the batch's rows)")
        elif self.partitions_from is not None or self.affected_by != ["source"]:
            raise ValueError(f"partitions_from and affected_by are for mode affected_partitions, not {self.mode}")
        if self.path == TARGET and self.mode == "incremental":
            raise ValueError("{target} can be read as a snapshot or by affected partitions, not incrementally")
        return self

    @property
    def lookback_delta(self) -> dt.timedelta:
        """The lookback as a timedelta (zero when not set)."""
        return parse_duration(self.lookback) if self.lookback else dt.timedelta()


def check_sources(sources: Mapping[str, SecondarySourceSpec], reserved: tuple[str, ...]) -> None:
    """Names are identifiers that are not reserved view names; ``affected_by`` names the main source or secondary
    sources that are not themselves read by affected partitions.

    Raises:
        LocatedError: the message names the source's entry.
    """
    for name, spec in sources.items():
        if not _NAME.match(name) or name in reserved:
            raise LocatedError(f"a source name must be an identifier other than {', '.join(reserved)}",
                               ("sources", name))
        for other in spec.affected_by:
            ok = other == "source" or (other in sources and sources[other].mode != "affected_partitions")
            if not ok:
                raise LocatedError(f"{other!r} is not the main source or an incremental or snapshot secondary "
                                   "source of this pipeline", ("sources", name, "affected_by"))


def source_ends_metadata(pipeline: str, ends: Mapping[str, str | None]) -> dict[str, str]:
    """The ``extraMetadata`` entry recording the ends a batch read its secondary sources to."""
    return {SOURCES_KEY: json.dumps({"pipeline": pipeline, "ends": dict(ends)}, sort_keys=True,
                                    separators=(",", ":"))}


def last_source_ends(table: Table, pipeline: str) -> dict[str, str | None]:
    """The secondary ends recorded by ``pipeline``'s newest batch in ``table`` (empty if none was)."""
    for _, metadata in table.commit_history():
        text = metadata.extra_metadata.get(SOURCES_KEY)
        if not text:
            continue
        try:
            data = json.loads(text)
        except ValueError:
            logger.warning("ignoring an unreadable %s entry in %s", SOURCES_KEY, table.name)
            continue
        if isinstance(data, dict) and data.get("pipeline") == pipeline and isinstance(data.get("ends"), dict):
            return dict(data["ends"])
    return {}


def shift_instant(instant: str, delta: dt.timedelta) -> str:
    """``instant`` (``yyyyMMddHHmmss[SSS]``) moved back by ``delta``, in the same format with milliseconds."""
    digits = instant[:17].ljust(17, "0")
    when = dt.datetime.strptime(digits[:14], "%Y%m%d%H%M%S") + dt.timedelta(milliseconds=int(digits[14:17]))
    moved = when - delta
    return f"{moved:%Y%m%d%H%M%S}{moved.microsecond // 1000:03d}"


class SecondarySource:
    """One secondary source of one batch: its table pinned at the batch's start, read as its mode says.

    Args:
        name: the view's name.
        spec: the configuration.
        table: the table (opened by the caller; the target for ``{target}``).
        previous_end: the end the pipeline's previous batch read this source to (None: none recorded).
    """

    def __init__(self, name: str, spec: SecondarySourceSpec, table: Table, previous_end: str | None) -> None:
        self.name = name
        self.spec = spec
        self.table = table
        self.previous_end = previous_end
        # pinned at its latest data commit; the pipeline's own target is read as it is (the pipeline writes it)
        done = TableSource(path=table.uri).pending(table, None) if spec.path != TARGET else []
        self.end: str | None = done[-1][0] if done else None
        self.end_instant: str | None = done[-1][1] if done else None

    @classmethod
    def open(cls, name: str, spec: SecondarySourceSpec, *, spark: SparkSession, resolve: Callable[[str], str],
             target: Callable[[], Table], previous_end: str | None) -> SecondarySource:
        """Open the source's table: its path through ``resolve`` (the pipeline's
        :meth:`~governance.pipeline.PipelineSpec.resolve`), or ``target()`` for ``{target}``.

        Raises:
            SourceError: there is no table at the path.
        """
        if spec.path == TARGET:
            return cls(name, spec, target(), previous_end)
        path = resolve(spec.path)
        try:
            return cls(name, spec, Table.open(path, spark=spark), previous_end)
        except TableNotFoundError as e:
            raise SourceError(f"source {name} ({path}): no table there ({e})") from e
        except TableCoreError as e:
            raise SourceError(f"source {name} ({path}): cannot open the table: {e}") from e

    def window(self) -> tuple[str | None, str | None]:
        """``incremental``: the range ``(start, end]`` this batch reads."""
        if self.end is None:
            return None, None
        if self.previous_end is None:
            return None, self.end
        start = shift_instant(self.previous_end, self.spec.lookback_delta) if self.spec.lookback else self.previous_end
        return start, self.end

    def read(self, views: Callable[[str], DataFrame]) -> DataFrame:
        """The view's rows, without meta columns (``views`` gives the views ``affected_by`` names).

        Raises:
            SourceError: the table cannot be read (the message names the source).
        """
        try:
            if self.spec.mode == "incremental":
                df = self._incremental()
            elif self.spec.mode == "snapshot":
                df = self.table.read(as_of=self.end_instant)
            else:
                paths = self.partitions(views)
                logger.info("source %s: %d affected partition(s)", self.name, len(paths))
                df = self.table.read(as_of=self.end_instant, partitions=paths)
        except CleanedRangeError as e:
            raise SourceError(f"source {self.name} ({self.table.uri}): the rows it needs are no longer readable "
                              f"({e}); the earliest readable instant is {e.earliest_readable}") from e
        except TableCoreError as e:
            raise SourceError(f"source {self.name} ({self.table.uri}): cannot read it: {e}") from e
        return without_meta(df)

    def _incremental(self) -> DataFrame:
        start, end = self.window()
        if end is None:
            return self.table.read()  # a table without data commits: its (empty) snapshot
        if start is not None and start >= end:
            start = end
        try:
            return self.table.read_changes(start=start, end=end)
        except CleanedRangeError as e:
            # the lookback window reaches before what is still readable: read from there if the part the previous
            # batch did not read is still readable
            must = self.previous_end
            if start is not None and must is not None and must >= e.earliest_readable > start:
                logger.warning("source %s: lookback cut to the earliest readable instant %s", self.name,
                               e.earliest_readable)
                return self.table.read_changes(start=e.earliest_readable, end=end)
            raise

    def partitions(self, views: Callable[[str], DataFrame]) -> list[str]:
        """The partition paths the batch's rows map to (distinct values only reach the driver).

        Raises:
            SourceError: ``partitions_from`` does not name the table's partition fields, or an expression fails.
        """
        config = self.table.config
        mapping = self.spec.partitions_from or {}
        if set(mapping) != set(config.partition_fields):
            raise SourceError(f"source {self.name}: partitions_from names {sorted(mapping)}, but the table is "
                              f"partitioned by {list(config.partition_fields)}")
        if not config.partition_fields:
            return [""]
        mapped: DataFrame | None = None
        for view in self.spec.affected_by:
            try:
                part = views(view).selectExpr(*[f"{expr} AS `{field}`" for field, expr in mapping.items()])
                part = part.select(partition_path_column(config).alias("p")).distinct()
            except Exception as e:  # an expression that does not resolve against the view
                raise SourceError(f"source {self.name}: partitions_from over {{{view}}}: {type(e).__name__}: "
                                  f"{str(e).strip().splitlines()[0] if str(e).strip() else e!r}") from e
            mapped = part if mapped is None else mapped.union(part)
        assert mapped is not None
        return sorted({r["p"] for r in mapped.distinct().collect()})
