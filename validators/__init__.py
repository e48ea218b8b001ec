"""validators: structural, semantic-type, SQL, JSON Schema and Great Expectations checks on Spark DataFrames.

Checks are typed values (pydantic, discriminated by ``kind``) loaded from YAML or built in Python; a
:class:`Suite` runs them on an :class:`AuditContext` (plain DataFrames, or the views of a tablecore staged commit)
and returns a :class:`SuiteResult` (JSON and a self-contained HTML report). Every row-level rule of a suite is
evaluated in one Spark job.

- ``load_suite(path_or_yaml)`` -> :class:`Suite`; ``suite.run(ctx)`` -> :class:`SuiteResult`;
- ``suite.split(ctx)`` -> passing / failing rows of the quarantine-policy checks (lazy DataFrames);
- ``LocalSchemas`` / ``RegistrySchemas(client)``: where Avro schemas and semantic types come from.
"""

from __future__ import annotations

from validators.context import AuditContext
from validators.errors import (
    ExpectationsUnavailableError,
    MissingViewError,
    SchemaResolutionError,
    SuiteConfigError,
    ValidationFailed,
    ValidatorsError,
    raise_for_verdict,
)
from validators.loading import load_suite, suite_from_dict
from validators.model import (
    Check,
    ExpectationsCheck,
    ExpectValue,
    JsonSchemaCheck,
    Policy,
    SchemaCheck,
    SchemaRef,
    SemanticCheck,
    SqlCheck,
    Tolerance,
)
from validators.onepass import InlinePass
from validators.report import render_html
from validators.results import CheckResult, FailingRow, RuleResult, Status, SuiteResult, Verdict
from validators.sources import LocalSchemas, RegistrySchemas, SchemaSource
from validators.suite import QuarantineSplit, Suite

__all__ = [
    "AuditContext",
    "Check",
    "CheckResult",
    "ExpectValue",
    "ExpectationsCheck",
    "ExpectationsUnavailableError",
    "FailingRow",
    "InlinePass",
    "JsonSchemaCheck",
    "LocalSchemas",
    "MissingViewError",
    "Policy",
    "QuarantineSplit",
    "RegistrySchemas",
    "RuleResult",
    "SchemaCheck",
    "SchemaRef",
    "SchemaResolutionError",
    "SchemaSource",
    "SemanticCheck",
    "SqlCheck",
    "Status",
    "Suite",
    "SuiteConfigError",
    "SuiteResult",
    "Tolerance",
    "ValidationFailed",
    "ValidatorsError",
    "Verdict",
    "load_suite",
    "raise_for_verdict",
    "render_html",
    "suite_from_dict",
]
