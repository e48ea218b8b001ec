"""The one exception tree of validators.

```
ValidatorsError
 ├── SuiteConfigError(ValueError)        a suite (YAML or Python) is invalid; raised at load time and names the entry
 ├── SchemaResolutionError(LookupError)  an Avro schema, a semantic type or a GX suite file cannot be resolved
 ├── MissingViewError(LookupError)       a check needs a view (batch, changes, snapshot, before) the context lacks
 ├── ExpectationsUnavailableError        the optional Great Expectations dependency is not installed
 └── ValidationFailed                    the suite's verdict is ``block``; carries the SuiteResult
```

:func:`raise_for_verdict` turns a ``block`` verdict into :class:`ValidationFailed`.

Errors while *running* a single check (a SQL query that fails analysis, a GX exception) do not raise: they become a
``fail`` :class:`~validators.results.CheckResult` with ``error`` set, so one broken check never hides the others.
"""

from __future__ import annotations

from validators.results import SuiteResult, Verdict


def first_line(e: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (its class name when the message is empty), at most ``limit``
    characters: what a warning or a check result shows of an error."""
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:limit]


class ValidatorsError(Exception):
    """Base class of every error raised by validators."""


class SuiteConfigError(ValidatorsError, ValueError):
    """A suite definition is invalid.

    Attributes:
        entry: the index of the offending check in ``checks`` (None for suite-level problems).
        check_name: the offending check's name, when it has one.
        line: the 1-based line of the entry in the YAML text, when loaded from YAML.
        problem: the message without the location prefix.
    """

    def __init__(self, problem: str, *, entry: int | None = None, check_name: str | None = None,
                 line: int | None = None, source: str | None = None) -> None:
        self.problem = problem
        self.entry = entry
        self.check_name = check_name
        self.line = line
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.source:
            where.append(self.source + (f":{self.line}" if self.line else ""))
        elif self.line:
            where.append(f"line {self.line}")
        if self.entry is not None:
            label = f"checks[{self.entry}]"
            if self.check_name:
                label += f" (name {self.check_name!r})"
            where.append(label)
        return (": ".join(where) + ": " if where else "") + self.problem


class SchemaResolutionError(ValidatorsError, LookupError):
    """An Avro schema, semantic type or expectation-suite file could not be found or parsed."""


class MissingViewError(ValidatorsError, LookupError):
    """A check needs a view that the :class:`~validators.context.AuditContext` does not carry."""


class ExpectationsUnavailableError(ValidatorsError, ImportError):
    """``great_expectations`` is not installed (``pip install 'lakegate[gx]'``)."""


class ValidationFailed(ValidatorsError):
    """The suite's verdict is ``block``.

    Attributes:
        result: the full :class:`~validators.results.SuiteResult`.
    """

    def __init__(self, result: SuiteResult) -> None:
        self.result = result
        failed = [c.name for c in result.checks if c.status == "fail"]
        super().__init__(f"suite {result.suite!r} blocked by {len(failed)} failing check(s): {', '.join(failed)}")


def raise_for_verdict(result: SuiteResult) -> SuiteResult:
    """Raise :class:`ValidationFailed` if ``result``'s verdict is ``block``; return ``result`` otherwise."""
    if result.verdict == Verdict.BLOCK:
        raise ValidationFailed(result)
    return result
