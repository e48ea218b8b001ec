"""tablecore: upserts, incremental pulls and staged commits on tables in the Apache Hudi (v6) format, on PySpark."""

from tablecore.config import TableConfig
from tablecore.exceptions import (
    CommitConflictError,
    ConfigError,
    InstantNotFoundError,
    InvalidInputError,
    SchemaEvolutionError,
    StagedCommitError,
    TableCoreError,
    TableExistsError,
    TableNotFoundError,
)
from tablecore.results import CommitResult, InstantInfo
from tablecore.staged import StagedCommit
from tablecore.table import Table

__all__ = [
    "CommitConflictError",
    "CommitResult",
    "ConfigError",
    "InstantInfo",
    "InstantNotFoundError",
    "InvalidInputError",
    "SchemaEvolutionError",
    "StagedCommit",
    "StagedCommitError",
    "Table",
    "TableConfig",
    "TableCoreError",
    "TableExistsError",
    "TableNotFoundError",
]
