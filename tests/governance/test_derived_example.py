"""The driver-earnings example (``examples/driver_earnings``): a derived table maintained from incremental pulls.

The trips pipeline lands generated JSON batches; the earnings pipeline pulls the trips table's new commits and
upserts the recomputed (driver, dt) groups. After *every* earnings batch the derived table — read by our reader and
by hudi-rs — must equal a full recomputation from scratch, done here in plain Python with decimals over the hudi-rs
rows of the trips table as of the batch's last commit.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from examples.driver_earnings.generate import CANCELLED, GeneratorConfig, day, generate
from examples.driver_earnings.run import COLUMNS, differences, prepare
from governance.audit import AuditRecord, Decision
from governance.pipeline import PipelineRunner, load_pipeline
from governance.sources import Batch
from tablecore import Table
from tests.tablecore.oracle import hudi_snapshot

pytestmark = pytest.mark.spark

logger = logging.getLogger(__name__)

CONFIG = GeneratorConfig(batches=6, trips_per_batch=40, drivers=6, late_tips_per_batch=5,
                         cancellations_per_batch=3, seed=11)
SCHEDULE = (1, 1, 3, 1)
"""Trips batches landed before each earnings run: the third run finds 3 new commits (max_commits_per_batch 2)."""

CENT = Decimal("0.01")
Group = tuple[str, str]
Row = tuple[int, int, Decimal, Decimal, Decimal, int]
"""(trips, cancelled, fares, tips, earnings, ts) of a (driver, dt) group."""


def _money(v: Any) -> Decimal:
    """A money value (Decimal, or the decimal string hudi-rs rows are normalized to) at cent scale."""
    return Decimal(str(v)).quantize(CENT)


def recompute(trips: list[dict[str, Any]]) -> dict[Group, Row]:
    """The derived table from scratch, in plain Python: one row per (driver, dt) with any trip."""
    acc: dict[Group, list[Any]] = {}
    for t in trips:
        a = acc.setdefault((t["driver"], t["dt"]), [0, 0, Decimal(0), Decimal(0), Decimal(0), t["ts"]])
        if t["status"] == "completed":
            fare, tip = _money(t["fare"]), _money(t["tip"])
            a[0] += 1
            a[2] += fare
            a[3] += tip
            a[4] += fare + tip
        else:
            a[1] += 1
        a[5] = max(a[5], t["ts"])
    return {g: (a[0], a[1], _money(a[2]), _money(a[3]), _money(a[4]), a[5]) for g, a in acc.items()}


def _derived(rows: list[dict[str, Any]]) -> dict[Group, Row]:
    out: dict[Group, Row] = {}
    for r in rows:
        g = (r["driver"], r["dt"])
        assert g not in out, f"two rows for {g}"
        out[g] = (r["trips"], r["cancelled"], _money(r["fares"]), _money(r["tips"]), _money(r["earnings"]), r["ts"])
    return out


def _model(batches: list[list[dict[str, Any]]], upto: int) -> dict[str, dict[str, Any]]:
    """The trips after landing batches [0, upto): the latest version (highest ts) of every trip."""
    state: dict[str, dict[str, Any]] = {}
    for rows in batches[:upto]:
        for r in rows:
            if r["uuid"] not in state or r["ts"] >= state[r["uuid"]]["ts"]:
                state[r["uuid"]] = r
    return state


def _coverage(batches: list[list[dict[str, Any]]]) -> dict[str, list[Any]]:
    """The events the generated data holds: new trips, late tips ``(batch, age in days, driver, dt)``,
    cancellations ``(batch, driver, dt)``."""
    state: dict[str, dict[str, Any]] = {}
    days = [day(CONFIG, n) for n in range(len(batches))]
    events: dict[str, list[Any]] = {"new": [], "late_tips": [], "cancelled": []}
    for b, rows in enumerate(batches):
        for r in rows:
            old = state.get(r["uuid"])
            if old is None:
                events["new"].append(r["uuid"])
            elif r["tip"] != old["tip"]:
                events["late_tips"].append((b, b - days.index(r["dt"]), r["driver"], r["dt"]))
            elif r["status"] == CANCELLED != old["status"]:
                events["cancelled"].append((b, r["driver"], r["dt"]))
            state[r["uuid"]] = r
    return events


def test_derived_table_equals_full_recomputation_after_every_batch(spark: SparkSession, tmp_path: Path) -> None:
    batches = generate(CONFIG)
    events = _coverage(batches)
    assert 200 <= len(events["new"]) <= 400
    two_old = [(b, g) for b, age, *g in events["late_tips"] if age == 2]
    assert two_old, "a late tip on a day two batches old"
    assert events["cancelled"], "cancellations"
    guest = ("guest-00", day(CONFIG, 0))  # the guest's only trip of day 0, cancelled in batch 1
    assert (1, *guest) in events["cancelled"]

    prepare(tmp_path, CONFIG)
    trips = PipelineRunner(load_pipeline(tmp_path / "trips.yaml"), spark)
    earnings = PipelineRunner(load_pipeline(tmp_path / "earnings.yaml"), spark)
    landed = 0
    commits: list[str] = []  # trips commits, oldest first
    seen: list[tuple[Batch, dict[Group, Row]]] = []

    def check(batch: Batch, record: AuditRecord) -> None:
        assert record.decision == Decision.PUBLISHED, record.summary()
        assert batch.end_instant is not None
        # the full recomputation over the trips table as of the batch's last commit, read by hudi-rs
        expected = recompute(hudi_snapshot(trips.table.uri, as_of=batch.end_instant))
        theirs = _derived(hudi_snapshot(earnings.table.uri))
        ours = _derived([r.asDict() for r in earnings.table.read().select(*COLUMNS).collect()])
        assert ours == expected, f"our reader after {batch.description}"
        assert theirs == expected, f"hudi-rs after {batch.description}"
        # only the groups of the trips that changed in the batch's commits were recomputed and written
        first = commits.index(seen[-1][0].end_instant or "") + 1 if seen else 0
        last = commits.index(batch.end_instant)
        touched = {(r["driver"], r["dt"]) for rows in batches[first:last + 1] for r in rows}
        assert record.conservation.published == len(touched)
        seen.append((batch, ours))
        logger.info("%s: %d groups written, %d in the derived table", batch.description, len(touched), len(ours))

    for n in SCHEDULE:
        records = trips.run_once(max_batches=n)
        assert [r.decision for r in records] == [Decision.PUBLISHED] * n
        commits.extend(r.instant or "" for r in records)
        landed += n
        earnings.run_once(on_batch=check)
        assert seen[-1][0].end_instant == commits[-1]

    # every earnings batch was checked: one per trips commit, except the 3-commit gap read as 2 + 1 commits
    assert landed == CONFIG.batches
    assert [b.end_instant for b, _ in seen] == [commits[0], commits[1], commits[3], commits[4], commits[5]]
    assert "2 commits of 3 new" in seen[2][0].description
    assert earnings.run_once() == []
    # the guest's day: one completed trip, then only a cancelled one -> a row of zeros, not a stale row
    before, after = seen[0][1][guest], seen[1][1][guest]
    assert (before[0], before[1]) == (1, 0) and before[4] > 0
    assert after[:5] == (0, 1, Decimal("0.00"), Decimal("0.00"), Decimal("0.00"))
    assert any(v[0] == 0 and v[1] > 0 for v in seen[-1][1].values())
    # a late tip on a day two batches old rewrote that old day's row in the earnings batch that read it
    for b, (driver, dt) in two_old:
        k = next(k for k, (batch, _) in enumerate(seen) if (batch.end_instant or "") >= commits[b])
        assert seen[k][1][(driver, dt)] != seen[k - 1][1].get((driver, dt)), (b, driver, dt)
    # the trips table holds the latest version of every generated trip (money exact after the JSON -> decimal cast)
    model = _model(batches, CONFIG.batches)
    stored = {r["uuid"]: r for r in hudi_snapshot(trips.table.uri)}
    assert set(stored) == set(model)
    assert all((_money(stored[u]["fare"]), _money(stored[u]["tip"]), stored[u]["status"], stored[u]["ts"])
               == (_money(m["fare"]), _money(m["tip"]), m["status"], m["ts"]) for u, m in model.items())
    # the example's Spark SQL recomputation agrees too
    assert differences(spark, earnings.table.uri, trips.table.uri) == 0
    assert Table.open(earnings.table.uri, spark=spark).config.record_key == ("driver", "dt")
