"""Rows between Arrow tables and Avro datums (the Python values fastavro reads and writes).

The type mapping is the one of :mod:`tablecore.format.avro_schema`: a table is converted to the Arrow schema that
:func:`~tablecore.format.avro_schema.avro_to_arrow` derives from the Avro schema (int8/16 widen to int32, large
types shrink, timestamps become microseconds, zoned ones UTC), then to Python values in one pass of pyarrow:

============================  =====================================================
Arrow                         Avro datum value
============================  =====================================================
int / float / bool / string   int / float / bool / str
binary                        bytes
decimal128/256                ``decimal.Decimal``
date32                        ``datetime.date``
timestamp with a time zone    aware ``datetime.datetime`` (UTC), timestamp-micros
timestamp without one         naive ``datetime.datetime``, local-timestamp-micros
list                          list
map<string, T>                dict
struct                        dict (a nested record)
null slot                     ``None`` (the null branch of ``["null", T]``)
============================  =====================================================

fastavro decodes logical types to the same Python objects, so :func:`datums_to_arrow` is the inverse.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from tablecore.format.avro_schema import avro_to_arrow

__all__ = ["arrow_to_datums", "datums_to_arrow"]

logger = logging.getLogger(__name__)


_EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_MICROSECOND = datetime.timedelta(microseconds=1)


def _has_map(t: pa.DataType) -> bool:
    """True if ``t`` is or nests a map."""
    if pa.types.is_map(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_map(t.value_type)
    if pa.types.is_struct(t):
        return any(_has_map(t.field(i).type) for i in range(t.num_fields))
    return False


def _column_values(column: pa.ChunkedArray, name: str) -> list[Any]:
    """The Python values of one conformed column.

    Two shortcuts around ``to_pylist`` (both several times faster for large columns): timestamps are built from
    their int64 microseconds with ``datetime.UTC`` instead of a ``zoneinfo`` zone, and maps of non-map
    values become dicts from pyarrow's key/value tuples.
    """
    t = column.type
    if pa.types.is_timestamp(t):  # conformed to microseconds
        epoch = _EPOCH_UTC if t.tz is not None else _EPOCH_NAIVE
        micros = column.cast(pa.int64()).to_pylist()
        if column.null_count == 0:
            return [epoch + v * _MICROSECOND for v in micros]
        return [None if v is None else epoch + v * _MICROSECOND for v in micros]
    if pa.types.is_map(t) and not _has_map(t.item_type):
        out: list[Any] = []
        for pairs in column.to_pylist():
            if pairs is None:
                out.append(None)
                continue
            as_dict = dict(pairs)
            if len(as_dict) != len(pairs):
                raise ValueError(f"column {name!r}: map with duplicate keys {sorted(k for k, _ in pairs)}")
            out.append(as_dict)
        return out
    if _has_map(t):
        try:
            values: list[Any] = column.to_pylist(maps_as_pydicts="strict")
            return values
        except KeyError as exc:
            raise ValueError(f"column {name!r}: map with duplicate key {exc}") from exc
    plain: list[Any] = column.to_pylist()
    return plain


def _conform(column: pa.ChunkedArray, target: pa.DataType, name: str) -> pa.ChunkedArray:
    """``column`` cast to ``target``; refuse casts that lose data (e.g. sub-microsecond timestamps)."""
    if column.type.equals(target):
        return column
    try:
        return column.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise ValueError(f"column {name!r}: cannot convert {column.type} to the Avro field type {target}: {exc}") \
            from exc


def arrow_to_datums(table: pa.Table, avro_schema: Mapping[str, Any] | str) -> list[dict[str, Any]]:
    """Convert the rows of ``table`` to Avro datums of the record schema ``avro_schema``.

    Every datum has exactly the fields of the schema, in schema order; fields without a column in ``table`` are
    ``None``. Columns are matched by name (top-level order does not matter) and cast to the Arrow form of their Avro
    type first.

    Args:
        table: the rows.
        avro_schema: the Avro record schema (dict or JSON), e.g. a table schema with meta fields.

    Returns:
        One dict per row, ready for fastavro (see the module docstring for the value types).

    Raises:
        ValueError: ``table`` has a column the schema lacks, a column cannot be converted without loss (e.g.
            nanosecond timestamps that are not whole microseconds), or a map has duplicate keys.
    """
    target = avro_to_arrow(dict(avro_schema) if isinstance(avro_schema, Mapping) else avro_schema)
    extra = [name for name in table.column_names if target.get_field_index(name) < 0]
    if extra:
        raise ValueError(f"columns {extra} are not fields of the Avro schema")
    names = target.names
    columns = []
    for f in target:
        if f.name in table.column_names:
            columns.append(_column_values(_conform(table.column(f.name), f.type, f.name), f.name))
        else:
            columns.append([None] * table.num_rows)
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def datums_to_arrow(records: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """Convert Avro datums (as fastavro decodes them) to an Arrow table of ``schema``.

    The inverse of :func:`arrow_to_datums`: ``schema`` is usually ``avro_to_arrow`` of the writer or reader schema.
    Fields missing from a record are null; record fields not in ``schema`` are ignored.

    Args:
        records: the datums.
        schema: the Arrow schema of the result.

    Returns:
        The table, columns in ``schema`` order.

    Raises:
        ValueError: a value does not fit its column type (the message names the column).
    """
    arrays = []
    for f in schema:
        name = f.name
        values = [r.get(name) for r in records]
        try:
            arrays.append(pa.array(values, type=f.type))
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"column {name!r}: cannot convert values to {f.type}: {exc}") from exc
    return pa.Table.from_arrays(arrays, schema=schema)
