"""Loading suites from YAML (or a dict) with errors that point at the offending entry.

Each entry of ``checks`` is validated on its own, so an error names it: ``suite.yaml:14: checks[3] (name
'fare_range'): unknown kind 'rnage' (known kinds: schema, semantic, sql, expectations, json_schema)``. Besides the
model's own validation (unknown kind, missing or unknown field, bad regex, SQL that does not parse, unknown view),
loading checks what can be checked without data: referenced files exist and parse (Avro schemas, JSON Schemas,
GX suites), and GX knows every expectation type (when GX is installed).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from validators.errors import SchemaResolutionError, SuiteConfigError
from validators.model import CHECK_KINDS, Check, ExpectationsCheck, JsonSchemaCheck, SchemaCheck, SemanticCheck
from validators.sources import LocalSchemas, read_json_file
from validators.suite import Suite

logger = logging.getLogger(__name__)

_CHECK = TypeAdapter(Check)
_SUITE_KEYS = {"name", "description", "checks", "sample_size", "sample_columns"}


def load_suite(source: str | Path, *, base_dir: Path | None = None) -> Suite:
    """Load a suite from a YAML file path, or from YAML text (anything containing a newline or ``:``).

    Args:
        source: a path to a ``.yaml`` / ``.yml`` file, or the YAML text itself.
        base_dir: where relative paths in the suite resolve (default: the file's directory, else the working
            directory).

    Raises:
        SuiteConfigError: the suite is invalid; the message names the entry (and its YAML line).
    """
    label: str | None = None
    if isinstance(source, Path) or ("\n" not in source and not source.lstrip().startswith("{")
                                    and source.endswith((".yaml", ".yml"))):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise SuiteConfigError(f"cannot read the suite: {e.strerror or e}", source=str(path)) from e
        label = str(path)
        base_dir = base_dir or path.resolve().parent
    else:
        text = str(source)
    try:
        data = yaml.safe_load(text)
        lines = _entry_lines(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise SuiteConfigError(f"not valid YAML: {getattr(e, 'problem', None) or e}", source=label,
                               line=mark.line + 1 if mark is not None else None) from e
    return suite_from_dict(data, base_dir=base_dir, lines=lines, source=label)


def suite_from_dict(data: Any, *, base_dir: Path | None = None, lines: list[int] | None = None,
                    source: str | None = None) -> Suite:
    """Build a suite from plain data (the parsed YAML); see :func:`load_suite` for the errors."""
    if not isinstance(data, dict):
        raise SuiteConfigError("a suite must be a mapping with name and checks", source=source)
    unknown = sorted(set(data) - _SUITE_KEYS)
    if unknown:
        raise SuiteConfigError(f"unknown suite key(s): {', '.join(unknown)} (known: {', '.join(sorted(_SUITE_KEYS))})",
                               source=source)
    raw_checks = data.get("checks")
    if not isinstance(raw_checks, list) or not raw_checks:
        raise SuiteConfigError("a suite needs a non-empty list of checks", source=source)
    checks = []
    names: dict[str, int] = {}
    for i, raw in enumerate(raw_checks):
        line = lines[i] if lines and i < len(lines) else None
        name = raw.get("name") if isinstance(raw, dict) else None
        where = {"entry": i, "check_name": name if isinstance(name, str) else None, "line": line, "source": source}
        if not isinstance(raw, dict):
            raise SuiteConfigError("a check must be a mapping", **where)  # type: ignore[arg-type]
        try:
            check = _CHECK.validate_python(raw)
        except ValidationError as e:
            raise SuiteConfigError(describe_validation_error(e, raw), **where) from None  # type: ignore[arg-type]
        if check.name in names:
            raise SuiteConfigError(f"duplicate check name {check.name!r} (also checks[{names[check.name]}])",
                                   **where)  # type: ignore[arg-type]
        names[check.name] = i
        try:
            _check_files(check, base_dir)
        except SchemaResolutionError as e:
            raise SuiteConfigError(str(e), **where) from None  # type: ignore[arg-type]
        checks.append(check)
    try:
        suite = Suite(name=data.get("name", ""), description=data.get("description", ""), checks=tuple(checks),
                      sample_size=data.get("sample_size", 5), sample_columns=data.get("sample_columns"),
                      base_dir=base_dir)
    except ValidationError as e:
        raise SuiteConfigError(describe_validation_error(e, data), source=source) from None
    logger.info("loaded suite %s with %d checks", suite.name, len(suite.checks))
    return suite


def describe_validation_error(e: ValidationError, raw: dict[str, Any]) -> str:
    """A one-line message for the first pydantic error of a check (unknown kind, missing field...)."""
    err = e.errors()[0]
    loc = [str(p) for p in err["loc"]]
    kind = raw.get("kind")
    if err["type"] == "union_tag_invalid":
        return f"unknown kind {kind!r} (known kinds: {', '.join(CHECK_KINDS)})"
    if err["type"] == "union_tag_not_found":
        return f"missing field 'kind' (one of: {', '.join(CHECK_KINDS)})"
    # drop the discriminator tag pydantic puts first in the location
    if loc and loc[0] == kind:
        loc = loc[1:]
    field = ".".join(loc)
    if err["type"] == "missing":
        return f"missing field {field!r}"
    if err["type"] == "extra_forbidden":
        return f"unknown field {field!r}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{field}: {msg}" if field else msg


def _check_files(check: Any, base_dir: Path | None) -> None:
    """Resolve the files a check names, so that a missing or broken file fails at load time."""
    from schema_registry.avro import parse_schema
    from schema_registry.errors import SchemaRegistryError

    if isinstance(check, (SchemaCheck, SemanticCheck)) and check.avro is not None and check.avro.path is not None:
        text = LocalSchemas(base_dir).schema_text(check.avro)
        try:
            parse_schema(text, validate_defaults=False)
        except SchemaRegistryError as e:
            raise SchemaResolutionError(f"schema file {check.avro.path}: {e}") from None
    if isinstance(check, JsonSchemaCheck) and isinstance(check.json_schema, str):
        from validators.model import json_schema_problem

        doc = read_json_file(check.json_schema, base_dir)
        problem = json_schema_problem(doc) if isinstance(doc, dict) else "a JSON Schema must be an object"
        if problem:
            raise SchemaResolutionError(f"{check.json_schema}: {problem}")
    if isinstance(check, ExpectationsCheck):
        from validators.expectations import suite_document, unknown_expectation_types

        unknown = unknown_expectation_types(suite_document(check, base_dir))
        if unknown:
            raise SchemaResolutionError(f"unknown expectation type(s): {', '.join(unknown)}")


def _entry_lines(text: str) -> list[int]:
    """The 1-based line of each item of the top-level ``checks`` sequence (empty if there is none)."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(node, yaml.MappingNode):
        return []
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "checks" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []
