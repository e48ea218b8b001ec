"""Upgrade a table of version 6 to version 8 in place (``lakegate table upgrade PATH --to 8``), as Hudi's own
6 -> 8 upgrade does (docs/hudi-v8-format.md, "Upgrade"): the timeline moves to ``.hoodie/timeline/``, every completed
instant gets a completion time (its file's modification time, else its instant time), commit metadata is rewritten
from JSON to Avro, the metadata table (which lakegate does not maintain) is disabled, and ``hoodie.properties`` says
version 8 last.

Crash safety: until the properties switch, readers of every kind read the version-6 timeline in ``.hoodie/`` and
ignore the folder being filled; the switch is one rewrite with the properties' backup protocol; after it, readers
read ``.hoodie/timeline/`` and ignore the old files, which are deleted last. A rerun after a crash at any step
writes the new timeline again, or (after the switch) finishes the deletions.

The caller brings the table to rest first: no pending instant (failed writers rolled back, staged commits published
or aborted) and, for merge-on-read, no log files (a compaction of every slice): from version 8 a log file is named by
the delta commit that wrote it, which version-6 log files are not. Archived instants stay in ``.hoodie/archived``
(not moved into the LSM history): incremental reads that reach into them raise ``CleanedRangeError`` as before.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tablecore.config import MERGE_STRATEGY_BY_MODE, TYPE_BY_KEYGEN
from tablecore.exceptions import ConfigError
from tablecore.format.commit_avro import commit_metadata_to_avro
from tablecore.format.commit_metadata import CommitMetadata
from tablecore.format.file_view import latest_file_slices, list_table_files
from tablecore.format.instant import Action, Instant, State, format_instant_time
from tablecore.format.timeline import HOODIE_DIR, TIMELINE_DIR_V2, Timeline
from tablecore.table_properties import update_properties

if TYPE_CHECKING:
    from tablecore.context import TableContext
    from tablecore.io import FileInfo

logger = logging.getLogger(__name__)

TARGET_VERSIONS = (8,)
_COMMIT_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


@dataclass
class UpgradePlan:
    """What an upgrade changes (the dry run prints it)."""

    from_version: int
    to_version: int
    instant_files: list[tuple[str, str, str]] = field(default_factory=list)  # (old name, new name, conversion)
    properties: dict[str, str | None] = field(default_factory=dict)
    metadata_table: bool = False
    leftovers: list[str] = field(default_factory=list)  # old timeline files an interrupted upgrade left
    slices_to_compact: int = 0  # merge-on-read slices with log files, compacted first

    @property
    def done(self) -> bool:
        """True if the table already has the target version (a rerun only deletes leftovers)."""
        return self.from_version == self.to_version

    def describe(self) -> list[str]:
        """The plan as lines of text."""
        if self.done:
            return [f"the table is version {self.to_version} already"
                    + (f"; {len(self.leftovers)} files of the old timeline are deleted" if self.leftovers else "")]
        converted = sum(1 for *_, how in self.instant_files if how == "json->avro")
        lines = [f"version {self.from_version} -> {self.to_version}",
                 f"{len(self.instant_files)} instant files move from .hoodie/ to .hoodie/timeline/ "
                 f"({converted} commit metadata files rewritten from JSON to Avro; completed instants get a "
                 "completion time)"]
        lines += [f"  {old} -> {new} ({how})" for old, new, how in self.instant_files]
        if self.slices_to_compact:
            lines.insert(1, f"first, {self.slices_to_compact} file slices with log files are compacted (a commit "
                            "that the list below does not show yet)")
        if self.metadata_table:
            lines.append("the metadata table (.hoodie/metadata) is disabled: lakegate does not maintain it")
        lines.append("hoodie.properties: " + ", ".join(f"{k}={'(removed)' if v is None else v}"
                                                     for k, v in self.properties.items()))
        return lines


def _check_target(version: int, to_version: int) -> None:
    if to_version not in TARGET_VERSIONS:
        raise ConfigError(f"lakegate upgrades tables to version {' or '.join(map(str, TARGET_VERSIONS))}, not "
                          f"{to_version}")
    if version > to_version:
        raise ConfigError(f"the table is version {version}; downgrades are not supported")


def _completion(info: FileInfo | None, instant: str) -> str:
    """The completion time Hudi's upgrade gives a version-6 completed instant: its file's modification time (never
    before the instant itself); the instant time where the storage reports none."""
    if info is None or not info.mtime_ns:
        return instant
    when = dt.datetime.fromtimestamp(info.mtime_ns / 1e9, tz=dt.UTC)
    return max(format_instant_time(when), instant if len(instant) == 17 else instant + "000")


def plan_upgrade(ctx: TableContext, to_version: int = 8, *, compact_first: bool = False) -> UpgradePlan:
    """What upgrading the table to ``to_version`` changes; raises :class:`ConfigError` if it cannot be done now
    (with ``compact_first``, log files are not in the way: the plan counts the slices to compact)."""
    config, io = ctx.config, ctx.io
    _check_target(config.table_version, to_version)
    old_files = [f for f in io.list(io.join(HOODIE_DIR)) if Instant.parse(f.name) is not None]
    if config.table_version == to_version:
        return UpgradePlan(to_version, to_version, leftovers=sorted(f.name for f in old_files))
    timeline = Timeline.from_files([f.name for f in old_files], io.join(HOODIE_DIR), io)
    pending = timeline.pending()
    if pending:
        raise ConfigError("the table has pending instants (" + ", ".join(f"{i.action} {i.time}" for i in pending)
                          + "): stop its writers, roll back failed ones (a write does it) and publish or abort staged "
                          "commits before upgrading")
    # the latest slices' log files (older slices' logs, compacted already, are read by their base's completion)
    logs = [lg for s in latest_file_slices(list_table_files(io), timeline) for lg in s.logs] \
        if config.table_type == "MERGE_ON_READ" else []
    if logs and not compact_first:
        raise ConfigError("the merge-on-read table has log files: compact every slice first (the upgrade command "
                          "does it), since version-8 readers name log files by the delta commit that wrote them")
    by_name = {f.name: f for f in old_files}
    plan = UpgradePlan(config.table_version, to_version,
                       slices_to_compact=len({(lg.partition, lg.file_id) for lg in logs}))
    for inst in timeline.files:
        new = inst
        if inst.is_completed:
            new = inst.with_state(State.COMPLETED, _completion(by_name.get(inst.file_name), inst.time))
        how = "json->avro" if inst.action in _COMMIT_ACTIONS and (by_name[inst.file_name].size or 0) > 0 and \
            inst.state is not State.REQUESTED else "copy"
        plan.instant_files.append((inst.file_name, new.file_name, how))
    plan.metadata_table = bool(config.metadata_partitions) or bool(io.list(io.join(HOODIE_DIR, "metadata")))
    plan.properties = {
        "hoodie.table.version": str(to_version),
        "hoodie.table.initial.version": str(config.initial_version or config.table_version),
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history",
        "hoodie.record.merge.mode": config.merge_mode,
        "hoodie.record.merge.strategy.id": MERGE_STRATEGY_BY_MODE[config.merge_mode],
        "hoodie.compaction.record.merger.strategy": None,
    }
    if config.key_generator in TYPE_BY_KEYGEN:
        plan.properties["hoodie.table.keygenerator.type"] = TYPE_BY_KEYGEN[config.key_generator]
    return plan


def upgrade(ctx: TableContext, to_version: int = 8, *, on_step: Callable[[str], None] | None = None) -> UpgradePlan:
    """Upgrade in place (see the module docstring); ``on_step`` hears each step's name after it is done. Returns the
    plan carried out. Rerunnable after a crash at any step."""
    plan = plan_upgrade(ctx, to_version)
    io = ctx.io
    step = on_step or (lambda _name: None)
    if not plan.done:
        if plan.metadata_table:
            ctx.disable_metadata_table()
            step("metadata-table")
        io.makedirs(io.join(TIMELINE_DIR_V2, "history"))
        for old, new, how in plan.instant_files:
            data = io.read_bytes(io.join(HOODIE_DIR, old))
            if how == "json->avro":
                data = commit_metadata_to_avro(CommitMetadata.from_bytes(data))
            io.write_bytes(io.join(TIMELINE_DIR_V2, new), data)
            step(f"write {new}")
        update_properties(io, plan.properties)  # the switch: readers follow hoodie.properties
        ctx.config = ctx.config.model_copy(update={"table_version": to_version,
                                                   "initial_version": ctx.config.initial_version
                                                   or ctx.config.table_version})
        ctx.meta.table_version = to_version  # its timeline folder follows
        step("properties")
        logger.info("upgraded %s to table version %d", io.uri, to_version)
    for old in [f.name for f in io.list(io.join(HOODIE_DIR)) if Instant.parse(f.name) is not None]:
        io.delete(io.join(HOODIE_DIR, old))
        step(f"delete {old}")
    return plan


def upgrade_table(ctx: TableContext, to_version: int = 8, *, dry_run: bool = False,
                  on_step: Callable[[str], None] | None = None,
                  prepare: Callable[[], object] | None = None) -> UpgradePlan:
    """The whole upgrade of :meth:`tablecore.table.Table.upgrade`: ``prepare`` (rolling back failed writers and
    compacting log files) runs first unless the table is at the target version already; ``dry_run`` only plans."""
    if dry_run:
        return plan_upgrade(ctx, to_version, compact_first=True)
    if ctx.config.table_version != to_version and prepare is not None:
        _check_target(ctx.config.table_version, to_version)
        staged = ctx.meta.staged_instants()
        if staged:
            raise ConfigError(f"the table has staged commits ({', '.join(staged)}): publish or abort them before "
                              "upgrading")
        prepare()
    return upgrade(ctx, to_version, on_step=on_step)
