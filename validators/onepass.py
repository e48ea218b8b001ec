"""One pass over a view for every row rule of a suite: counts in a single Spark job, samples only when rows fail.

How:

1. one projection adds a boolean flag column per rule (the rule's expression, evaluated once per row), one per
   folded ``zero_rows`` SQL check (its ``WHERE``) and one more, ``any``, the OR of them all; the helper columns of UDF
   rules are computed once before it;
2. a ``DataFrame.observe`` counts, over every row, only what a clean view needs: ``count(1)``, ``count_if(any)`` and
   the aggregate of every folded ``single_value`` SQL check;
3. the plan runs into Spark's ``noop`` sink, selecting nothing but a constant, so Parquet reads only the columns
   the rules reference. Observed metrics are aggregated per task and merged on the driver through accumulators, so
   there is **no shuffle and exactly one job with one stage** (a global ``agg().collect()`` would need a shuffle,
   and adaptive execution runs that as a second job). A clean view is done here: every per-rule count is 0;
4. when some row failed, a second job keeps the rows where ``any`` holds and observes, over those only, the count
   per rule, per check and per folded ``zero_rows`` query and, per rule and query, a sample:
   ``min_by(when(flag, struct(reason, row)), when(flag, xxhash64(...)), k)`` (Spark forbids ``FILTER`` in observed
   metrics; the filter before the observer does the same job). A caller that already knows rows fail (an inline
   pass saw them) puts both observers in one job instead.

Why the per-rule counts are not in the first observer: an observer is not compiled into the scan's generated code;
it updates its aggregates row by row, so its cost grows with the aggregates it holds. On the benchmark's 5 M rows
and 31 rules (``benchmarks/validate.py``), counting every rule there cost 1.26x the same counts written by hand as
one Spark aggregate; counting ``any`` (computed in the generated projection) costs 1.05x. Why samples wait for a
second job: the sample aggregates (a ``min_by`` heap, a ``to_json`` of the row and a reason per rule) are the larger
part of the plan Spark analyses and compiles, about a third of a pass over a governance batch of 50,000 rows; most
batches are clean and need none of it.

Everything is built as SQL text (see :mod:`validators.rules`): the projection is one ``selectExpr`` and each observer
one expression (an ``array`` or ``named_struct`` of aggregates), so building the plan costs a few dozen round trips
to the JVM whatever the number of rules.

Bounds: the sample of a rule is ``min_by(..., k)``, a top-k heap: each task keeps at most ``k`` rows per rule and
the driver receives at most ``tasks x k`` per rule before merging them down to ``k``; the reason string and the JSON
of the row are only built for failing rows (inside ``when``). The key is a hash of the rule index and the row, so
samples are deterministic for the same data. Nothing else reaches the driver: counts are longs, folded SQL values
single values.

:func:`split_rows` uses the same rule expressions to tag rows for quarantine, without collecting anything.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StructType

from validators.errors import first_line
from validators.results import FailingRow
from validators.rules import RowRule, column, ident, sql_string

logger = logging.getLogger(__name__)

FLAG_PREFIX = "__lg_f"
QUERY_PREFIX = "__lg_q"
ANY_FLAG = "`__lg_any`"
QUERY_REASON = "row returned by the assertion query"


@dataclass(frozen=True)
class QueryProbe:
    """A ``sql`` check folded into the pass (see :mod:`validators.sql_fold`).

    Attributes:
        check: the check name.
        kind: ``value`` (a ``single_value`` aggregate) or ``rows`` (a ``zero_rows`` assertion).
        sql: ``value``: the aggregate expression; ``rows``: the ``WHERE`` predicate (``TRUE`` without one).
        outputs: ``rows``: the query's select list as (output name, SQL expression); ``*`` is expanded by
            :meth:`expand`.
    """

    check: str
    kind: Literal["value", "rows"]
    sql: str
    outputs: tuple[tuple[str, str], ...] = ()

    def expand(self, schema: StructType) -> list[tuple[str, str, bool]]:
        """The outputs over a view of ``schema`` as (name, SQL, hashable); ``*`` becomes every column."""
        out: list[tuple[str, str, bool]] = []
        for name, sql in self.outputs:
            if sql == "*":
                out += [(f.name, ident(f.name), not isinstance(f.dataType, MapType)) for f in schema.fields]
            else:
                plain = name in schema.fieldNames() and sql == ident(name)
                out.append((name, sql, not (plain and isinstance(schema[name].dataType, MapType))))
        return out


@dataclass(frozen=True)
class RowPass:
    """What one pass measured.

    Attributes:
        total_rows: rows of the view.
        rule_failures: failing rows per (check name, rule name).
        check_failures: rows failing any rule of the check, per check name.
        samples: bounded sample of failing rows per (check name, rule name).
        duration_ms: wall time of the pass (its Spark jobs plus planning).
        jobs: Spark jobs the pass ran (0 when it was counted inside another job).
        query_values: the value of each folded ``single_value`` SQL check, by check name.
        query_rows: rows returned by each folded ``zero_rows`` SQL check, by check name.
        query_samples: bounded sample of those rows, by check name.
    """

    total_rows: int
    rule_failures: dict[tuple[str, str], int]
    check_failures: dict[str, int]
    samples: dict[tuple[str, str], list[FailingRow]]
    duration_ms: float
    jobs: int = 1
    query_values: dict[str, Any] = field(default_factory=dict)
    query_rows: dict[str, int] = field(default_factory=dict)
    query_samples: dict[str, list[FailingRow]] = field(default_factory=dict)


def with_pre_columns(df: DataFrame, rules: Sequence[RowRule]) -> DataFrame:
    """``df`` plus the helper columns the rules read (each computed once per row)."""
    pre: dict[str, Any] = {}
    for r in rules:
        pre.update(r.pre_columns)
    return df.select("*", *[c.alias(name) for name, c in pre.items()]) if pre else df


def _row_json(names: Sequence[tuple[str, str]]) -> str:
    if not names:
        return "'{}'"
    return "to_json(named_struct(" + ", ".join(f"{sql_string(n)}, {e}" for n, e in names) + "))"


def _or(flags: Sequence[str]) -> str:
    return " OR ".join(flags) if flags else "false"


def evaluate(df: DataFrame, rules: Sequence[RowRule], checks: Sequence[str], *, sample_size: int,
             sample_columns: Sequence[str] | None = None, queries: Sequence[QueryProbe] = (),
             expect_failures: bool = False) -> RowPass:
    """Count and sample the failures of ``rules`` (and evaluate folded SQL ``queries``) over ``df``.

    A clean view costs one job that only counts; samples are taken by a second job over the failing rows, run only
    when something failed and only for the rules and queries that did. With ``expect_failures`` (the caller knows
    rows fail: an inline pass saw them) counts and samples share one job.

    Args:
        df: the view.
        rules: the compiled rules ((check, name) unique).
        checks: the names of the checks whose any-rule failure count is wanted (checks without rules count 0).
        sample_size: failing rows kept per rule (0: no samples).
        sample_columns: columns of ``df`` shown with sampled rows (default: all).
        queries: folded ``sql`` checks over this view.
        expect_failures: count and sample in one job.

    Raises:
        Exception: whatever Spark raises (an analysis error in a folded query, a failed job); the caller decides.
    """
    t0 = time.perf_counter()
    original = list(df.columns)
    shown = [c for c in (sample_columns or original) if c in original]
    sampler = _Sampler.of(df, shown, sample_size) if sample_size > 0 else None
    counting = _Counting.build(rules, checks, [q for q in queries if q.kind == "rows"],
                               [q for q in queries if q.kind == "value"])
    jobs = 1
    if expect_failures and counting.all_flags:
        m, detail = _run(counting, df, sampler, count=True, detail=True)
    else:
        m, _ = _run(counting, df, None, count=True, detail=False)
        detail = None
        if int(m["failing"]):
            jobs = 2
            _, detail = _run(counting, df, sampler, count=False, detail=True)  # over the failing rows only
    samples: list[Any] | None = None  # None: not sampled
    if sampler is not None:
        samples = list(detail["samples"] or []) if detail is not None else []
    result = counting.row_pass(counting.merged(m, detail), samples,
                               duration_ms=round((time.perf_counter() - t0) * 1000, 1), jobs=jobs)
    logger.info("one pass: %d rules and %d folded SQL checks over %d rows in %d job(s), %.0f ms", len(rules),
                len(queries), result.total_rows, jobs, result.duration_ms)
    return result


@dataclass(frozen=True)
class _Sampler:
    """How sampled rows are shown and ordered: the row as JSON of the shown columns (``row_json``), a hash of its
    hashable ones (``hashable``; map columns cannot be hashed)."""

    schema: StructType
    row_json: str
    hashable: list[str]
    size: int

    @classmethod
    def of(cls, df: DataFrame, shown: Sequence[str], size: int) -> _Sampler:
        """The sampler of ``df`` showing columns ``shown``, keeping ``size`` rows per rule."""
        schema = df.schema
        return cls(schema, _row_json([(c, ident(c)) for c in shown]),
                   [ident(c) for c in shown if not isinstance(schema[c].dataType, MapType)], size)

    def aggregate(self, counting: _Counting, i: int) -> str:
        """The top-``size`` sample aggregate of rule (or, past the rules, folded query) ``i``."""
        if i < len(counting.rules):
            value = f"named_struct('reason', {counting.rules[i].reason_sql}, 'row', {self.row_json})"
            key = f"xxhash64({', '.join([str(i), *self.hashable])})"
            flag = counting.flags[i]
        else:
            j = i - len(counting.rules)
            outputs = counting.rows_q[j].expand(self.schema)
            value = f"named_struct('reason', {sql_string(QUERY_REASON)}, 'row', {_row_json([o[:2] for o in outputs])})"
            key = f"xxhash64({', '.join([e for _, e, h in outputs if h] or ['0'])})"
            flag = counting.qflags[j]
        return f"min_by(CASE WHEN {flag} THEN {value} END, CASE WHEN {flag} THEN {key} END, {self.size})"


def _run(counting: _Counting, df: DataFrame, sampler: _Sampler | None, *, count: bool,
         detail: bool) -> tuple[Any, Any]:
    """One job over ``df`` into the ``noop`` sink. With ``count``, the counting observer over every row (``rows``,
    ``failing``, ``value<j>``); with ``detail``, an observer over the rows failing anything: ``rules`` and ``checks``
    (counts per rule and folded query, per check) and, with a ``sampler``, ``samples`` (per rule and query). Returns
    (counts or None, detail or None)."""
    plan = counting.flagged(df)
    counted: Observation | None = None
    if count:
        counted = Observation(f"lakegate_validators_{uuid.uuid4().hex}")
        plan = plan.observe(counted, F.expr(counting.metrics).alias("m"))
    details: Observation | None = None
    if detail:
        parts = [counting.detail]
        if sampler is not None:
            aggregates = [sampler.aggregate(counting, i) for i in range(len(counting.all_flags))]
            parts.append(f"'samples', array({', '.join(aggregates)})")
        details = Observation(f"lakegate_validators_{uuid.uuid4().hex}")
        plan = plan.where(ANY_FLAG).observe(details, F.expr(f"named_struct({', '.join(parts)})").alias("d"))
    plan.selectExpr("1 AS x").write.format("noop").mode("overwrite").save()
    return (counted.get["m"] if counted is not None else None), (details.get["d"] if details is not None else None)


@dataclass(frozen=True)
class _Counting:
    """The counting half of a pass: the flag columns and the observed aggregate, and how to read its result."""

    rules: tuple[RowRule, ...]
    checks: tuple[str, ...]
    rows_q: tuple[QueryProbe, ...]
    values_q: tuple[QueryProbe, ...]
    flags: tuple[str, ...]
    qflags: tuple[str, ...]
    check_names: tuple[str, ...]
    metrics: str
    """The counting observer's aggregate: ``rows``, ``failing`` (rows failing anything), ``value<j>``."""
    detail: str
    """The detail observer's fields (over failing rows): ``rules`` (per rule, then per folded query), ``checks``."""

    @classmethod
    def build(cls, rules: Sequence[RowRule], checks: Sequence[str], rows_q: Sequence[QueryProbe],
              values_q: Sequence[QueryProbe]) -> _Counting:
        flags = [ident(f"{FLAG_PREFIX}{i}") for i in range(len(rules))]
        qflags = [ident(f"{QUERY_PREFIX}{j}") for j in range(len(rows_q))]
        by_check: dict[str, list[str]] = {c: [] for c in checks}
        for r, f in zip(rules, flags, strict=True):
            by_check.setdefault(r.check, []).append(f)
        check_names = [c for c, fs in by_check.items() if fs]
        counts = [f"count_if({f})" for f in flags + qflags]
        metrics = ["'rows', count(1)", f"'failing', count_if({ANY_FLAG})",
                   *[f"'value{j}', {q.sql}" for j, q in enumerate(values_q)]]
        detail = [f"'rules', array({', '.join(counts)})" if counts else "'rules', array()",
                  f"'checks', array({', '.join(f'count_if({_or(by_check[c])})' for c in check_names)})"]
        return cls(tuple(rules), tuple(checks), tuple(rows_q), tuple(values_q), tuple(flags), tuple(qflags),
                   tuple(check_names), f"named_struct({', '.join(metrics)})", ", ".join(detail))

    @property
    def all_flags(self) -> tuple[str, ...]:
        """The flag columns of the rules, then of the folded ``zero_rows`` queries (the order of ``rules`` counts)."""
        return self.flags + self.qflags

    def merged(self, m: Any, detail: Any) -> dict[str, Any]:
        """The metrics :meth:`row_pass` reads, from the counting observer's ``m`` and the detail observer's
        ``detail`` (None when no row failed: every per-rule and per-check count is then 0)."""
        if detail is None:
            detail = {"rules": [0] * len(self.all_flags), "checks": [0] * len(self.check_names)}
        return {"rows": m["rows"], "rules": detail["rules"], "checks": detail["checks"],
                **{f"value{j}": m[f"value{j}"] for j in range(len(self.values_q))}}

    def flagged(self, df: DataFrame) -> DataFrame:
        """``df`` (and the rules' helper columns) with a flag column per rule and folded ``zero_rows`` query, and
        :data:`ANY_FLAG`, whether any of them holds."""
        projection = ["*"]
        projection += [f"{r.failed_sql} AS {f}" for r, f in zip(self.rules, self.flags, strict=True)]
        projection += [f"coalesce({q.sql}, false) AS {f}" for q, f in zip(self.rows_q, self.qflags, strict=True)]
        return with_pre_columns(df, self.rules).selectExpr(*projection).selectExpr(
            "*", f"{_or(self.all_flags)} AS {ANY_FLAG}")

    def row_pass(self, m: Any, samples: list[Any] | None, *, duration_ms: float, jobs: int = 1) -> RowPass:
        """The :class:`RowPass` of observed metrics ``m`` (and sampled rows: None when not sampled)."""
        rules, rows_q = self.rules, self.rows_q
        rule_counts = [int(n) for n in m["rules"]]
        check_counts = [int(n) for n in m["checks"]]
        sampled = samples is not None
        return RowPass(
            total_rows=int(m["rows"]),
            rule_failures={(r.check, r.name): rule_counts[i] for i, r in enumerate(rules)},
            check_failures={**dict.fromkeys(self.checks, 0),
                            **{c: check_counts[j] for j, c in enumerate(self.check_names)}},
            samples={(r.check, r.name): _samples(samples[i] if samples else None) for i, r in enumerate(rules)}
            if sampled else {},
            duration_ms=duration_ms,
            jobs=jobs,
            query_values={q.check: m[f"value{j}"] for j, q in enumerate(self.values_q)},
            query_rows={q.check: rule_counts[len(rules) + j] for j, q in enumerate(rows_q)},
            query_samples={q.check: _samples(samples[len(rules) + j] if samples else None)
                           for j, q in enumerate(rows_q)},
        )


class InlinePass:
    """A pass run inside another job's scan of the rows — a table write, as tablecore's ``RowObserver`` — so the
    rows are not read again. It observes only what a clean view needs: the row count, the count of rows failing
    anything (every rule, every folded ``zero_rows`` query) and the folded ``single_value`` aggregates. When nothing
    failed, every per-rule and per-check count is exactly 0 and :meth:`result` gives the whole :class:`RowPass`;
    when something failed, the caller runs :func:`evaluate` (per-rule counts and samples).

    Args:
        compile: given the rows' data columns (a DataFrame used for its schema only) and :attr:`now`, the rules,
            the check names and the folded queries to evaluate; whatever it raises makes the pass unusable
            (:attr:`error`), never the write.
        now: the moment rules comparing with "now" are compiled with (default: now, UTC).
    """

    def __init__(self, compile: Callable[[DataFrame, dt.datetime], tuple[list[RowRule], list[str], list[QueryProbe]]],
                 *, now: dt.datetime | None = None) -> None:
        self._compile = compile
        self._counting: _Counting | None = None
        self._observation: Observation | None = None
        self._metrics: Any = None
        self.error: str | None = None
        self.schema: StructType | None = None
        """The data columns the pass was compiled against (set when attached)."""
        self.now = now or dt.datetime.now(dt.UTC)
        """The moment rules comparing with "now" were compiled with (:meth:`Suite.run` compiles with it too)."""

    def __call__(self, df: DataFrame, data_columns: list[str]) -> DataFrame:
        """Attach the pass to ``df`` (tablecore's ``RowObserver`` protocol): same rows, same columns."""
        if self._observation is not None:
            raise ValueError("an inline pass observes one job only")
        try:
            data = df.select(*[ident(c) for c in data_columns])
            rules, checks, queries = self._compile(data, self.now)
            c = _Counting.build(rules, checks, [q for q in queries if q.kind == "rows"],
                                [q for q in queries if q.kind == "value"])
            failing = _or([f"({r.failed_sql})" for r in c.rules] + [f"coalesce({q.sql}, false)" for q in c.rows_q])
            observation = Observation(f"lakegate_validators_{uuid.uuid4().hex}")
            # ``any`` is computed in the projection (generated code), the observer only counts it (see the module)
            observed = with_pre_columns(df, c.rules).selectExpr("*", f"{failing} AS {ANY_FLAG}").observe(
                observation, F.expr(c.metrics).alias("m"))
            out = observed.select(*[ident(col) for col in df.columns])
        except Exception as e:  # the write goes on without the pass; the caller evaluates the view itself
            self.error = first_line(e)
            logger.warning("inline row pass not attached: %s", self.error)
            return df
        self._counting, self._observation = c, observation
        self.schema = data.schema
        return out

    def matches(self, rules: Sequence[RowRule], checks: Sequence[str], queries: Sequence[QueryProbe]) -> bool:
        """Whether the attached pass evaluated exactly these rules (same SQL), checks and folded queries."""
        c = self._counting
        if c is None:
            return False
        return ([(r.check, r.name, r.failed_sql) for r in c.rules] == [(r.check, r.name, r.failed_sql) for r in rules]
                and list(c.checks) == list(checks)
                and [*c.rows_q, *c.values_q] == [*[q for q in queries if q.kind == "rows"],
                                                 *[q for q in queries if q.kind == "value"]])

    def _observed(self) -> Any:
        """The observed metrics; None if no job ran the pass (not attached, the write failed or wrote nothing).
        Never waits."""
        if self._metrics is not None or self._observation is None:
            return self._metrics
        try:
            metrics = completed_metrics(self._observation)
        except Exception as e:  # the observed job failed
            logger.warning("inline row pass has no result: %s", e)
            return None
        self._metrics = metrics["m"] if metrics is not None else None
        return self._metrics

    @property
    def rows(self) -> int | None:
        """Rows the observed job saw (None: no job ran the pass)."""
        m = self._observed()
        return int(m["rows"]) if m is not None else None

    @property
    def clean(self) -> bool:
        """The job ran the pass and no row failed any rule or folded ``zero_rows`` query."""
        m = self._observed()
        return m is not None and int(m["failing"]) == 0

    def result(self) -> RowPass | None:
        """The pass's :class:`RowPass` when :attr:`clean` (every failure count 0); None otherwise."""
        if not self.clean or self._counting is None:
            return None
        c = self._counting
        return c.row_pass(c.merged(self._observed(), None), None, duration_ms=0.0, jobs=0)


def completed_metrics(observation: Observation) -> Any:
    """The metrics (a ``Row``) of ``observation`` once a job ran its plan; None when none did. Never waits.

    ``Observation.get`` would block until a job runs the plan. Spark completes an observation before the action that
    ran it returns (``SQLExecution`` -> ``ObservationManager.tryComplete``), so an incomplete one means no job ran it.

    Raises:
        Exception: what made the observed job fail.
    """
    jo = observation._jo
    if jo is None or not jo.future().isCompleted():
        return None
    return observation.get


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
    entries = [f"CASE WHEN {r.failed_sql} THEN named_struct('check', {sql_string(r.check)}, "
               f"'rule', {sql_string(r.name)}, 'reason', {r.reason_sql}) END" for r in rules]
    tagged = with_pre_columns(df, rules).selectExpr(
        "*", f"filter(array({', '.join(entries)}), e -> e IS NOT NULL) AS {ident(tag)}")
    violations = ident(tag)
    cols = [ident(c) for c in original]
    passing = tagged.where(f"size({violations}) = 0").selectExpr(*cols)
    failing = tagged.where(f"size({violations}) > 0").selectExpr(
        f"{violations}[0].check AS {ident(check_column)}",
        f"{violations}[0].reason AS {ident(reason_column)}",
        f"{violations} AS {ident(violations_column)}",
        *cols)
    return passing, failing
