"""One pass over a view for every row rule of a suite: counts and bounded samples in a single Spark job.

How:

1. one projection adds a boolean flag column per rule (and the helper columns of UDF rules, computed once);
2. ``DataFrame.observe`` attaches the aggregates: ``count(1)``, ``count_if(flag)`` per rule, ``count_if(any flag
   of the check)`` per check, and per rule ``min_by(when(flag, struct(reason, row)), when(flag, xxhash64(...)), k)``;
3. the plan is run once into Spark's ``noop`` sink (only the referenced columns are read). Observed metrics are
   aggregated per task and merged on the driver through accumulators, so there is **no shuffle and exactly one
   job with one stage** (a global ``agg().collect()`` would need a shuffle, and adaptive execution runs that as a
   second job).

Bounds: the sample of a rule is ``min_by(..., k)``, a top-k heap: each task keeps at most ``k`` rows per rule and
the driver receives at most ``tasks x k`` per rule before merging them down to ``k``; the reason string and the JSON
of the row are only built for failing rows (inside ``when``). The key is a hash of the rule index and the row, so
samples are deterministic for the same data. Nothing else reaches the driver: counts are longs.

:func:`split_rows` uses the same rule expressions to tag rows for quarantine, without collecting anything.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from validators.results import FailingRow
from validators.rules import RowRule, column

logger = logging.getLogger(__name__)

FLAG_PREFIX = "__lg_f"


@dataclass(frozen=True)
class RowPass:
    """What one pass measured.

    Attributes:
        total_rows: rows of the view.
        rule_failures: failing rows per (check name, rule name).
        check_failures: rows failing any rule of the check, per check name.
        samples: bounded sample of failing rows per (check name, rule name).
        duration_ms: wall time of the pass (the one Spark job plus planning).
    """

    total_rows: int
    rule_failures: dict[tuple[str, str], int]
    check_failures: dict[str, int]
    samples: dict[tuple[str, str], list[FailingRow]]
    duration_ms: float


def with_pre_columns(df: DataFrame, rules: Sequence[RowRule]) -> DataFrame:
    """``df`` plus the helper columns the rules read (each computed once per row)."""
    pre: dict[str, Column] = {}
    for r in rules:
        pre.update(r.pre_columns)
    return df.select("*", *[c.alias(name) for name, c in pre.items()]) if pre else df


def evaluate(df: DataFrame, rules: Sequence[RowRule], checks: Sequence[str], *, sample_size: int,
             sample_columns: Sequence[str] | None = None) -> RowPass:
    """Count and sample the failures of ``rules`` over ``df`` in one Spark job.

    Args:
        df: the view.
        rules: the compiled rules ((check, name) unique).
        checks: the names of the checks whose any-rule failure count is wanted (checks without rules count 0).
        sample_size: failing rows kept per rule (0: no samples).
        sample_columns: columns of ``df`` shown with sampled rows (default: all).
    """
    t0 = time.perf_counter()
    original = list(df.columns)
    shown = [c for c in (sample_columns or original) if c in original]
    hashable = [c for c in shown if not isinstance(df.schema[c].dataType, MapType)]
    flagged = with_pre_columns(df, rules).select(
        "*", *[r.failed.alias(f"{FLAG_PREFIX}{i}") for i, r in enumerate(rules)])
    flags = [F.col(f"{FLAG_PREFIX}{i}") for i in range(len(rules))]

    aggs: list[Column] = [F.count(F.lit(1)).alias("rows")]
    aggs += [F.count_if(f).alias(f"rule{i}") for i, f in enumerate(flags)]
    by_check: dict[str, list[Column]] = {c: [] for c in checks}
    for r, f in zip(rules, flags, strict=True):
        by_check.setdefault(r.check, []).append(f)
    check_names = [c for c, fs in by_check.items() if fs]
    aggs += [F.count_if(reduce(lambda a, b: a | b, by_check[c])).alias(f"check{j}") for j, c in enumerate(check_names)]
    if sample_size > 0:
        row_json = F.to_json(F.struct(*[column(c) for c in shown])) if shown else F.lit("{}")
        for i, (r, f) in enumerate(zip(rules, flags, strict=True)):
            value = F.when(f, F.struct(r.reason.alias("reason"), row_json.alias("row")))
            key = F.when(f, F.xxhash64(F.lit(i), *[column(c) for c in hashable]))
            aggs.append(F.min_by(value, key, sample_size).alias(f"sample{i}"))

    observation = Observation(f"lakegate_validators_{uuid.uuid4().hex}")
    flagged.observe(observation, *aggs).select(F.lit(1).alias("x")).write.format("noop").mode("overwrite").save()
    m: dict[str, Any] = observation.get
    result = RowPass(
        total_rows=int(m["rows"]),
        rule_failures={(r.check, r.name): int(m[f"rule{i}"]) for i, r in enumerate(rules)},
        check_failures={**dict.fromkeys(checks, 0), **{c: int(m[f"check{j}"]) for j, c in enumerate(check_names)}},
        samples={(r.check, r.name): _samples(m.get(f"sample{i}")) for i, r in enumerate(rules)}
        if sample_size > 0 else {},
        duration_ms=round((time.perf_counter() - t0) * 1000, 1),
    )
    logger.info("one pass: %d rules over %d rows in %.0f ms", len(rules), result.total_rows, result.duration_ms)
    return result


def _samples(values: Any) -> list[FailingRow]:
    out = []
    for v in values or ():
        if v is None:
            continue
        try:
            row = json.loads(v["row"]) if v["row"] else {}
        except (TypeError, ValueError):
            row = {}
        out.append(FailingRow(reason=str(v["reason"]), row=row))
    return out


def split_rows(df: DataFrame, rules: Sequence[RowRule], *, check_column: str = "check",
               reason_column: str = "reason", violations_column: str = "violations") -> tuple[DataFrame, DataFrame]:
    """Split ``df`` into (passing, failing) by ``rules``, lazily (nothing is collected).

    The failing frame has ``check`` and ``reason`` (of the first rule a row fails, in rule order), ``violations``
    (every failed rule as ``struct<check, rule, reason>``) and then the original columns. Both frames re-evaluate the
    rules when consumed; cache ``df`` when both are written.

    Raises:
        ValueError: ``df`` already has a column named like one of the added ones.
    """
    original = list(df.columns)
    clash = {check_column, reason_column, violations_column} & set(original)
    if clash:
        raise ValueError(f"the view already has column(s) {', '.join(sorted(clash))}; pass other names")
    tag = "__lg_violations"
    if not rules:
        empty = df.where(F.lit(False)).select(
            F.lit(None).cast("string").alias(check_column), F.lit(None).cast("string").alias(reason_column),
            F.array().cast("array<struct<check:string,rule:string,reason:string>>").alias(violations_column),
            *[column(c) for c in original])
        return df, empty
    entries = [F.when(r.failed, F.struct(F.lit(r.check).alias("check"), F.lit(r.name).alias("rule"),
                                         r.reason.alias("reason"))) for r in rules]
    tagged = with_pre_columns(df, rules).withColumn(tag, F.filter(F.array(*entries), lambda x: x.isNotNull()))
    violations = F.col(tag)
    passing = tagged.where(F.size(violations) == 0).select(*[column(c) for c in original])
    failing = tagged.where(F.size(violations) > 0).select(
        violations.getItem(0).getField("check").alias(check_column),
        violations.getItem(0).getField("reason").alias(reason_column),
        violations.alias(violations_column),
        *[column(c) for c in original])
    return passing, failing
