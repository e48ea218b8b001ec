"""A seeded generator of trip landing files: new trips, late trips, late tips and cancellations, batch by batch.

Batch ``b`` is what arrives at the end of day ``start + b``:

- **new trips** of that day (``dt`` = the day, ``ts`` = when the trip ended, that day between 06:00 and 22:00 UTC),
  from a pool of regular drivers, some already with a tip;
- **late trips**: a few trips of the previous day that only arrive now;
- **late tips**: tips added to completed trips of older days (1 to 3 days back; at least one on the day two batches
  old from batch 2 on) — the whole trip row again, with the tip and a later ``ts``;
- **cancellations**: completed trips of older days whose ``status`` becomes ``cancelled`` (an *update*, not a hard
  delete: incremental pulls do not carry hard deletes, so a derived table would never hear of one);
- one trip by an occasional **guest driver** (``guest-<b>``, their only trip of that day); the guest trip of every
  even batch is cancelled in the next batch, so that driver's day ends with no completed trip.

Every row is a full trip (``uuid, driver, dt, ts, fare, tip, status``); money has two decimals. A trip appears at
most once per batch, and every update carries a ``ts`` later than the trip's previous one (the trips table orders by
``ts``).

Run ``python -m examples.driver_earnings.generate --out DIR`` to write ``DIR/batch-000.json`` ... (JSON lines).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
COMPLETED = "completed"
CANCELLED = "cancelled"


@dataclass(frozen=True)
class Trip:
    """One trip as it lands (a row of the trips table)."""

    uuid: str
    driver: str
    dt: str
    ts: int
    fare: float
    tip: float
    status: str

    def row(self) -> dict[str, Any]:
        """The JSON row."""
        return asdict(self)


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate.

    Attributes:
        batches: landing batches (one per day).
        trips_per_batch: new trips of the batch's day.
        drivers: regular drivers (``driver-01`` ...).
        late_trips_per_batch: trips of the previous day arriving a day late.
        late_tips_per_batch: tips added to completed trips of older days.
        cancellations_per_batch: completed trips of older days cancelled.
        tip_probability: chance that a new trip already carries a tip.
        start: the day of batch 0.
        seed: the random seed (same config, same files).
    """

    batches: int = 6
    trips_per_batch: int = 50
    drivers: int = 8
    late_trips_per_batch: int = 2
    late_tips_per_batch: int = 6
    cancellations_per_batch: int = 3
    tip_probability: float = 0.3
    start: dt.date = dt.date(2026, 11, 16)
    seed: int = 7


def day(config: GeneratorConfig, batch: int) -> str:
    """The ``dt`` of batch ``batch``'s new trips."""
    return (config.start + dt.timedelta(days=batch)).isoformat()


def _midnight_ms(d: dt.date) -> int:
    return int(dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC).timestamp() * 1000)


def _money(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 2)


class _Generator:
    """The state of one generation: every trip's latest version and the batch (day) it belongs to."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.trips: dict[str, Trip] = {}
        self.batch_of: dict[str, int] = {}
        self.regulars = [f"driver-{i:02d}" for i in range(1, config.drivers + 1)]
        self.serial = 0
        # the batch being generated
        self.b = 0
        self.rows: list[Trip] = []
        self.taken: set[str] = set()
        self.clock = 0

    def new_trip(self, b: int, driver: str) -> Trip:
        """A completed trip of batch ``b``'s day."""
        self.serial += 1
        midnight = _midnight_ms(self.config.start + dt.timedelta(days=b))
        tip = _money(self.rng, 0.5, 8.0) if self.rng.random() < self.config.tip_probability else 0.0
        t = Trip(uuid=f"trip-{self.serial:06d}", driver=driver, dt=day(self.config, b),
                 ts=midnight + 6 * HOUR_MS + self.rng.randrange(16 * HOUR_MS), fare=_money(self.rng, 4.0, 60.0),
                 tip=tip, status=COMPLETED)
        self.trips[t.uuid] = t
        self.batch_of[t.uuid] = b
        self.rows.append(t)
        return t

    def update(self, old: Trip, **changes: Any) -> None:
        """The whole trip again with ``changes`` and a ``ts`` later than every earlier version."""
        self.clock += self.rng.randrange(1_000, 60_000)
        new = replace(old, ts=max(self.clock, old.ts + 1), **changes)
        self.trips[new.uuid] = new
        self.rows.append(new)
        self.taken.add(new.uuid)

    def candidates(self, days_back: range, *, need_no_tip: bool = False) -> list[Trip]:
        """Completed trips of regular drivers ``days_back`` batches old, not yet in this batch."""
        return sorted((t for u, t in self.trips.items()
                       if u not in self.taken and t.status == COMPLETED and not t.driver.startswith("guest-")
                       and self.b - self.batch_of[u] in days_back and (not need_no_tip or t.tip == 0.0)),
                      key=lambda t: t.uuid)

    def late_tip(self, days_back: range) -> None:
        """A tip for a trip without one, ``days_back`` batches old (nothing if there is none)."""
        pool = self.candidates(days_back, need_no_tip=True)
        if pool:
            self.update(self.rng.choice(pool), tip=_money(self.rng, 0.5, 12.0))

    def batch(self, b: int) -> list[dict[str, Any]]:
        """Batch ``b`` (see the module docstring)."""
        cfg, rng = self.config, self.rng
        self.b, self.rows, self.taken = b, [], set()
        # updates are stamped after the day's last trip (22:00), and after the trip's own ts
        self.clock = _midnight_ms(cfg.start + dt.timedelta(days=b)) + 22 * HOUR_MS
        # the guest trip of the previous (even) batch is cancelled: the guest's only trip of that day
        if b >= 1 and (b - 1) % 2 == 0:
            guest = next(t for t in self.trips.values() if t.driver == f"guest-{b - 1:02d}")
            self.update(guest, status=CANCELLED)
        # late tips: at least one on the day two batches old, the rest 1-3 days back
        if b >= 2:
            self.late_tip(range(2, 3))
        for _ in range(cfg.late_tips_per_batch - (1 if b >= 2 else 0)):
            self.late_tip(range(1, 4))
        for _ in range(cfg.cancellations_per_batch):
            pool = self.candidates(range(1, 4))
            if pool:
                self.update(rng.choice(pool), status=CANCELLED)
        # new trips of the day, late trips of yesterday, the guest's trip
        for _ in range(cfg.trips_per_batch):
            self.new_trip(b, rng.choice(self.regulars))
        if b >= 1:
            for _ in range(cfg.late_trips_per_batch):
                self.new_trip(b - 1, rng.choice(self.regulars))
        self.new_trip(b, f"guest-{b:02d}")
        rng.shuffle(self.rows)
        logger.debug("batch %d: %d rows", b, len(self.rows))
        return [t.row() for t in self.rows]


def generate(config: GeneratorConfig | None = None) -> list[list[dict[str, Any]]]:
    """The landing batches: a list (one per batch) of JSON rows (default: :class:`GeneratorConfig` ())."""
    gen = _Generator(config or GeneratorConfig())
    return [gen.batch(b) for b in range(gen.config.batches)]


def write_landing(folder: Path, batches: list[list[dict[str, Any]]]) -> list[Path]:
    """Write the batches as JSON-lines files ``batch-000.json`` ... into ``folder`` (created); returns the paths.

    Each file is written under a hidden name and renamed, so a pipeline never reads half a file.
    """
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, rows in enumerate(batches):
        path = folder / f"batch-{n:03d}.json"
        tmp = folder / f".{path.name}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        tmp.replace(path)
        paths.append(path)
    logger.info("wrote %d landing files (%d rows) to %s", len(paths), sum(len(b) for b in batches), folder)
    return paths


def main(argv: list[str] | None = None) -> int:
    """Command line: write the landing files."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--out", type=Path, required=True, help="the landing folder")
    p.add_argument("--batches", type=int, default=GeneratorConfig.batches)
    p.add_argument("--trips-per-batch", type=int, default=GeneratorConfig.trips_per_batch)
    p.add_argument("--seed", type=int, default=GeneratorConfig.seed)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    config = GeneratorConfig(batches=args.batches, trips_per_batch=args.trips_per_batch, seed=args.seed)
    for path in write_landing(args.out, generate(config)):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
