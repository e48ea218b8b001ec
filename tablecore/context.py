"""``TableContext``: the narrow view of a table that the transaction and the table services work with — its
configuration, storage, timeline client and engine — instead of the ``Table`` facade."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tablecore.commit import CommitProtocol
from tablecore.exceptions import ConfigError
from tablecore.table_properties import write_config

if TYPE_CHECKING:
    from tablecore.config import TableConfig
    from tablecore.engine import Engine
    from tablecore.io import FileIO



@dataclass
class TableContext:
    """One table's configuration, FileIO, timeline client (``meta``) and engine.

    ``engine`` is None for a context that only works on the timeline and files (a format-level test, a clean); what
    needs an engine raises :class:`ConfigError` then.
    """

    config: TableConfig
    io: FileIO
    meta: CommitProtocol
    engine_or_none: Engine | None = None

    @classmethod
    def of(cls, config: TableConfig, io: FileIO, engine: Engine | None = None) -> TableContext:
        """A context over ``io`` with a fresh timeline client."""
        return cls(config, io, CommitProtocol(io), engine)

    @property
    def engine(self) -> Engine:
        """The engine; ConfigError if this context has none."""
        if self.engine_or_none is None:
            raise ConfigError("this operation needs a compute engine (open the table with a SparkSession)")
        return self.engine_or_none

    def record_create_schema(self, schema: str | None) -> None:
        """Record the table schema of the first write in ``hoodie.properties`` (``hoodie.table.create.schema``)."""
        if self.config.create_schema is None and schema:
            self.config = self.config.model_copy(update={"create_schema": schema})
            write_config(self.io, self.config)
