"""A subject's history indexed for BACKWARD-direction checks: which earlier versions a new schema can be *proven*
to read without visiting them one by one.

A BACKWARD_TRANSITIVE registration checks ``R(new, v)`` for every live version ``v``, and a long history repeats the
same fields again and again (100 versions of a 50-field record share 49 fields). The checker's record rule for
``R(new, v)`` (see :func:`schema_registry.compatibility.reads`) looks at each reader field on its own: the writer's
field of the same name must have a type the reader's type reads, or, when the writer has no such field, the reader
field needs a default. So the verdict per reader field depends only on the *type* that version gives the field
name (or its absence), and an index over the history answers it for all versions at once:

```
(field name, type digest) ─► the versions giving the field that type        (bit sets over positions)
field name ─► the versions having the field at all
record name/full name ─► the versions with that record name
```

``readable(new)`` asks the verdict once per (reader field, distinct writer type of its name) and combines bit sets;
it is exactly the record rule, so versions outside the proven set are the ones the new schema cannot read, plus
the few the index leaves to the one-by-one check on purpose (versions that are not top-level records, reader
fields with aliases, the checker's enum-default corner). The index of a history is built once and extended by one
version per registration (:meth:`HistoryIndex.extend`); it holds only what content ids determine, so it is never
stale.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import avro.compatibility
import avro.schema

from schema_registry.compatibility import FieldShape, RecordShape, field_reads

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HistoryIndex:
    """Field types of a sequence of versions (positions 0..size-1, oldest first) as bit sets over positions.

    Attributes:
        size: the number of versions indexed.
        records: (record name, full name) -> (a record with those names, the versions with them).
        others: the versions that are not top-level records (left to the one-by-one check).
        fields: (field name, type digest) -> (a field of that name and type, the versions having it).
        type_keys: field name -> the type digests the versions give it.
        named: field name -> the versions having a field of that name.
    """

    size: int
    records: Mapping[tuple[str, str], tuple[avro.schema.RecordSchema, int]]
    others: int
    fields: Mapping[tuple[str, bytes], tuple[FieldShape, int]]
    type_keys: Mapping[str, tuple[bytes, ...]]
    named: Mapping[str, int]

    @classmethod
    def build(cls, shapes: Sequence[RecordShape | None]) -> HistoryIndex:
        """The index of versions with these record shapes (None: not a top-level record), oldest first."""
        return cls(0, {}, 0, {}, {}, {}).extend(shapes)

    def extend(self, shapes: Sequence[RecordShape | None]) -> HistoryIndex:
        """A new index: this one followed by versions with these shapes (this one is left as it is; the maps are
        flat, so extending copies them at C speed and touches one entry per field)."""
        records = dict(self.records)
        fields = dict(self.fields)
        type_keys = dict(self.type_keys)
        named = dict(self.named)
        others = self.others
        for offset, shape in enumerate(shapes):
            bit = 1 << (self.size + offset)
            if shape is None:
                others |= bit
                continue
            rec = shape.record
            known = records.get((rec.name, rec.fullname))
            records[(rec.name, rec.fullname)] = (rec, known[1] | bit) if known else (rec, bit)
            for pair, f in shape.by_pair.items():
                named[pair[0]] = named.get(pair[0], 0) | bit
                have = fields.get(pair)
                if have is None:
                    fields[pair] = (f, bit)
                    type_keys[pair[0]] = (*type_keys.get(pair[0], ()), pair[1])
                else:
                    fields[pair] = (have[0], have[1] | bit)
        return HistoryIndex(self.size + len(shapes), records, others, fields, type_keys, named)

    def readable(self, reader: RecordShape) -> int:
        """The versions (a bit set over positions) that ``reader`` is proven to read by the checker's record rule.

        Every other version either cannot be read or is left to the one-by-one check (see the module docstring).
        """
        everything = (1 << self.size) - 1
        ok = 0
        for rec, bits in self.records.values():
            if avro.compatibility.schema_name_equals(reader.record, rec):
                ok |= bits
        undecided = 0
        for name, rf in reader.by_name.items():
            if not ok:
                break
            good = 0
            for key in self.type_keys.get(name, ()):
                wf, bits = self.fields[(name, key)]
                if field_reads(rf, wf):
                    good |= bits
            lacking = everything & ~self.named.get(name, 0)
            if lacking:
                aliases = rf.field.props.get("aliases")
                if isinstance(aliases, Iterable) and aliases:
                    undecided |= lacking  # a writer field under one of the reader's aliases: checked one by one
                elif rf.field.has_default:
                    good |= lacking
                elif isinstance(rf.field.type, avro.schema.EnumSchema) and rf.field.type.props.get("default"):
                    undecided |= lacking  # the checker's enum-default corner (see reads)
            ok &= good | undecided
        return ok & ~undecided & ~self.others
