"""``TableContext``: the narrow view of a table that the transaction and the table services work with — its
configuration, storage, timeline client and engine — instead of the ``Table`` facade."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tablecore.commit import CommitProtocol
from tablecore.config import METADATA_BY_LAKEGATE
from tablecore.exceptions import ConfigError
from tablecore.format.timeline import HOODIE_DIR
from tablecore.locks import commit_lock
from tablecore.metadata_table import metadata_table_in_use
from tablecore.table_properties import read_config, update_properties

logger = logging.getLogger(__name__)

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
    _metadata_table_checked: bool = field(default=False, init=False, repr=False)

    @classmethod
    def of(cls, config: TableConfig, io: FileIO, engine: Engine | None = None) -> TableContext:
        """A context over ``io`` with a fresh timeline client."""
        return cls(config, io, CommitProtocol(io, table_version=config.table_version), engine)

    @property
    def engine(self) -> Engine:
        """The engine; ConfigError if this context has none."""
        if self.engine_or_none is None:
            raise ConfigError("this operation needs a compute engine (open the table with a SparkSession)")
        return self.engine_or_none

    def disable_metadata_table(self) -> None:
        """Before this context's first instant: a metadata table (``.hoodie/metadata``, which Hudi 1.x keeps by
        default and hudi-rs and Spark list files through) that lakegate does not maintain (one of a version-6 table,
        or with partitions besides ``files``: :func:`tablecore.metadata_table.metadata_table_in_use`) is disabled
        the way Hudi disables it, since a write would leave it stale. First ``hoodie.table.metadata.partitions``
        (and its ``.inflight`` twin) are cleared, so readers stop using it; then the folder is deleted. A crash in
        between leaves a folder no reader looks at, deleted by the next write. A ``files``-only metadata table of
        version 8 is kept: every publish records its changes there."""
        if self._metadata_table_checked:
            return
        # as stored now (a rebuild may have turned the metadata table on since this context read the properties)
        stored = read_config(self.io, self.io.uri)
        self.config = self.config.model_copy(update={"metadata_partitions": stored.metadata_partitions,
                                                     "metadata_by_lakegate": stored.metadata_by_lakegate})
        if metadata_table_in_use(self.config):  # maintained by every publish: tablecore.metadata_table
            self._metadata_table_checked = True
            return
        folder = self.io.join(HOODIE_DIR, "metadata")
        if self.config.metadata_partitions:
            logger.warning("disabling the metadata table of %s (partitions %s): lakegate does not maintain it, and "
                           "readers that list files through it would miss what lakegate writes", self.io.uri,
                           ",".join(self.config.metadata_partitions))
            update_properties(self.io, {"hoodie.table.metadata.partitions": None,
                                        "hoodie.table.metadata.partitions.inflight": None, METADATA_BY_LAKEGATE: None})
            self.config = self.config.model_copy(update={"metadata_partitions": (), "metadata_by_lakegate": False})
        if self.io.list(folder, recursive=True):
            with commit_lock(self.io, self.meta.lock_timeout_s):  # not while a rebuild (which holds it) makes one
                if not read_config(self.io, self.io.uri).metadata_partitions:
                    self.io.delete_dir(folder)
        self._metadata_table_checked = True

    def record_create_schema(self, schema: str | None) -> None:
        """Record the table schema of the first write in ``hoodie.properties`` (``hoodie.table.create.schema``)."""
        if self.config.create_schema is None and schema:
            self.config = self.config.model_copy(update={"create_schema": schema})
            update_properties(self.io, {"hoodie.table.create.schema": schema})  # the one key: others may have moved
