"""tablecore: upserts, incremental pulls and staged commits on tables in the Apache Hudi (v6) format, on PySpark."""

from tablecore.config import TableConfig
from tablecore.engine import Engine, MetadataOnlyEngine, Operation, RowObserver
from tablecore.exceptions import (
    CleanedRangeError,
    CommitConflictError,
    ConfigError,
    InstantNotFoundError,
    InvalidInputError,
    LockTimeoutError,
    RollbackError,
    SchemaEvolutionError,
    StagedCommitError,
    StorageError,
    StorageUnavailableError,
    TableCoreError,
    TableCorruptError,
    TableExistsError,
    TableNotFoundError,
)
from tablecore.results import CleanResult, CommitResult, InstantInfo, IntegrityReport, Problem
from tablecore.services.verify import verify_table
from tablecore.staged import StagedCommit
from tablecore.table import Table
from tablecore.table_transaction import TableTransaction

__all__ = [
    "CleanResult",
    "CleanedRangeError",
    "CommitConflictError",
    "CommitResult",
    "ConfigError",
    "Engine",
    "InstantInfo",
    "InstantNotFoundError",
    "IntegrityReport",
    "InvalidInputError",
    "LockTimeoutError",
    "MetadataOnlyEngine",
    "Operation",
    "Problem",
    "RollbackError",
    "RowObserver",
    "SchemaEvolutionError",
    "StagedCommit",
    "StagedCommitError",
    "StorageError",
    "StorageUnavailableError",
    "Table",
    "TableConfig",
    "TableCoreError",
    "TableCorruptError",
    "TableExistsError",
    "TableNotFoundError",
    "TableTransaction",
    "verify_table",
]
