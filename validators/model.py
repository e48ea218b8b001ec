"""Checks as typed values: pydantic models discriminated by ``kind``, loaded from YAML or built in Python.

```
Check = SchemaCheck | SemanticCheck | SqlCheck | ExpectationsCheck | JsonSchemaCheck     (field "kind")
```

Every check has a ``name`` (unique in its suite), a :class:`Policy` and an optional :class:`Tolerance`. The
row-level kinds (``schema``, ``semantic``, ``json_schema``) read one view (default ``changes``) and compile into
row rules that a suite evaluates in one pass; ``sql`` and ``expectations`` checks run their own Spark jobs.

Everything here is pure: validation that needs no data (regexes, SQL syntax, view names, Avro schema syntax) runs
when a model is built, so a bad suite fails at load time.
"""

from __future__ import annotations

import json
import math
import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schema_registry.model import SemanticTypeSpec, json_schema_validator
from validators.sql_text import check_query

ViewName = Literal["batch", "changes", "snapshot", "before"]
_CHECK_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:\-]{0,127}$")


class Policy(StrEnum):
    """What a failing check does to the commit."""

    BLOCK = "block"
    """Fail the commit (the suite's verdict becomes ``block``)."""
    WARN = "warn"
    """Record the failure and publish anyway."""
    QUARANTINE = "quarantine"
    """Route the failing rows to quarantine and publish the rest (row-level checks only)."""


class Tolerance(BaseModel):
    """How many failing rows a check accepts before it fails.

    In YAML, a number in ``[0, 1]`` is a fraction (``tolerance: 0.001``), a string ending in ``%`` is a percentage
    (``tolerance: "0.1%"``), and a mapping sets either bound or both (``tolerance: {max_rows: 10}``). With both
    bounds the stricter one applies.

    Attributes:
        max_fraction: the largest accepted share of failing rows (of the rows checked).
        max_rows: the largest accepted number of failing rows.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_fraction: float | None = Field(default=None, ge=0, le=1)
    max_rows: int | None = Field(default=None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("tolerance must be a fraction, a percentage or a mapping, not a boolean")
        if isinstance(value, (int, float)):
            if not 0 <= value <= 1 or not math.isfinite(value):
                raise ValueError(f"a numeric tolerance is a fraction in [0, 1], got {value}; "
                                 "use {max_rows: N} for a row count")
            return {"max_fraction": float(value)}
        if isinstance(value, str):
            text = value.strip()
            if not text.endswith("%"):
                raise ValueError(f"a tolerance string must be a percentage such as '0.1%', got {value!r}")
            try:
                pct = float(text[:-1])
            except ValueError:
                raise ValueError(f"tolerance {value!r} is not a percentage") from None
            return {"max_fraction": pct / 100}
        return value

    @model_validator(mode="after")
    def _one_bound(self) -> Tolerance:
        if self.max_fraction is None and self.max_rows is None:
            raise ValueError("a tolerance needs max_fraction or max_rows")
        return self

    def allowed(self, total_rows: int | None) -> int:
        """The largest number of failing rows accepted out of ``total_rows`` (fraction bounds round down)."""
        bounds = []
        if self.max_rows is not None:
            bounds.append(self.max_rows)
        if self.max_fraction is not None:
            bounds.append(math.floor(self.max_fraction * total_rows) if total_rows is not None else 0)
        return min(bounds)

    def describe(self) -> str:
        """A short human rendering (``<= 0.1% of rows``)."""
        parts = []
        if self.max_fraction is not None:
            parts.append(f"<= {self.max_fraction * 100:g}% of rows")
        if self.max_rows is not None:
            parts.append(f"<= {self.max_rows} rows")
        return " and ".join(parts)


class SchemaRef(BaseModel):
    """Where an Avro schema comes from: a file, a registry subject, or inline. A plain string is a file path.

    Relative paths are resolved against the suite file's directory (or the working directory for suites built in
    Python). Subjects are resolved at run time through the suite's :class:`~validators.sources.SchemaSource`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str | None = None
    subject: str | None = None
    version: int | Literal["latest"] = "latest"
    inline: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"path": value}
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> SchemaRef:
        given = [k for k in ("path", "subject", "inline") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a schema reference needs exactly one of path, subject or inline "
                             f"(got {', '.join(given) or 'none'})")
        if self.inline is not None:
            _check_avro(json.dumps(self.inline))
        return self

    def describe(self) -> str:
        """``file trips.avsc``, ``subject trips-value (latest)`` or ``inline schema``."""
        if self.path is not None:
            return f"file {self.path}"
        if self.subject is not None:
            return f"subject {self.subject} ({self.version})"
        return "inline schema"


def _check_avro(text: str) -> None:
    from schema_registry.avro import parse_schema
    from schema_registry.errors import SchemaRegistryError

    try:
        parse_schema(text, validate_defaults=False)
    except SchemaRegistryError as e:
        raise ValueError(str(e)) from None


class _CheckBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str
    description: str = ""
    policy: Policy = Policy.BLOCK
    tolerance: Tolerance | None = None

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not _CHECK_NAME.match(v):
            raise ValueError(f"check name {v!r} must match {_CHECK_NAME.pattern}")
        return v

    @property
    def row_level(self) -> bool:
        """Whether the check compiles to row rules evaluated in the suite's one pass."""
        return False

    @model_validator(mode="after")
    def _policy_fits(self) -> _CheckBase:
        if self.policy == Policy.QUARANTINE and not self.row_level:
            raise ValueError("policy quarantine needs a row-level check (schema, semantic or json_schema), "
                             f"not {getattr(self, 'kind', '?')}")
        return self


class _RowCheckBase(_CheckBase):
    view: ViewName = "changes"
    sample_columns: tuple[str, ...] | None = None
    """Columns shown with each sampled failing row (default: the suite's ``sample_columns``, else all)."""

    @property
    def row_level(self) -> bool:
        return True


class SchemaCheck(_RowCheckBase):
    """Structural conformance of a DataFrame to an Avro schema.

    Column-level problems (a missing or extra column, a type that cannot hold the Avro type, an unsupported union)
    are *structural issues*: they fail the check whatever its tolerance and count every row as failing. Row-level
    rules cover what the Spark type cannot guarantee: nullability (nested too), enum symbols, decimal precision and
    scale, ``maxLength`` / ``minLength`` attributes on string fields, and the size of ``fixed`` values.

    Attributes:
        avro: the schema (YAML key ``schema``).
        allow_extra_columns: columns (and nested fields) absent from the schema are accepted.
        allow_missing_with_default: a missing field that has a default in the schema is accepted.
        ignore_columns: glob patterns of top-level columns to leave out (Hudi's meta columns by default).
    """

    kind: Literal["schema"] = "schema"
    avro: SchemaRef = Field(alias="schema")
    allow_extra_columns: bool = False
    allow_missing_with_default: bool = False
    ignore_columns: tuple[str, ...] = ("_hoodie_*",)


class SemanticCheck(_RowCheckBase):
    """Every constraint of every semantic type bound to a field, compiled into Spark SQL expressions.

    Fields bind through the ``semanticType`` attribute of the Avro schema and through ``bindings`` (field path ->
    type name; these win). Types resolve from ``types`` first, then from the suite's schema source (a registry, or
    the built-in catalogue offline).

    Attributes:
        avro: the registered schema whose ``semanticType`` attributes bind fields (YAML key ``schema``; optional when
            ``bindings`` is given).
        bindings: extra or overriding bindings, ``{field_path: type_name}``.
        types: semantic types defined in the suite, ``{name: spec}`` (same shape as the registry's).
        fields: only check these field paths (default: every bound field).
        constraints: only compile these constraint names (default: all).
    """

    kind: Literal["semantic"] = "semantic"
    avro: SchemaRef | None = Field(default=None, alias="schema")
    bindings: dict[str, str] = Field(default_factory=dict)
    types: dict[str, SemanticTypeSpec] = Field(default_factory=dict)
    fields: tuple[str, ...] | None = None
    constraints: tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _has_source(self) -> SemanticCheck:
        if self.avro is None and not self.bindings:
            raise ValueError("a semantic check needs a schema (with semanticType attributes) or bindings")
        known = set(CONSTRAINT_NAMES)
        for c in self.constraints or ():
            if c not in known:
                raise ValueError(f"unknown constraint {c!r}; known: {', '.join(CONSTRAINT_NAMES)}")
        return self


CONSTRAINT_NAMES = ("not_null", "minimum", "maximum", "pattern", "enum", "min_length", "max_length", "not_future",
                    "json_schema")


class ExpectValue(BaseModel):
    """The expected result of a ``single_value`` query: ``equals`` a value, or within ``[min, max]``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    equals: str | float | bool | None = None
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _one_form(self) -> ExpectValue:
        has_range = self.min is not None or self.max is not None
        if (self.equals is None) == (not has_range):
            raise ValueError("expect needs either equals or min/max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"expect min {self.min} is greater than max {self.max}")
        return self

    def describe(self) -> str:
        """``= 0``, ``in [0, 10]``, ``>= 1``..."""
        if self.equals is not None:
            return f"= {self.equals!r}"
        if self.min is not None and self.max is not None:
            return f"in [{self.min:g}, {self.max:g}]"
        return f">= {self.min:g}" if self.min is not None else f"<= {self.max:g}"


SqlForm = Literal["single_value", "equality", "inequality", "zero_rows"]


class SqlCheck(_CheckBase):
    """SQL over the views ``{batch}``, ``{changes}``, ``{snapshot}``, ``{before}``.

    Forms:
        single_value: the query returns one row with one column; it must match ``expect``.
        equality / inequality: the query uses ``{table}`` and runs on ``{before}`` and on ``{snapshot}``; the two
            results must be equal (inequality: differ) as multisets of rows.
        zero_rows: an assertion query; every row it returns is a violation (tolerance applies to that count).
    """

    kind: Literal["sql"] = "sql"
    form: SqlForm
    query: str
    expect: ExpectValue | None = None

    @model_validator(mode="after")
    def _valid(self) -> SqlCheck:
        if self.form == "single_value" and self.expect is None:
            raise ValueError("the single_value form needs expect (equals, or min/max)")
        if self.form != "single_value" and self.expect is not None:
            raise ValueError(f"expect is only for the single_value form, not {self.form}")
        if self.tolerance is not None and self.form != "zero_rows":
            raise ValueError(f"tolerance applies to the zero_rows form only, not {self.form}")
        if self.tolerance is not None and self.tolerance.max_fraction is not None:
            raise ValueError("a zero_rows tolerance is a row count: use tolerance: {max_rows: N}")
        problem = check_query(self.query, allow_table=self.form in ("equality", "inequality"))
        if problem:
            raise ValueError(problem)
        return self


class ExpectationsCheck(_CheckBase):
    """A Great Expectations suite (the JSON GX writes) run with GX's Spark execution engine on one view.

    Attributes:
        suite: path of the suite JSON file (relative to the suite file).
        inline: the suite JSON inline (``{"name": ..., "expectations": [{"type": ..., "kwargs": {...}}]}``).
        view: the view to validate.
    """

    kind: Literal["expectations"] = "expectations"
    suite: str | None = None
    inline: dict[str, Any] | None = None
    view: ViewName = "changes"

    @model_validator(mode="after")
    def _one_source(self) -> ExpectationsCheck:
        if (self.suite is None) == (self.inline is None):
            raise ValueError("an expectations check needs exactly one of suite (a file) or inline")
        if self.inline is not None:
            problem = expectation_suite_problem(self.inline)
            if problem:
                raise ValueError(problem)
        return self


def expectation_suite_problem(data: Any) -> str | None:
    """Why ``data`` is not a GX expectation-suite document (None if it looks like one)."""
    if not isinstance(data, dict):
        return "the expectation suite must be a JSON object"
    exps = data.get("expectations")
    if not isinstance(exps, list) or not exps:
        return "the expectation suite needs a non-empty 'expectations' list"
    for i, e in enumerate(exps):
        kind = e.get("type", e.get("expectation_type")) if isinstance(e, dict) else None
        if not isinstance(kind, str) or not kind.startswith("expect_"):
            return f"expectations[{i}] has no 'type' naming an expectation (expect_...)"
        if not isinstance(e.get("kwargs", {}), dict):
            return f"expectations[{i}] ({kind}): kwargs must be an object"
    return None


class JsonSchemaCheck(_RowCheckBase):
    """A string column holding JSON, validated against a JSON Schema (draft from ``$schema``, else 2020-12).

    Attributes:
        column: the column (a field path such as ``payload`` or ``meta.attrs``).
        json_schema: the JSON Schema inline, or the path of a JSON file holding it.
        allow_null: a null value passes (otherwise it fails as "not a JSON document").
    """

    kind: Literal["json_schema"] = "json_schema"
    column: str
    json_schema: dict[str, Any] | str
    allow_null: bool = True

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, v: dict[str, Any] | str) -> dict[str, Any] | str:
        if isinstance(v, dict):
            problem = json_schema_problem(v)
            if problem:
                raise ValueError(problem)
        return v


def json_schema_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (None if it is)."""
    import jsonschema

    try:
        json_schema_validator(schema).check_schema(schema)
    except jsonschema.SchemaError as e:
        return f"json_schema is not a valid JSON Schema: {e.message}"
    except ValueError as e:
        return str(e)
    return None


Check = Annotated[SchemaCheck | SemanticCheck | SqlCheck | ExpectationsCheck | JsonSchemaCheck,
                  Field(discriminator="kind")]
CHECK_KINDS = ("schema", "semantic", "sql", "expectations", "json_schema")
ROW_LEVEL_KINDS = frozenset({"schema", "semantic", "json_schema"})


class SuiteSpec(BaseModel):
    """A named list of checks plus the suite-wide settings (the YAML document).

    Attributes:
        name: the suite's name (shown in results and reports).
        checks: the checks, names unique.
        sample_size: failing rows kept per rule (bounded; 0 disables samples).
        sample_columns: columns shown with sampled failing rows (default: every column of the view).
        base_dir: where relative file paths resolve (the YAML file's directory; not serialized).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    checks: tuple[Check, ...]
    sample_size: int = Field(default=5, ge=0, le=1000)
    sample_columns: tuple[str, ...] | None = None
    base_dir: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _consistent(self) -> SuiteSpec:
        seen: set[str] = set()
        for i, c in enumerate(self.checks):
            if c.name in seen:
                raise ValueError(f"checks[{i}]: duplicate check name {c.name!r}")
            seen.add(c.name)
        return self
