"""``AuditContext``: the views a suite reads, as DataFrames (the same suite runs in tests and in WAP)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from validators.errors import MissingViewError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

VIEW_NAMES = ("batch", "changes", "snapshot", "before")


class StagedViews(Protocol):
    """What :meth:`AuditContext.from_staged` needs: tablecore's ``StagedCommit`` has exactly these methods."""

    def changes(self) -> DataFrame: ...

    def view_schema(self) -> StructType: ...

    def snapshot(self) -> DataFrame: ...

    def before(self) -> DataFrame: ...

    def snapshot_count(self) -> int: ...


@dataclass(frozen=True)
class AuditContext:
    """The views of one audit. Each is optional; a check that reads a missing view fails with an error.

    Attributes:
        batch: the raw input of the write.
        changes: the rows the commit writes (after dedupe; with Hudi meta columns when staged).
        snapshot: the table as it will be after publish.
        before: the table before the commit (what readers see now).
    """

    batch: DataFrame | None = None
    changes: DataFrame | None = None
    snapshot: DataFrame | None = None
    before: DataFrame | None = None
    lazy: Mapping[str, Callable[[], DataFrame]] = field(default_factory=dict, repr=False, compare=False)
    """Views built on first use (each building costs driver work: a timeline load, a file listing)."""
    lazy_schemas: Mapping[str, Callable[[], StructType]] = field(default_factory=dict, repr=False, compare=False)
    """The schemas of lazy views, when known without building them (compiling checks needs only the schema)."""
    counters: Mapping[str, Callable[[], int]] = field(default_factory=dict, repr=False, compare=False)
    """Views whose exact row count is known without reading their rows (a table snapshot counts from file footers
    and log keys): a ``single_value`` check ``SELECT count(*) FROM {view}`` is answered by the counter when the view
    has nothing else to evaluate."""

    @classmethod
    def from_dataframe(cls, df: DataFrame, *, before: DataFrame | None = None) -> AuditContext:
        """A context for plain DataFrames: ``df`` is the batch, the changes and the snapshot."""
        return cls(batch=df, changes=df, snapshot=df, before=before)

    @classmethod
    def from_staged(cls, staged: StagedViews, *, batch: DataFrame | None = None) -> AuditContext:
        """The views of a tablecore ``StagedCommit``, each planned when a check first reads it (a suite that never
        reads ``{before}`` does not list the table for it); nothing is read here."""
        return cls(batch=batch, lazy={"changes": staged.changes, "snapshot": staged.snapshot,
                                      "before": staged.before},
                   lazy_schemas={"changes": staged.view_schema, "snapshot": staged.view_schema},
                   counters={"snapshot": staged.snapshot_count})

    def view(self, name: str) -> DataFrame:
        """The DataFrame of view ``name``.

        Raises:
            MissingViewError: the context does not carry that view.
        """
        if name not in VIEW_NAMES:
            raise MissingViewError(f"unknown view {name!r}")
        df: DataFrame | None = getattr(self, name)
        if df is None and name in self.lazy:
            df = self.lazy[name]()
            object.__setattr__(self, name, df)  # built once: later reads get the same DataFrame
        if df is None:
            raise MissingViewError(f"the audit context has no {name!r} view")
        return df

    def schema(self, name: str) -> StructType:
        """The schema of view ``name``, without building a lazy view whose schema is known.

        Raises:
            MissingViewError: the context does not carry that view.
        """
        if getattr(self, name, None) is None and name in self.lazy_schemas:
            return self.lazy_schemas[name]()
        return self.view(name).schema

    def built(self, name: str) -> DataFrame | None:
        """The DataFrame of view ``name`` if given or already built; None otherwise (nothing is built)."""
        df: DataFrame | None = getattr(self, name, None) if name in VIEW_NAMES else None
        return df

    def available(self) -> list[str]:
        """The names of the views present (built or not)."""
        return [n for n in VIEW_NAMES if getattr(self, n) is not None or n in self.lazy]
