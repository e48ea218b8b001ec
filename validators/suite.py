"""``Suite``: runs checks on an :class:`~validators.context.AuditContext` and returns a ``SuiteResult``.

Order of a run:

1. row-level checks (``schema``, ``semantic``, ``json_schema``) are compiled into row rules per view, then every
   view's rules are evaluated in **one Spark job** (:mod:`validators.onepass`); ``sql`` checks simple enough to be
   folded (an aggregate ``single_value``, a filter ``zero_rows``: :mod:`validators.sql_fold`) are evaluated in that
   same job;
2. the other ``sql`` checks run their queries;
3. ``expectations`` checks run their GX suites.

Example:
    >>> suite = load_suite("checks/trips.yaml")  # doctest: +SKIP
    >>> result = suite.run(AuditContext.from_dataframe(df))  # doctest: +SKIP
    >>> result.verdict, result.check("fare_range").failing_rows  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession

from schema_registry.avro import parse_schema
from schema_registry.errors import SchemaRegistryError
from validators.context import AuditContext
from validators.errors import SchemaResolutionError, ValidatorsError, first_line
from validators.model import (
    ExpectationsCheck,
    JsonSchemaCheck,
    Policy,
    SchemaCheck,
    SemanticCheck,
    SqlCheck,
    SuiteSpec,
)
from validators.onepass import InlinePass
from validators.results import (
    CheckResult,
    FailingRow,
    RuleResult,
    Status,
    SuiteResult,
    decide_status,
    verdict_of,
)
from validators.rules import RowRule
from validators.sources import LocalSchemas, SchemaSource, read_json_file
from validators.structural import StructuralIssue

if TYPE_CHECKING:
    import avro.schema

    from validators.onepass import QueryProbe, RowPass

logger = logging.getLogger(__name__)

RowCheck = SchemaCheck | SemanticCheck | JsonSchemaCheck


@dataclass
class CompiledCheck:
    """A row-level check compiled against one view.

    Attributes:
        check: the check.
        issues: structural issues (the check fails and counts every row).
        rules: its row rules.
        error: why it could not be compiled (missing view, unresolvable schema...).
    """

    check: RowCheck
    issues: list[StructuralIssue] = field(default_factory=list)
    rules: list[RowRule] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class QuarantineSplit:
    """The rows of one view split by the quarantine-policy checks (lazy DataFrames; nothing is collected).

    Attributes:
        view: the view split.
        passing: rows failing no quarantine rule (original columns).
        failing: rows failing at least one: ``check``, ``reason``, ``violations``, then the original columns.
        rules: the rules used.
    """

    view: str
    passing: DataFrame
    failing: DataFrame
    rules: tuple[RowRule, ...]


class Suite(SuiteSpec):
    """A suite of checks that can run: see the module docstring. Build it in Python or with :func:`load_suite`."""

    # --- compiling ---------------------------------------------------------------------------------------------
    def row_checks(self) -> list[RowCheck]:
        """The row-level checks, in suite order."""
        return [c for c in self.checks if isinstance(c, (SchemaCheck, SemanticCheck, JsonSchemaCheck))]

    def pass_views(self) -> set[str]:
        """The views a run evaluates in a one-pass job: those of the row-level checks and of the ``sql`` checks that
        fold into a pass (what an inline pass can count; other ``sql`` checks run their own queries anyway)."""
        from validators.sql_fold import fold_sql_check

        folded = (fold_sql_check(c) for c in self.checks if isinstance(c, SqlCheck))
        return {c.view for c in self.row_checks()} | {f.view for f in folded if f is not None}

    def compile_rows(self, ctx: AuditContext, *, schemas: SchemaSource | None = None,
                     now: dt.datetime | None = None,
                     policies: Sequence[Policy] | None = None) -> dict[str, list[CompiledCheck]]:
        """Compile the row-level checks per view (nothing is read; only schemas are resolved).

        Args:
            ctx: the views.
            schemas: where schemas and semantic types come from (default: files and the built-in catalogue).
            now: the moment ``not_future`` rules compare with (default: now, UTC).
            policies: only checks with these policies.
        """
        source = schemas or LocalSchemas(self.base_dir)
        moment = now or dt.datetime.now(dt.UTC)
        out: dict[str, list[CompiledCheck]] = {}
        for check in self.row_checks():
            if policies is not None and check.policy not in policies:
                continue
            out.setdefault(check.view, []).append(self._compile(check, ctx, source, moment))
        return out

    def row_rules(self, ctx: AuditContext, *, schemas: SchemaSource | None = None,
                  now: dt.datetime | None = None) -> dict[str, list[RowRule]]:
        """Every compiled row rule per view (the expressions counting and quarantine share)."""
        return {view: [r for cc in compiled for r in cc.rules]
                for view, compiled in self.compile_rows(ctx, schemas=schemas, now=now).items()}

    def _compile(self, check: RowCheck, ctx: AuditContext, source: SchemaSource, now: dt.datetime) -> CompiledCheck:
        from validators.json_rules import json_schema_rule
        from validators.semantic import compile_semantic_check
        from validators.structural import compile_schema_check

        try:
            df_schema = ctx.schema(check.view)
            if isinstance(check, SchemaCheck):
                issues, rules = compile_schema_check(check, df_schema, _avro(source, check.avro))
            elif isinstance(check, SemanticCheck):
                avro_schema = _avro(source, check.avro) if check.avro is not None else None
                issues, rules = compile_semantic_check(check, df_schema, avro_schema, source.semantic_types(), now)
            else:
                js = check.json_schema if isinstance(check.json_schema, dict) else \
                    read_json_file(check.json_schema, self.base_dir)
                rule = json_schema_rule(name=f"json_schema:{check.column}", check=check.name, path=check.column,
                                        schema=js, df_schema=df_schema, allow_null=check.allow_null)
                issues, rules = ([StructuralIssue(check.column, rule)], []) if isinstance(rule, str) else ([], [rule])
        except ValidatorsError as e:
            return CompiledCheck(check, error=str(e))
        return CompiledCheck(check, issues=issues, rules=rules)

    # --- running -----------------------------------------------------------------------------------------------
    def run(self, ctx: AuditContext, *, schemas: SchemaSource | None = None,
            inline: Mapping[str, InlinePass] | None = None) -> SuiteResult:
        """Run every check on ``ctx``; never raises for failing data (see :func:`~validators.errors.raise_for_verdict`).

        Args:
            ctx: the views.
            schemas: where schemas and semantic types come from (default: files next to the suite and the built-in
                semantic catalogue; pass :class:`~validators.sources.RegistrySchemas` for a live registry).
            inline: per view, a pass of :meth:`inline_pass` that already counted the view's rows inside another
                job (a table write). Used instead of a pass of its own when it ran exactly the rules and folded
                queries compiled here and nothing failed; otherwise the view gets its own pass (per-rule counts and
                samples). The caller vouches that the observed rows are the view's rows.
        """
        from validators.expectations import run_expectations
        from validators.sql_checks import folded_result, run_sql_check, single_value_fields, zero_rows_fields

        started = dt.datetime.now(dt.UTC)
        t0 = time.perf_counter()
        by_name: dict[str, list[CheckResult]] = {}
        passes = 0
        inline = inline or {}
        # rules that compare with "now" must be the very rules an inline pass evaluated: compile with its moment
        moment = min((p.now for p in inline.values()), default=started)
        compiled_views = self.compile_rows(ctx, schemas=schemas, now=moment)
        folded = _folded_sql(self.checks, ctx, list(compiled_views))
        for view, checks in _counted_sql(folded, compiled_views, ctx).items():
            for sql_check, fields, ms in checks:
                by_name[sql_check.name] = [folded_result(sql_check, fields, ms)]
            del folded[view]
        for view in [*compiled_views, *[v for v in folded if v not in compiled_views]]:
            compiled = compiled_views.get(view, [])
            runnable = [cc for cc in compiled if cc.error is None]
            for cc in compiled:
                if cc.error is not None:
                    by_name[cc.check.name] = [_error_result(cc)]
            probes = folded.get(view, [])
            if not runnable and not probes:
                continue
            rules = [r for cc in runnable for r in cc.rules]
            _check_unique(rules)
            pre = inline.get(view)
            names = [cc.check.name for cc in runnable]
            counted = pre.result() if pre is not None and pre.matches(rules, names, [p for _, p in probes]) else None
            row_pass: RowPass | None
            if counted is not None:
                row_pass, evaluated = counted, [c for c, _ in probes]
                logger.info("suite %s: view %s counted inside the write (%d rules, %d folded SQL checks)",
                            self.name, view, len(rules), len(probes))
            else:
                # an inline pass that saw failing rows: counts and samples in one job
                dirty = pre is not None and pre.rows is not None and not pre.clean
                row_pass, evaluated = self._row_pass(ctx.view(view), runnable, rules, probes, expect_failures=dirty)
                passes += row_pass.jobs if row_pass is not None else 0
            if row_pass is None:
                continue
            for cc in runnable:
                by_name[cc.check.name] = [_row_result(cc, row_pass, view, self.sample_size)]
            for sql_check in evaluated:
                name = sql_check.name
                fields = single_value_fields(sql_check, row_pass.query_values[name]) \
                    if sql_check.form == "single_value" else \
                    zero_rows_fields(sql_check, row_pass.query_rows[name], row_pass.query_samples[name])
                by_name[name] = [folded_result(sql_check, fields, row_pass.duration_ms)]
        spark: SparkSession | None = None
        for check in self.checks:
            if isinstance(check, SqlCheck):
                if check.name in by_name:
                    continue  # folded into a row pass
                spark = spark or _session(ctx)
                by_name[check.name] = [run_sql_check(spark, check, ctx, sample_size=self.sample_size)]
            elif isinstance(check, ExpectationsCheck):
                try:
                    df = ctx.view(check.view)
                except ValidatorsError as e:
                    by_name[check.name] = [CheckResult(name=check.name, kind=check.kind, policy=check.policy,
                                                       status=Status.FAIL, error=str(e), message=f"error: {e}",
                                                       view=check.view)]
                    continue
                by_name[check.name] = run_expectations(check, df, base_dir=self.base_dir,
                                                       sample_size=self.sample_size)
        results = [r for c in self.checks for r in by_name.get(c.name, [])]
        verdict = verdict_of(results)
        duration = round((time.perf_counter() - t0) * 1000, 1)
        logger.info("suite %s: %s (%d checks, %d row pass job(s), %.0f ms)", self.name, verdict.value,
                    len(results), passes, duration)
        return SuiteResult(suite=self.name, verdict=verdict, checks=tuple(results), started_at=started,
                           duration_ms=duration, row_pass_jobs=passes)

    def inline_pass(self, view: str, *, schemas: SchemaSource | None = None,
                    now: dt.datetime | None = None) -> InlinePass:
        """A pass over ``view`` to attach to the job that writes its rows (tablecore's ``RowObserver``): it compiles
        the view's row checks and foldable ``sql`` checks against the written columns and counts their failures
        in that job. Hand it to :meth:`run` (``inline=``) once the write is done. Checks that fail to compile make
        it unusable (the view then gets its own pass, which reports the errors)."""
        source = schemas or LocalSchemas(self.base_dir)
        return InlinePass(lambda frame, moment: self._inline_plan(view, frame, source, moment), now=now)

    def _inline_plan(self, view: str, frame: DataFrame, source: SchemaSource,
                     now: dt.datetime) -> tuple[list[RowRule], list[str], list[QueryProbe]]:
        ctx = AuditContext(lazy={view: lambda: frame})
        compiled = self.compile_rows(ctx, schemas=source, now=now).get(view, [])
        failed = [cc for cc in compiled if cc.error is not None]
        if failed:
            raise ValidatorsError(f"check {failed[0].check.name!r}: {failed[0].error}")
        rules = [r for cc in compiled for r in cc.rules]
        _check_unique(rules)
        probes = [p for _, p in _folded_sql(self.checks, ctx, [view]).get(view, [])]
        return rules, [cc.check.name for cc in compiled], probes

    def _row_pass(self, df: DataFrame, runnable: list[CompiledCheck], rules: list[RowRule],
                  queries: list[tuple[SqlCheck, QueryProbe]], *,
                  expect_failures: bool = False) -> tuple[RowPass | None, list[SqlCheck]]:
        """The pass over one view, and the SQL checks it evaluated (none if Spark rejected the folded ones).

        A folded query that Spark rejects (an unknown column, a type error, a failing job) must not take the row
        rules down with it: the pass is run again without the folded queries, which then run on their own.
        """
        from validators.onepass import evaluate

        def run(probes: list[QueryProbe]) -> RowPass:
            return evaluate(df, rules, [cc.check.name for cc in runnable], sample_size=self.sample_size,
                            sample_columns=self._sample_columns(runnable), queries=probes,
                            expect_failures=expect_failures)

        if not queries:
            return run([]), []
        try:
            return run([p for _, p in queries]), [c for c, _ in queries]
        except Exception as e:  # any failure: fall back to the unfolded queries
            logger.warning("folded sql checks %s failed in the row pass, running them on their own: %s",
                           ", ".join(c.name for c, _ in queries), first_line(e))
        return (run([]) if runnable else None), []

    def split(self, ctx: AuditContext, *, schemas: SchemaSource | None = None,
              now: dt.datetime | None = None) -> list[QuarantineSplit]:
        """Split each view read by quarantine-policy checks into passing and failing rows (lazily).

        Rules of checks that could not be compiled, or that have structural issues, are not applied: such a check
        fails in :meth:`run` and blocks the commit instead.
        """
        from validators.onepass import split_rows

        out = []
        for view, compiled in self.compile_rows(ctx, schemas=schemas, now=now,
                                                policies=[Policy.QUARANTINE]).items():
            rules = [r for cc in compiled if cc.error is None and not cc.issues for r in cc.rules]
            passing, failing = split_rows(ctx.view(view), rules)
            out.append(QuarantineSplit(view=view, passing=passing, failing=failing, rules=tuple(rules)))
        return out

    def _sample_columns(self, compiled: list[CompiledCheck]) -> list[str] | None:
        cols: list[str] = []
        for cc in compiled:
            for c in cc.check.sample_columns or self.sample_columns or ():
                if c not in cols:
                    cols.append(c)
        return cols or None


def _counted_sql(folded: Mapping[str, list[tuple[SqlCheck, QueryProbe]]], compiled_views: Mapping[str, Any],
                 ctx: AuditContext) -> dict[str, list[tuple[SqlCheck, dict[str, Any], float]]]:
    """The folded ``SELECT count(*) FROM {view}`` checks answered by the context's counter of the view, for views
    with nothing else to evaluate (a pass over the view would count its rows for free). A counter that fails
    leaves the view to its pass."""
    from validators.sql_checks import single_value_fields

    out: dict[str, list[tuple[SqlCheck, dict[str, Any], float]]] = {}
    for view, probes in folded.items():
        counter = ctx.counters.get(view)
        if counter is None or view in compiled_views or not all(_is_row_count(p) for _, p in probes):
            continue
        t0 = time.perf_counter()
        try:
            n = counter()
        except Exception as e:
            logger.warning("counting view %s without reading it failed, counting its rows: %s", view, first_line(e))
            continue
        ms = round((time.perf_counter() - t0) * 1000, 1)
        logger.info("view %s: %d rows, counted without reading them (%.0f ms)", view, n, ms)
        out[view] = [(check, single_value_fields(check, n), ms) for check, _ in probes]
    return out


def _is_row_count(probe: QueryProbe) -> bool:
    """Whether a folded probe is a plain row count (``count(*)`` or ``count(1)``, no filter)."""
    return probe.kind == "value" and probe.sql.replace(" ", "").upper() in ("(COUNT(*))", "COUNT(*)", "(COUNT(1))",
                                                                            "COUNT(1)")


def _folded_sql(checks: Sequence[Any], ctx: AuditContext,
                pass_views: list[str]) -> dict[str, list[tuple[SqlCheck, QueryProbe]]]:
    """The ``sql`` checks that fold into a row pass, by the view whose pass evaluates them.

    A view that is the very same DataFrame as a view already getting a pass (``from_dataframe`` makes batch, changes
    and snapshot one object) joins that pass instead of getting its own.
    """
    from validators.sql_fold import fold_sql_check

    available = set(ctx.available())
    out: dict[str, list[tuple[SqlCheck, QueryProbe]]] = {}
    for check in checks:
        if not isinstance(check, SqlCheck):
            continue
        folded = fold_sql_check(check)
        if folded is None or folded.view not in available:
            continue
        df = ctx.built(folded.view)  # views planned lazily are never the same DataFrame as another view
        target = next((v for v in [*pass_views, *out] if v in available and df is not None and ctx.built(v) is df),
                      folded.view)
        out.setdefault(target, []).append((check, folded.probe))
    return out


def _avro(source: SchemaSource, ref: Any) -> avro.schema.Schema:
    text = source.schema_text(ref)
    try:
        return parse_schema(text, validate_defaults=False).avro
    except SchemaRegistryError as e:
        raise SchemaResolutionError(f"{ref.describe()}: {e}") from e


def _session(ctx: AuditContext) -> SparkSession:
    built = next((df for df in map(ctx.built, ctx.available()) if df is not None), None)
    if built is not None:  # a view at hand rather than planning a lazy one for its session
        return built.sparkSession
    for name in ctx.available():
        return ctx.view(name).sparkSession
    active = SparkSession.getActiveSession()
    if active is None:
        raise ValidatorsError("no SparkSession: the audit context has no views")
    return active


def _check_unique(rules: list[RowRule]) -> None:
    seen: set[tuple[str, str]] = set()
    for r in rules:
        if (r.check, r.name) in seen:
            raise ValidatorsError(f"check {r.check!r} has two row rules named {r.name!r}")
        seen.add((r.check, r.name))


def _error_result(cc: CompiledCheck) -> CheckResult:
    return CheckResult(name=cc.check.name, kind=cc.check.kind, policy=cc.check.policy, status=Status.FAIL,
                       error=cc.error, message=f"error: {cc.error}", view=cc.check.view)


def _row_result(cc: CompiledCheck, row_pass: Any, view: str, sample_size: int) -> CheckResult:
    check = cc.check
    total = row_pass.total_rows
    rules = tuple(RuleResult(name=r.name, description=r.description,
                             failing_rows=row_pass.rule_failures[(check.name, r.name)],
                             sample=tuple(row_pass.samples.get((check.name, r.name), ()))) for r in cc.rules)
    failing = row_pass.check_failures.get(check.name, 0)
    expected: Any = check.tolerance.describe() if check.tolerance else "no failing rows"
    if cc.issues:
        failing = total
        status = Status.FAIL
        observed: Any = {"structural_issues": [i.to_json() for i in cc.issues]}
        message = f"{len(cc.issues)} structural issue(s): " + "; ".join(str(i) for i in cc.issues[:3]) + \
            (" ..." if len(cc.issues) > 3 else "")
    else:
        status = decide_status(check.policy, check.tolerance, failing, total)
        observed = {"failing_fraction": round(failing / total, 8) if total else 0.0}
        bad_rules = [r for r in rules if r.failing_rows]
        if failing == 0:
            message = f"{total} rows pass {len(rules)} rule(s)"
        else:
            listed = ", ".join(f"{r.name} ({r.failing_rows})" for r in bad_rules[:4])
            more = f" and {len(bad_rules) - 4} more" if len(bad_rules) > 4 else ""
            message = f"{failing} of {total} rows fail: {listed}{more}"
    if check.policy == Policy.QUARANTINE and status == Status.WARN:
        message += " (quarantined)"
    return CheckResult(name=check.name, kind=check.kind, policy=check.policy, status=status, observed=observed,
                       expected=expected, failing_rows=failing, total_rows=total,
                       sample=tuple(_interleave([r.sample for r in rules], sample_size)),
                       duration_ms=row_pass.duration_ms, message=message, rules=rules, view=view)


def _interleave(samples: list[tuple[FailingRow, ...]], limit: int) -> Iterator[FailingRow]:
    """Round-robin over the rules' samples, so that every failing rule shows up in the check's sample."""
    n = 0
    depth = 0
    while n < limit and any(depth < len(s) for s in samples):
        for s in samples:
            if depth < len(s) and n < limit:
                yield s[depth]
                n += 1
        depth += 1
