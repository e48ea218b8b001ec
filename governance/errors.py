"""The exception tree of governance: every error it raises is a :class:`GovernanceError`."""

from __future__ import annotations


class GovernanceError(Exception):
    """Base of every governance error."""


class PipelineConfigError(GovernanceError):
    """A pipeline file is invalid (the message names the file, line and entry)."""


class SchemaRefusedError(GovernanceError):
    """A batch's schema does not conform to the registered subject and may not be registered (nothing written)."""


class ConservationError(GovernanceError):
    """The rows of a run do not add up (rows_in != published + quarantined + deduplicated + rejected)."""


class CheckpointError(GovernanceError):
    """A source checkpoint is missing, unreadable or inconsistent with the source."""


class SourceError(GovernanceError):
    """A pipeline source cannot be read (missing folder, undecodable file, unknown schema id...)."""


class BatchBlockedError(GovernanceError):
    """A pipeline stopped because the audit blocked a batch (``on_block: stop`` or ``keep``)."""

    def __init__(self, message: str, *, instant: str | None = None, report: str | None = None) -> None:
        super().__init__(message)
        self.instant = instant
        self.report = report


class StagedNotFoundError(GovernanceError):
    """No staged (kept-for-review) commit with that instant."""


class TransformError(GovernanceError):
    """A pipeline's transform step failed (the message names the step: ``transform step 2 'enrich' (python
    mod:fn): ...``)."""
