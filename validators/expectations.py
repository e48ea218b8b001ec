"""Running a Great Expectations suite with GX's Spark execution engine; each expectation maps to a CheckResult.

GX is optional (``pip install 'lakegate[gx]'``) and imported only when an ``expectations`` check runs (the import
alone takes seconds). Each run uses an ephemeral GX context with one Spark data source and a whole-DataFrame batch,
as GX 1.x documents for in-memory Spark DataFrames; nothing is written to disk.

Mapping: one :class:`CheckResult` per expectation, named ``<check>:<expectation type>[:<column>]`` (``#n`` appended
for repeats). ``failing_rows`` is GX's ``unexpected_count`` (when the expectation has one), ``observed`` its
``observed_value`` or unexpected percentage, ``sample`` its ``partial_unexpected_list`` (at most ``sample_size``
values). GX decides success (including ``mostly``); the check's policy decides what a failure means, and a check
tolerance, if set, is applied to ``unexpected_count`` out of ``element_count``.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame

from validators.errors import ExpectationsUnavailableError, SchemaResolutionError, first_line
from validators.model import ExpectationsCheck, expectation_suite_problem
from validators.results import CheckResult, FailingRow, Status, decide_status, soft_status
from validators.sources import read_json_file

logger = logging.getLogger(__name__)


def import_gx() -> Any:
    """The ``great_expectations`` module.

    Raises:
        ExpectationsUnavailableError: it is not installed.
    """
    try:
        import great_expectations as gx
    except ImportError as e:
        raise ExpectationsUnavailableError(
            "expectations checks need great_expectations (pip install 'lakegate[gx]')") from e
    return gx


def suite_document(check: ExpectationsCheck, base_dir: Path | None) -> dict[str, Any]:
    """The GX suite JSON of ``check`` (inline or read from its file).

    Raises:
        SchemaResolutionError: the file is missing, not JSON, or not an expectation suite.
    """
    if check.inline is not None:
        return dict(check.inline)
    assert check.suite is not None
    data = read_json_file(check.suite, base_dir)
    problem = expectation_suite_problem(data)
    if problem:
        raise SchemaResolutionError(f"{check.suite}: {problem}")
    return dict(data)


def unknown_expectation_types(doc: dict[str, Any]) -> list[str]:
    """Expectation types in ``doc`` that the installed GX does not know (empty when GX is not installed)."""
    try:
        gx = import_gx()
    except ExpectationsUnavailableError:
        return []
    from great_expectations.expectations.registry import get_expectation_impl

    unknown = []
    for e in doc.get("expectations", []):
        kind = e.get("type", e.get("expectation_type"))
        try:
            get_expectation_impl(kind)
        except gx.exceptions.ExpectationNotFoundError:
            unknown.append(str(kind))
    return unknown


def run_expectations(check: ExpectationsCheck, df: DataFrame, *, base_dir: Path | None,
                     sample_size: int) -> list[CheckResult]:
    """Validate ``df`` with the check's GX suite; one result per expectation (or one failing result on error)."""
    t0 = time.perf_counter()
    try:
        gx = import_gx()
        doc = suite_document(check, base_dir)
        expectations = [_normalized(e) for e in doc["expectations"]]
        context = gx.get_context(mode="ephemeral")
        _quiet(context)
        source = context.data_sources.add_spark(name=f"lakegate_{uuid.uuid4().hex[:12]}")
        asset = source.add_dataframe_asset(name=check.name)
        batch_def = asset.add_batch_definition_whole_dataframe("whole")
        suite = gx.ExpectationSuite(name=str(doc.get("name") or check.name), expectations=expectations)
        batch = batch_def.get_batch(batch_parameters={"dataframe": df})
        outcome = batch.validate(suite, result_format={"result_format": "SUMMARY",
                                                       "partial_unexpected_count": max(sample_size, 1)})
    except Exception as e:  # GX raises many kinds; one broken check must not hide the others
        logger.warning("expectations check %s could not run: %s", check.name, e)
        text = first_line(e, 500)
        return [CheckResult(name=check.name, kind="expectations", policy=check.policy, status=Status.FAIL,
                            error=text, message=f"error: {text}", view=check.view,
                            duration_ms=round((time.perf_counter() - t0) * 1000, 1))]
    elapsed = round((time.perf_counter() - t0) * 1000, 1)
    results = list(outcome.results)
    share = round(elapsed / max(len(results), 1), 1)
    seen: dict[str, int] = {}
    out = []
    for r in results:
        out.append(_to_check_result(check, r, seen, share, sample_size))
    logger.info("expectations check %s: %d expectations in %.0f ms", check.name, len(out), elapsed)
    return out


def _normalized(e: dict[str, Any]) -> dict[str, Any]:
    out = {"type": e.get("type", e.get("expectation_type")), "kwargs": dict(e.get("kwargs", {}))}
    if e.get("meta"):
        out["meta"] = e["meta"]
    return out


def _to_check_result(check: ExpectationsCheck, r: Any, seen: dict[str, int], duration_ms: float,
                     sample_size: int) -> CheckResult:
    config = r.expectation_config
    kind = str(config.type)
    kwargs = dict(config.kwargs)
    name = f"{check.name}:{kind}" + (f":{kwargs['column']}" if "column" in kwargs else "")
    seen[name] = seen.get(name, 0) + 1
    if seen[name] > 1:
        name += f"#{seen[name]}"
    result: dict[str, Any] = dict(r.result or {})
    error = _exception_message(r.exception_info)
    unexpected = result.get("unexpected_count")
    total = result.get("element_count")
    if error:
        status = Status.FAIL
    elif r.success:
        status = Status.PASS
    elif check.tolerance is not None and unexpected is not None:
        status = decide_status(check.policy, check.tolerance, int(unexpected), total)
    else:
        status = soft_status(check.policy, False)
    observed: Any = result.get("observed_value")
    if observed is None and unexpected is not None:
        observed = {"unexpected_count": unexpected, "unexpected_percent": result.get("unexpected_percent")}
    sample = tuple(FailingRow(reason=f"unexpected value for {kind}", row={"value": _plain(v)})
                   for v in (result.get("partial_unexpected_list") or [])[:sample_size])
    expected = {k: _plain(v) for k, v in kwargs.items() if k not in ("batch_id", "result_format")}
    if error:
        message = f"error: {error}"
    elif r.success:
        message = "expectation met"
    elif unexpected is not None:
        message = f"{unexpected} of {total} values unexpected"
    else:
        message = f"observed {observed!r}"
    return CheckResult(name=name, kind="expectations", policy=check.policy, status=status,
                       observed=_plain(observed), expected=expected,
                       failing_rows=int(unexpected) if unexpected is not None else None,
                       total_rows=int(total) if total is not None else None, sample=sample, duration_ms=duration_ms,
                       message=message, error=error, view=check.view)


def _quiet(context: Any) -> None:
    """Turn off GX's progress bars (library code must not draw on stderr)."""
    try:
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    except Exception as e:  # an older or newer GX without this knob: only cosmetic
        logger.debug("cannot turn off GX progress bars: %s", e)


def _exception_message(info: Any) -> str | None:
    """The first exception message in GX's ``exception_info``: either one record, or records per metric."""
    if not isinstance(info, dict) or not info:
        return None
    records = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, dict)]
    for rec in records:
        if rec.get("raised_exception") or rec.get("exception_message"):
            text = str(rec.get("exception_message") or "GX raised an exception").strip()
            return text.splitlines()[0][:500] if text else "GX raised an exception"
    return None


def _plain(value: Any) -> Any:
    """JSON-friendly: containers recursively, numbers and strings as they are, anything else as text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
