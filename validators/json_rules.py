"""JSON documents in string columns validated against a JSON Schema, as one vectorized Python UDF per rule.

The UDF is an iterator-of-Series pandas UDF: the JSON Schema validator is compiled once per partition (per Python
worker call), then every value of every Arrow batch is checked. It returns null for a valid document and the first
error otherwise, so one UDF call yields both the rule's ``failed`` flag and its reason. This is the only Python code
in the one pass; rules of every other kind are native Spark expressions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructType

from schema_registry.model import json_schema_validator
from validators.rules import RowRule, first_value, has_repetition, ident, resolve_type, sql_concat, sql_string

MAX_ERROR_CHARS = 300


def json_error(validator: Any, value: str | None, allow_null: bool) -> str | None:
    """Why ``value`` is not a document valid under ``validator`` (None if it is)."""
    if value is None:
        return None if allow_null else "is null, not a JSON document"
    try:
        doc = json.loads(value)
    except ValueError as e:
        return f"is not JSON: {e}"[:MAX_ERROR_CHARS]
    error = next(iter(validator.iter_errors(doc)), None)
    if error is None:
        return None
    where = "/" + "/".join(str(p) for p in error.absolute_path)
    return f"violates the JSON Schema at {where}: {error.message}"[:MAX_ERROR_CHARS]


def _validate_batches(schema_text: str, allow_null: bool) -> Any:
    def validate(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        schema = json.loads(schema_text)
        validator = json_schema_validator(schema)(schema)  # compiled once per partition
        for batch in batches:
            yield batch.map(lambda v: json_error(validator, v, allow_null))

    return validate


def json_schema_rule(*, name: str, check: str, path: str, schema: dict[str, Any], df_schema: StructType,
                     allow_null: bool = True, subject: str = "the JSON Schema") -> RowRule | str:
    """The row rule validating the JSON strings at ``path``, or why it cannot be built.

    Args:
        name: the rule name.
        check: the check name.
        path: a top-level column or a nested record field (not through arrays or maps).
        schema: the JSON Schema.
        df_schema: the view's schema.
        allow_null: whether null passes.
        subject: how the schema is named in the description.
    """
    from pyspark.sql.functions import pandas_udf

    if has_repetition(path):
        return f"json_schema rules on repeated paths ({path}) are not supported"
    t = resolve_type(df_schema, path)
    if t is None:
        return f"column {path} is missing"
    if not isinstance(t, StringType):
        return f"column {path} is {t.simpleString()}, a JSON document needs string"
    schema_text = json.dumps(schema, sort_keys=True)
    helper = "__lg_json_" + hashlib.sha1(f"{name}\0{schema_text}".encode()).hexdigest()[:12]
    udf = pandas_udf(_validate_batches(schema_text, allow_null), "string")  # type: ignore[call-overload]
    value: Column = F.expr(first_value(path, lambda v: v))
    return RowRule(name=name, check=check, description=f"{path} is valid under {subject}",
                   failed_sql=f"{ident(helper)} IS NOT NULL",
                   reason_sql=sql_concat(sql_string(f"{path} "), ident(helper)),
                   pre_columns={helper: udf(value)})
