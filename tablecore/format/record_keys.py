"""Record keys and partition paths (format reference §5.2): the constants every engine shares, and the same rules
over Arrow arrays for writers that do not run in Spark (:mod:`tablecore.arrow_writer`).

``tablecore.spark.keys`` builds the same values as Spark column expressions; ``tests/tablecore/test_arrow_writer.py``
checks that both give the same strings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablecore.exceptions import InvalidInputError

NULL_KEY = "__null__"
EMPTY_KEY = "__empty__"
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# Hive's escapePathName: control characters, '"', '#', '%', "'", '*', '/', ':', '=', '?', '\\', 0x7F, '{', '[', ']', '^'
ESCAPED = ["%"] + [chr(c) for c in range(1, 32)] + ['"', "#", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[",
                                                     "]", "^"]


def hive_escape(value: str) -> str:
    """Hive's path escaping: each special character becomes ``%XX`` (upper-case hex)."""
    return "".join(f"%{ord(ch):02X}" if ch in ESCAPED else ch for ch in value)


def string_form_is_sparks(t: pa.DataType) -> bool:
    """Types whose Arrow cast to string gives exactly Spark's ``CAST(... AS STRING)``."""
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
                or pa.types.is_boolean(t) or pa.types.is_date32(t))


def _as_string(table: pa.Table, name: str, role: str) -> pa.ChunkedArray:
    col = table.column(name)
    if not string_form_is_sparks(col.type):
        raise InvalidInputError(
            f"{role} field {name!r} is {col.type}: an Arrow write takes record key and partition fields of type "
            "string, integer, boolean or date (whose text is Spark's); write this batch through Spark")
    return pc.cast(col, pa.string())


def record_keys(table: pa.Table, fields: Sequence[str], *, complex_keys: bool) -> tuple[pa.ChunkedArray, int]:
    """``_hoodie_record_key`` of every row from the key ``fields`` (``f1:v1,f2:v2`` with ``complex_keys``), and how
    many rows have a null or empty key (every key field null or empty, for complex keys)."""
    values = [_as_string(table, f, "record key") for f in fields]
    invalid = [pc.or_kleene(pc.is_null(v), pc.equal(v, "")) for v in values]
    bad = invalid[0]
    for m in invalid[1:]:
        bad = pc.and_kleene(bad, m)
    n_bad = int(pc.sum(pc.fill_null(bad, True)).as_py() or 0)
    if not complex_keys:
        return values[0], n_bad
    parts = []
    for f, v in zip(fields, values, strict=True):
        v = pc.if_else(pc.is_null(v), NULL_KEY, pc.if_else(pc.equal(v, ""), EMPTY_KEY, v))
        parts.append(pc.binary_join_element_wise(f + ":", v, ""))
    return pc.binary_join_element_wise(*parts, ","), n_bad


def partition_paths(table: pa.Table, fields: Sequence[str], *, hive_style: bool,
                    url_encode: bool) -> tuple[list[str], np.ndarray]:
    """``_hoodie_partition_path`` of every row from the partition ``fields``, encoded: the distinct paths and, per row,
    the index of its path (an int64 array). ``[""]`` without fields, else the joined segments (``f=v`` with
    ``hive_style``, values escaped as Hive does with ``url_encode``). Each distinct value is formatted once and no
    per-row string is built (a partition column holds few values)."""
    n = table.num_rows
    if not fields:
        return [""], np.zeros(n, dtype=np.int64)
    field_texts: list[list[str]] = []
    field_codes: list[np.ndarray] = []
    for f in fields:
        encoded = pc.dictionary_encode(_as_string(table, f, "partition")).combine_chunks()
        texts = []
        for value in encoded.dictionary.to_pylist():
            text = hive_escape(value) if url_encode and value else value
            texts.append(text or DEFAULT_PARTITION)
        texts.append(DEFAULT_PARTITION)  # the code of a null value
        null_code = len(texts) - 1
        codes = pc.fill_null(encoded.indices, null_code).to_numpy(zero_copy_only=False).astype(np.int64)
        if hive_style:
            texts = [f"{f}={t}" for t in texts]
        field_texts.append(texts)
        field_codes.append(codes)
    composite = field_codes[0]
    space = len(field_texts[0])
    for texts, codes in zip(field_texts[1:], field_codes[1:], strict=True):
        composite = composite * len(texts) + codes
        space *= len(texts)
    if space <= 1 << 24:  # a dense code space: count, then renumber the codes present (no sort)
        present = np.flatnonzero(np.bincount(composite, minlength=space))
        renumber = np.zeros(space, dtype=np.int64)
        renumber[present] = np.arange(len(present), dtype=np.int64)
        inverse = renumber[composite]
    else:
        present, inverse = np.unique(composite, return_inverse=True)
    paths = []
    for c in present.tolist():
        segments = []
        for texts in reversed(field_texts):
            c, i = divmod(c, len(texts))
            segments.append(texts[i])
        paths.append("/".join(reversed(segments)))
    return paths, inverse.astype(np.int64)
