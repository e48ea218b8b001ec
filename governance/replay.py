"""Replay: re-submit quarantined (or parked) rows through the same gate once they, or the rules, are fixed.

``replay(gate, where=..., assignments={"rider_age": "NULL"})``:

1. picks the open records of the gate's table from the quarantine table (status ``quarantined`` or ``blocked``),
   optionally filtered by a SQL condition over the quarantine columns (``check_name = 'registry.semantic'``);
2. rebuilds the original rows with the target's schema and applies the assignments (SQL expressions per column);
3. drops rows whose key the table already holds with an ordering value at least as new (a late replay never
   overwrites newer data; such rows count as deduplicated);
4. writes the rest through the gate (rows failing again are quarantined anew, under the replay's batch id);
5. marks the picked records ``replayed`` with the outcome (``published``, ``quarantined``, ``superseded``).

Running it twice is harmless: marked records are not picked again, and a replay killed between the gate's publish and
the marking finds its rows already in the table (step 3) the next time.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from governance.audit import AuditRecord, Decision
from governance.errors import GovernanceError
from governance.gate import Gate

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplayResult:
    """What a replay did.

    Attributes:
        picked: open quarantine records selected.
        superseded: rows dropped because the table holds a newer version of their key.
        record: the gate's audit record (None when nothing was submitted).
        marked: quarantine records marked ``replayed``.
    """

    picked: int
    superseded: int
    record: AuditRecord | None
    marked: int


def replay(gate: Gate, *, where: str | None = None, assignments: Mapping[str, str] | None = None,
           operation: str = "upsert") -> ReplayResult:
    """Replay open quarantine records of ``gate``'s table (see the module docstring).

    Raises:
        GovernanceError: an assignment names a column the table does not have, or the table has no schema yet.
    """
    table = gate.table
    schema = table.schema()
    if schema is None:
        raise GovernanceError(f"table {table.name} has no schema yet: nothing to replay into")
    picked = gate.quarantine.pick(table.name, where)
    try:
        n = picked.count()
        if n == 0:
            return ReplayResult(0, 0, None, 0)
        rows = picked.select("qkey", F.from_json("row_json", schema).alias("_lg_row")).select("qkey", "_lg_row.*")
        for column, expression in (assignments or {}).items():
            if column not in schema.fieldNames():
                raise GovernanceError(f"cannot set {column!r}: table {table.name} has no such column "
                                      f"({', '.join(schema.fieldNames())})")
            rows = rows.withColumn(column, F.expr(expression).cast(schema[column].dataType))
        # flag stale rows once, against the table as it is now (persisted: after the publish below, the replayed rows
        # are in the table and would all look stale)
        rows = _flag_superseded(gate, rows).persist()
        try:
            stale = F.col(_STALE)
            superseded = rows.where(stale).count()
            run = f"replay-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
            record = None
            if superseded < n:
                record = gate.write(rows.where(~stale).drop("qkey", _STALE), operation=operation, batch_id=run,
                                    dropped=superseded)
                if record.decision not in (Decision.PUBLISHED, Decision.QUARANTINED):
                    logger.warning("replay %s was %s; quarantine records left open", run, record.decision.value)
                    return ReplayResult(n, superseded, record, 0)
            outcome = record.decision.value if record is not None else "superseded"
            flagged = picked.join(rows.select("qkey", _STALE), "qkey", "left")
            marked = gate.quarantine.mark(flagged, replay_run=run,
                                          outcome=F.when(stale, F.lit("superseded")).otherwise(F.lit(outcome)))
            logger.info("replay %s: %d picked, %d superseded, %s", run, n, superseded,
                        record.summary() if record is not None else "nothing submitted")
            return ReplayResult(n, superseded, record, marked)
        finally:
            rows.unpersist()
    finally:
        picked.unpersist()


_STALE = "_lg_stale"


def _flag_superseded(gate: Gate, rows: DataFrame) -> DataFrame:
    """``rows`` with a boolean column ``_lg_stale``: the table holds the row's key with an ordering value >= its."""
    cfg = gate.table.config
    if not cfg.ordering_field or gate.table.latest_instant() is None:
        return rows.withColumn(_STALE, F.lit(False))
    keys = list(cfg.record_key)
    stored = gate.table.read().select(*[F.col(k).alias(f"_lg_s_{k}") for k in keys],
                                      F.col(cfg.ordering_field).alias("_lg_s_ord"))
    cond = [rows[k] == stored[f"_lg_s_{k}"] for k in keys]
    joined = rows.join(stored, on=cond, how="left")
    newer = F.col("_lg_s_ord").isNotNull() & (F.col("_lg_s_ord") >= F.col(cfg.ordering_field))
    return joined.select(*rows.columns, newer.alias(_STALE))
