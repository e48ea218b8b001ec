"""The records of Apache Hudi's metadata table (``HoodieMetadataRecord``) in its ``files`` partition, and how they
merge.

The ``files`` partition holds one record per data partition, keyed by the partition path (``.`` for a
non-partitioned table): a map from file name (relative to the partition) to ``{size, isDeleted}``. The record
``__all_partitions__`` maps every partition path to ``{0, isDeleted}``. A record is an HFile key/value: the key is
the record key, the value the Avro datum of ``HoodieMetadataRecord`` with ``key`` empty (the HFile key holds it),
decoded with the writer schema the HFile's file info (or the log block's SCHEMA header) carries.

Merging a newer record into an older one (as Hudi's ``HoodieMetadataPayload`` and hudi-rs do): a file in both keeps
the larger size, a newer tombstone (``isDeleted``) removes the file, and a tombstone for a file the older record
lacks is kept (a later merge with an even older record may still need it). Reading the final state drops tombstones.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import fastavro

from tablecore.format.hfile import HFile, HFileError, write_hfile

__all__ = [
    "ALL_PARTITIONS", "FILES_SCHEMA_JSON", "NON_PARTITIONED", "FileEntry", "FilesRecords", "decode_files_records",
    "encode_files_records", "merge_files_records", "parsed_writer_schema",
]

ALL_PARTITIONS = "__all_partitions__"
NON_PARTITIONED = "."
PARTITION_LIST, FILE_LIST = 1, 2

_FILE_INFO = {"type": "record", "name": "HoodieMetadataFileInfo", "fields": [
    {"name": "size", "type": "long", "doc": "Size of the file"},
    {"name": "isDeleted", "type": "boolean", "doc": "True if this file has been deleted"}]}
_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieMetadataRecord", "namespace": "org.apache.hudi.avro.model",
    "doc": "A record saved within the Metadata Table",
    "fields": [
        {"name": "key", "type": {"type": "string", "avro.java.string": "String"}},
        {"name": "type", "type": "int", "doc": "Type of the metadata record"},
        {"name": "filesystemMetadata", "doc": "Contains information about partitions and files within the dataset",
         "type": ["null", {"type": "map", "values": _FILE_INFO, "avro.java.string": "String"}], "default": None},
    ]}
FILES_SCHEMA_JSON = json.dumps(_SCHEMA, separators=(",", ":"))
"""The writer schema of the records lakegate writes: ``HoodieMetadataRecord``'s fields up to the files map (readers
resolve it against their own schema, whose later fields all default to null)."""
_PARSED = fastavro.parse_schema(_SCHEMA)


@dataclass(frozen=True)
class FileEntry:
    """A file of a ``files`` record: its size, or a tombstone."""

    size: int
    deleted: bool = False


FilesRecords = dict[str, dict[str, FileEntry]]
"""Record key (partition path, or ``__all_partitions__``) -> file (or partition) name -> entry."""


def encode_files_records(records: Mapping[str, Mapping[str, FileEntry]]) -> bytes:
    """One HFile of ``files`` records (a base file, or the content of an HFILE_DATA log block)."""
    entries = []
    for key, files in records.items():
        datum = {"key": "", "type": PARTITION_LIST if key == ALL_PARTITIONS else FILE_LIST,
                 "filesystemMetadata": {name: {"size": e.size, "isDeleted": e.deleted} for name, e in files.items()}}
        out = io.BytesIO()
        fastavro.schemaless_writer(out, _PARSED, datum)
        entries.append((key, out.getvalue()))
    return write_hfile(entries, {"schema": FILES_SCHEMA_JSON.encode()})


def decode_files_records(hfile: HFile, schema: str | None = None) -> FilesRecords:
    """The ``files`` records of an HFile, decoded with ``schema`` (a log block's SCHEMA header) or the file's own.

    Raises:
        HFileError: no writer schema, or a value that is not a ``files`` record of it.
    """
    text = schema if schema is not None else hfile.schema
    if text is None:
        raise HFileError("a metadata table HFile without a writer schema")
    parsed = parsed_writer_schema(text)
    out: FilesRecords = {}
    for key, value in hfile.entries:
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(value), parsed, None)
        except (EOFError, ValueError, IndexError, KeyError, TypeError) as e:
            raise HFileError(f"metadata record {key!r} does not decode with its writer schema: {e}") from e
        if not isinstance(datum, dict) or datum.get("type") not in (PARTITION_LIST, FILE_LIST):
            raise HFileError(f"metadata record {key!r} is not a files record")
        files = datum.get("filesystemMetadata") or {}
        out[key] = {name: FileEntry(int(e["size"]), bool(e["isDeleted"])) for name, e in files.items()}
    return out


@functools.lru_cache(maxsize=16)
def parsed_writer_schema(text: str) -> Any:
    """A writer schema of metadata records (``files`` or record index), parsed once (every log block of a metadata
    table carries the same one).

    Raises:
        HFileError: it does not parse.
    """
    try:
        return fastavro.parse_schema(json.loads(text))
    except (ValueError, KeyError, TypeError) as e:
        raise HFileError(f"the metadata records' writer schema does not parse: {e}") from e


def merge_files_records(layers: Iterable[FilesRecords]) -> FilesRecords:
    """Merge records oldest first (a base file's, then its log blocks' in order); tombstones are kept."""
    merged: FilesRecords = {}
    for layer in layers:
        for key, files in layer.items():
            into = merged.setdefault(key, {})
            for name, entry in files.items():
                before = into.get(name)
                if entry.deleted or before is None or before.deleted:
                    into[name] = entry
                else:
                    into[name] = FileEntry(max(before.size, entry.size))
    return merged
