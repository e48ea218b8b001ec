"""Results are data: :class:`CheckResult` per check (with :class:`RuleResult` per row rule) and :class:`SuiteResult`.

All are frozen pydantic models: ``result.model_dump(mode="json")`` / :meth:`SuiteResult.to_json` give plain JSON,
:meth:`SuiteResult.from_json` reads it back. This module is data only: the HTML report is rendered by
:func:`validators.report.render_html` and a ``block`` verdict is raised by :func:`validators.errors.raise_for_verdict`.

Statuses and verdict:

- ``status`` of a check: ``pass``, ``warn`` or ``fail`` (see :func:`decide_status`);
- ``verdict`` of a suite: ``block`` if any check failed, else ``quarantine`` if a quarantine-policy check found
  failing rows, else ``warn`` if any check warned, else ``pass``.
"""

from __future__ import annotations

import datetime as dt
import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from validators.model import Policy, Tolerance


class Status(StrEnum):
    """The outcome of one check."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


class Verdict(StrEnum):
    """The outcome of a suite: what a write-audit-publish gate should do."""

    PASS = "pass"
    WARN = "warn"
    QUARANTINE = "quarantine"
    BLOCK = "block"


class FailingRow(BaseModel):
    """One sampled failing row: why it failed and the row's (sample) columns."""

    model_config = ConfigDict(frozen=True)

    reason: str
    row: dict[str, Any] = Field(default_factory=dict)


class RuleResult(BaseModel):
    """The outcome of one row rule of a row-level check.

    Attributes:
        name: e.g. ``semantic:rider_age:age_years:maximum`` or ``schema:fare:not_null``.
        description: what the rule requires (``rider_age <= 150``).
        failing_rows: rows that fail this rule.
        sample: up to the suite's ``sample_size`` failing rows.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    failing_rows: int
    sample: tuple[FailingRow, ...] = ()


class CheckResult(BaseModel):
    """The outcome of one check.

    Attributes:
        name, kind, policy: from the check.
        status: pass / warn / fail.
        observed: what was measured (a value, a row count, the structural issues...).
        expected: what the check requires.
        failing_rows: rows that fail (row-level checks, ``zero_rows`` and expectations; None otherwise).
        total_rows: rows checked (when known).
        sample: bounded sample of failing rows (row-level checks: drawn from every rule).
        duration_ms: time spent on this check; row-level checks share one pass and report its time.
        message: a one-line human summary.
        rules: per-rule outcomes of row-level checks.
        error: set when the check could not run (the status is then ``fail``).
        view: the view the check read.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    kind: str
    policy: Policy
    status: Status
    observed: Any = None
    expected: Any = None
    failing_rows: int | None = None
    total_rows: int | None = None
    sample: tuple[FailingRow, ...] = ()
    duration_ms: float = 0.0
    message: str = ""
    rules: tuple[RuleResult, ...] = ()
    error: str | None = None
    view: str | None = None

    @property
    def quarantines(self) -> bool:
        """A quarantine-policy check that found failing rows and did not fail outright."""
        return self.policy == Policy.QUARANTINE and self.status == Status.WARN and bool(self.failing_rows)

    def rule(self, name: str) -> RuleResult:
        """The result of the rule called ``name``.

        Raises:
            KeyError: no such rule.
        """
        for r in self.rules:
            if r.name == name:
                return r
        raise KeyError(name)


class SuiteResult(BaseModel):
    """The outcome of a suite run.

    Attributes:
        suite: the suite's name.
        verdict: pass / warn / quarantine / block.
        checks: one result per check (expectations checks give one per expectation).
        started_at: when the run started (UTC).
        duration_ms: wall time of the run.
        row_pass_jobs: Spark jobs the one-pass evaluation of the row rules used: one per distinct view, a second for a
            view with failing rows (their samples); none for a view counted clean inside another job by an inline
            pass.
    """

    model_config = ConfigDict(frozen=True)

    suite: str
    verdict: Verdict
    checks: tuple[CheckResult, ...]
    started_at: dt.datetime
    duration_ms: float
    row_pass_jobs: int = 0

    def check(self, name: str) -> CheckResult:
        """The result of the check called ``name``.

        Raises:
            KeyError: no such check.
        """
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def failed(self) -> list[CheckResult]:
        """The failing checks."""
        return [c for c in self.checks if c.status == Status.FAIL]

    @property
    def warned(self) -> list[CheckResult]:
        """The checks with status warn."""
        return [c for c in self.checks if c.status == Status.WARN]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible data."""
        return self.model_dump(mode="json")

    def to_json(self, *, indent: int | None = 2) -> str:
        """The result as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, default=str)

    @classmethod
    def from_json(cls, text: str) -> SuiteResult:
        """Read a result written by :meth:`to_json`."""
        return cls.model_validate_json(text)

    def summary(self) -> str:
        """One line per check: status, name, message."""
        lines = [f"suite {self.suite}: {self.verdict.value.upper()} ({self.duration_ms:.0f} ms)"]
        for c in self.checks:
            lines.append(f"  {c.status.value:<4}  {c.name}: {c.message}")
        return "\n".join(lines)


def decide_status(policy: Policy, tolerance: Tolerance | None, failing: int, total: int | None) -> Status:
    """The status of a check from its failing-row count.

    - ``block``: above the tolerance -> fail; failing but within it -> warn; none -> pass.
    - ``warn``: any failing row -> warn.
    - ``quarantine``: failing rows are quarantined (warn); above a *set* tolerance the check fails (too many bad
      rows to quarantine: block the commit).
    """
    if failing <= 0:
        return Status.PASS
    allowed = tolerance.allowed(total) if tolerance is not None else 0
    if policy == Policy.WARN:
        return Status.WARN
    if policy == Policy.QUARANTINE:
        return Status.FAIL if tolerance is not None and failing > allowed else Status.WARN
    return Status.FAIL if failing > allowed else Status.WARN


def soft_status(policy: Policy, passed: bool) -> Status:
    """The status of a check without a row count (single value, equality): fail, or warn under ``warn``."""
    if passed:
        return Status.PASS
    return Status.WARN if policy == Policy.WARN else Status.FAIL


def verdict_of(checks: list[CheckResult]) -> Verdict:
    """The suite verdict from its check results."""
    if any(c.status == Status.FAIL for c in checks):
        return Verdict.BLOCK
    if any(c.quarantines for c in checks):
        return Verdict.QUARANTINE
    if any(c.status == Status.WARN for c in checks):
        return Verdict.WARN
    return Verdict.PASS
