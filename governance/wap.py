"""Review of staged commits a gate kept (``on_block: keep``): list them, publish one anyway, or abort it.

A kept instant is invisible to readers until a person decides. Publishing writes an audit record into the commit like
any gated publish (decision ``published``, with the reviewer's note and the original verdicts); aborting deletes its
files. Both decisions are appended to the audit log.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from governance.audit import AUDIT_KEY, AuditLog, AuditRecord, Conservation, Decision
from governance.errors import StagedNotFoundError
from tablecore import StagedCommit, Table

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeptCommit:
    """A staged commit waiting for review, with the audit that kept it (None if the log has no record of it)."""

    staged: StagedCommit
    audit: AuditRecord | None


def kept_commits(table: Table, log: AuditLog) -> list[KeptCommit]:
    """Every staged commit of ``table`` with its audit record, oldest first."""
    audits = {r.instant: r for r in log.records() if r.decision == Decision.KEPT and r.instant}
    return [KeptCommit(s, audits.get(s.instant)) for s in sorted(table.staged(), key=lambda s: s.instant)]


def _find(table: Table, log: AuditLog, instant: str) -> KeptCommit:
    for kept in kept_commits(table, log):
        if kept.staged.instant == instant:
            return kept
    raise StagedNotFoundError(f"table {table.name} has no staged commit {instant!r} (see `lakegate wap list`)")


def _unlogged(table: Table, kept: KeptCommit, conservation: Conservation, now: dt.datetime) -> AuditRecord:
    """A stand-in for the audit of a staged commit the log has no record of."""
    return AuditRecord(run_id=f"review-{kept.staged.instant}", table=table.name, table_path=table.uri,
                       operation=kept.staged.operation.lower(), decision=Decision.KEPT, verdict="block",
                       conservation=conservation, started_at=now)


def publish_kept(table: Table, log: AuditLog, instant: str, *, note: str = "") -> AuditRecord:
    """Publish a kept commit after review; returns the audit record written into it.

    Raises:
        StagedNotFoundError: no such staged commit; CommitConflictError: a later commit touched the same file groups.
    """
    kept = _find(table, log, instant)
    res = kept.staged.result
    published = res.inserted + res.updated + res.deleted
    before = kept.audit
    quarantined = before.conservation.quarantined if before is not None else 0
    rows_in = before.conservation.rows_in if before is not None else res.input_rows
    conservation = Conservation(rows_in=rows_in, published=published, quarantined=quarantined,
                                deduplicated=rows_in - quarantined - published).check()
    now = dt.datetime.now(dt.UTC)
    base = before or _unlogged(table, kept, conservation, now)
    record = base.model_copy(update={
        "run_id": f"{base.run_id}-published", "instant": instant, "decision": Decision.PUBLISHED,
        "conservation": conservation, "started_at": now,
        "review": f"published after review{': ' + note if note else ''}"})
    kept.staged.publish({AUDIT_KEY: record.to_metadata()})
    if kept.staged.published_behind is not None:
        record = record.model_copy(update={"review": (
            f"{record.review}; published behind the completed later instant {kept.staged.published_behind}: "
            "incremental consumers that already read past it miss these rows (table version 6 selects by instant "
            "time; upgrade the table to version 8)")})
        logger.warning("kept commit %s of %s was published behind the completed later instant %s: incremental "
                       "consumers that already read past it will miss its rows", instant, table.name,
                       kept.staged.published_behind)
    log.append(record)
    logger.warning("published kept commit %s of %s after review", instant, table.name)
    return record


def abort_kept(table: Table, log: AuditLog, instant: str, *, note: str = "") -> AuditRecord:
    """Abort a kept commit (its files are deleted); returns the audit record appended to the log.

    Raises:
        StagedNotFoundError: no such staged commit.
    """
    kept = _find(table, log, instant)
    before = kept.audit
    now = dt.datetime.now(dt.UTC)
    rows_in = before.conservation.rows_in if before is not None else kept.staged.result.input_rows
    conservation = before.conservation if before is not None else Conservation(rows_in=rows_in, rejected=rows_in)
    base = before or _unlogged(table, kept, conservation, now)
    kept.staged.abort()
    record = base.model_copy(update={"run_id": f"{base.run_id}-aborted", "decision": Decision.BLOCKED,
                                     "started_at": now,
                                     "review": f"aborted after review{': ' + note if note else ''}"})
    log.append(record)
    logger.warning("aborted kept commit %s of %s after review", instant, table.name)
    return record
