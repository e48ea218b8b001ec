"""tablecore: upserts, incremental pulls and staged commits on tables in the Apache Hudi (v6) format, on PySpark."""

from tablecore.arrow_reader import read_arrow, read_changes_arrow
from tablecore.config import TableConfig
from tablecore.engine import Engine, MetadataOnlyEngine, Operation, RowObserver
from tablecore.exceptions import (
    CleanedRangeError,
    CommitConflictError,
    ConfigError,
    InstantNotFoundError,
    InvalidInputError,
    LockTimeoutError,
    ReplicationError,
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
from tablecore.results import CleanResult, CommitResult, InstantInfo, IntegrityReport, Problem, ReplicationResult
from tablecore.services.replicate import replicate
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
    "ReplicationError",
    "ReplicationResult",
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
    "read_arrow",
    "read_changes_arrow",
    "replicate",
    "verify_table",
]
