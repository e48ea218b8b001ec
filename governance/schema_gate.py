"""The schema gate: before anything is written, a batch's columns are checked against the table's registered subject.

- The batch *conforms* when every column is a field of the latest version with the same type (nullability is a row
  rule, checked by the structural check) and every field it lacks has a default.
- Otherwise a candidate schema is derived: the latest version's record (name, namespace, field attributes such as
  ``semanticType`` and ``doc``) with the batch's columns — fields of the same type kept as registered, new or retyped
  fields nullable with ``default: null``. The registry tests it at the subject's own compatibility level (transitive
  levels included). A compatible candidate is registered when the policy allows evolution; anything else is
  refused and nothing is written.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Literal

from pyspark.sql.types import StructType

from governance.audit import SchemaDecision
from schema_registry.errors import SchemaRegistryError, SubjectNotFoundError
from tablecore.format.avro_schema import arrow_to_avro, avro_to_arrow
from tablecore.spark.schema import arrow_to_spark, spark_to_arrow

if TYPE_CHECKING:
    from schema_registry import RegistryClient

logger = logging.getLogger(__name__)

Evolution = Literal["refuse", "register"]

CONTROL_COLUMNS = ("_hoodie_is_deleted",)
"""Columns that steer the write (delete markers) and are not part of the data schema."""


def data_columns(schema: StructType) -> StructType:
    """``schema`` without Hudi meta and control columns."""
    return StructType([f for f in schema.fields if not f.name.startswith("_hoodie_")])


def check_batch_schema(client: RegistryClient, subject: str, batch_schema: StructType, *, table_name: str,
                       evolution: Evolution) -> SchemaDecision:
    """Decide whether a batch of ``batch_schema`` may be written under ``subject`` (see the module docstring).

    Registry errors other than a missing subject propagate (``SchemaRegistryError``): a gate that cannot reach its
    registry must not write.
    """
    data = data_columns(batch_schema)
    try:
        latest = client.latest(subject)
    except SubjectNotFoundError:
        candidate = arrow_to_avro(spark_to_arrow(data), table_name)
        if evolution != "register":
            return SchemaDecision(subject=subject, action="refused",
                                  messages=(f"subject {subject!r} is not registered and the gate may not register "
                                            "schemas (evolution: refuse)",))
        registered = client.register(subject, json.dumps(candidate))
        logger.info("registered the first schema of %s (id %d)", subject, registered.id)
        return SchemaDecision(subject=subject, version=registered.version, schema_id=registered.id,
                              action="registered", messages=("first version registered from the batch's columns",))
    current = json.loads(latest.schema)
    types = _field_types(current)
    differences = _differences(current, types, data)
    if not differences:
        return SchemaDecision(subject=subject, version=latest.version, schema_id=latest.id, action="conforms")
    candidate = _candidate(current, types or {}, data, table_name)
    text = json.dumps(candidate)
    report = client.test_compatibility(subject, text, version=None)
    if not report.is_compatible:
        return SchemaDecision(subject=subject, version=latest.version, schema_id=latest.id, action="refused",
                              messages=(*differences, *(f"incompatible: {m}" for m in report.messages)))
    if evolution != "register":
        return SchemaDecision(subject=subject, version=latest.version, schema_id=latest.id, action="refused",
                              messages=(*differences, "the change is compatible but the gate may not register "
                                                      "new versions (evolution: refuse)"))
    try:
        registered = client.register(subject, text)
    except SchemaRegistryError as e:
        return SchemaDecision(subject=subject, version=latest.version, schema_id=latest.id, action="refused",
                              messages=(*differences, f"registration failed: {e}"))
    logger.info("registered %s version %s (id %d): %s", subject, registered.version, registered.id,
                "; ".join(differences))
    return SchemaDecision(subject=subject, version=registered.version, schema_id=registered.id, action="registered",
                          messages=differences)


def _field_types(avro: dict[str, Any]) -> dict[str, str] | None:
    """Spark type strings (no nullability) of the record's top-level fields; None if tablecore cannot map it."""
    try:
        spark = arrow_to_spark(avro_to_arrow(avro))
    except (ValueError, KeyError, TypeError) as e:
        logger.debug("registered schema not mappable to Spark types: %s", e)
        return None
    return {f.name: f.dataType.simpleString() for f in spark.fields}


def _differences(current: dict[str, Any], types: dict[str, str] | None, data: StructType) -> tuple[str, ...]:
    fields = {f["name"]: f for f in current.get("fields", [])}
    out: list[str] = []
    for col in data.fields:
        if col.name not in fields:
            out.append(f"column {col.name} ({col.dataType.simpleString()}) is not in the registered schema")
        elif types is None or types.get(col.name) != col.dataType.simpleString():
            registered = types.get(col.name) if types else "unmappable"
            out.append(f"column {col.name} is {col.dataType.simpleString()}, registered as {registered}")
    present = set(data.fieldNames())
    for name, f in fields.items():
        if name not in present and "default" not in f:
            out.append(f"field {name} (no default) is missing from the batch")
    return tuple(out)


def _candidate(current: dict[str, Any], types: dict[str, str], data: StructType, table_name: str) -> dict[str, Any]:
    derived = {f["name"]: f for f in arrow_to_avro(spark_to_arrow(data), table_name)["fields"]}
    registered = {f["name"]: f for f in current.get("fields", [])}
    fields: list[dict[str, Any]] = []
    for col in data.fields:
        old = registered.get(col.name)
        if old is not None and types.get(col.name) == col.dataType.simpleString():
            fields.append(old)
        else:
            fields.append(derived[col.name])
    present = set(data.fieldNames())
    fields.extend(f for name, f in registered.items() if name not in present and "default" in f)
    return {**current, "fields": fields}
