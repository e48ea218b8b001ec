"""Instants of the active timeline.

An instant moves ``REQUESTED -> INFLIGHT -> COMPLETED``; each state is one file::

    T.commit.requested   T.inflight             T.commit          (commit: COW write)
    T.deltacommit.requested  T.deltacommit.inflight  T.deltacommit
    T.replacecommit.requested  T.replacecommit.inflight  T.replacecommit

Timeline layout 1 (table version 6) keeps them flat in ``.hoodie/``. Layout 2 (table versions 8 and 9, Hudi 1.x) keeps
them in ``.hoodie/timeline/`` and names a completed instant by its requested *and* completion time,
``T_C.commit`` (docs/hudi-v8-format.md): ``T`` orders instants and is what data files and ``_hoodie_commit_time``
carry, ``C`` says when the instant became visible.

Instant times are ``yyyyMMddHHmmssSSS``, unique and strictly increasing across all actions.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from dataclasses import dataclass, field

INSTANT_TIME_FORMAT = "%Y%m%d%H%M%S"
_INSTANT_RE = re.compile(r"^(\d{14}|\d{17})(?:_(\d{14}|\d{17}))?\.([a-z]+)(?:\.(requested|inflight))?$")


class Action(enum.StrEnum):
    """Timeline actions."""

    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    REPLACE_COMMIT = "replacecommit"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"
    SCHEMA_COMMIT = "schemacommit"
    CLUSTERING = "clustering"  # layout 2: a pending clustering (it completes as a replacecommit)

    @property
    def is_write(self) -> bool:
        """True for the actions whose completed instants make data visible."""
        return self in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


class State(enum.StrEnum):
    """Instant states, in lifecycle order."""

    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"

    @property
    def rank(self) -> int:
        """Position in the lifecycle (requested 0, inflight 1, completed 2)."""
        return (State.REQUESTED, State.INFLIGHT, State.COMPLETED).index(self)


@dataclass(frozen=True, order=True)
class Instant:
    """One instant of the timeline: a (requested) time, an action and a state; on layout 2, a completed instant also
    carries its completion time (not part of its identity)."""

    time: str
    action: Action
    state: State
    completion: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, file_name: str) -> Instant | None:
        """Parse a timeline file name; None for files that are not instants (``hoodie.properties``, ...)."""
        m = _INSTANT_RE.match(file_name)
        if not m:
            return None
        time, completion, action_s, state_s = m.groups()
        if action_s == "inflight" and state_s is None and completion is None:
            # legacy name of an inflight commit: "T.inflight"
            return cls(time, Action.COMMIT, State.INFLIGHT)
        try:
            action = Action(action_s)
        except ValueError:
            return None
        state = State.COMPLETED if state_s is None else State(state_s)
        if completion is not None and state is not State.COMPLETED:
            return None  # only a completed instant names a completion time
        if action in (Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING) and state is State.COMPLETED:
            return None  # these complete as a commit / replacecommit; a bare "T.compaction" is not an instant file
        return cls(time, action, state, completion)

    @property
    def file_name(self) -> str:
        """The timeline file name of this instant in this state."""
        if self.state is State.COMPLETED:
            if self.completion is not None:
                return f"{self.time}_{self.completion}.{self.action}"
            return f"{self.time}.{self.action}"
        if self.action is Action.COMMIT and self.state is State.INFLIGHT:
            return f"{self.time}.inflight"
        return f"{self.time}.{self.action}.{self.state}"

    def with_state(self, state: State, completion: str | None = None) -> Instant:
        """The same instant in another state (``completion``: the completion time of a completed layout-2 instant)."""
        return Instant(self.time, self.action, state, completion if state is State.COMPLETED else None)

    @property
    def completed_at(self) -> str:
        """The completion time, or (layout 1, where none is recorded) the instant time."""
        return self.completion or self.time

    @property
    def is_completed(self) -> bool:
        """True if the instant is completed."""
        return self.state is State.COMPLETED

    @property
    def datetime(self) -> dt.datetime:
        """The instant time as an aware UTC datetime."""
        return parse_instant_time(self.time)


def format_instant_time(when: dt.datetime) -> str:
    """Format an aware datetime as a 17-digit UTC instant time."""
    when = when.astimezone(dt.UTC)
    return when.strftime(INSTANT_TIME_FORMAT) + f"{when.microsecond // 1000:03d}"


def parse_instant_time(time: str) -> dt.datetime:
    """Parse a 14- or 17-digit instant time (UTC)."""
    if not re.fullmatch(r"\d{14}|\d{17}", time):
        raise ValueError(f"not an instant time: {time!r} (expected yyyyMMddHHmmss[SSS])")
    base = dt.datetime.strptime(time[:14], INSTANT_TIME_FORMAT).replace(tzinfo=dt.UTC)
    millis = int(time[14:] or 0)
    return base + dt.timedelta(milliseconds=millis)


def next_instant_time(after: str | None, now: dt.datetime | None = None) -> str:
    """A new instant time: now (UTC, ms), or one millisecond after ``after`` if that is not earlier."""
    now = now or dt.datetime.now(dt.UTC)
    candidate = format_instant_time(now)
    if after is not None:
        after17 = after if len(after) == 17 else after + "000"
        if candidate <= after17:
            candidate = format_instant_time(parse_instant_time(after17) + dt.timedelta(milliseconds=1))
    return candidate
