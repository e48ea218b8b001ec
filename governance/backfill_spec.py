"""The ``backfill:`` section of a pipeline file (the runner is :mod:`governance.backfill`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BackfillSpec"]


class BackfillSpec(BaseModel):
    """How ``lakegate pipeline backfill`` recomputes a date range of a pipeline with a table source.

    Attributes:
        range_field: a column of the main source's rows (a date, a ``yyyy-MM-dd`` string or a timestamp): a backfill
            ``--from A --to B`` reads the source rows whose value, as a date, lies in ``[A, B]``.
        operation: ``upsert`` (the ordering field decides between the backfill's rows and newer ones) or
            ``insert_overwrite`` (the target partitions the output touches are replaced).
        days_per_batch: days of the range per batch (each batch its own commit: the unit of resuming).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    range_field: str
    operation: Literal["upsert", "insert_overwrite"] = "upsert"
    days_per_batch: int = Field(default=1, ge=1)
