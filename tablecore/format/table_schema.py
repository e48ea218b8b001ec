"""The Arrow schema of a table (meta columns first) from its Avro schema: what every reader and writer uses."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from tablecore.format.avro_schema import avro_to_arrow, meta_arrow_fields


def table_arrow_schema(avro: str | dict[str, Any], *, with_meta: bool = True) -> pa.Schema:
    """The Arrow schema of a table (meta columns first) from its Avro schema."""
    data = avro_to_arrow(json.loads(avro) if isinstance(avro, str) else avro)
    if not with_meta:
        return data
    return pa.schema(meta_arrow_fields() + list(data))
