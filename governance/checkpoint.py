"""Source checkpoints carried in commit metadata: the data and the position it came from commit together.

A pipeline's commit stores ``extraMetadata["lakegate.checkpoint"]`` = ``{"pipeline": name, "position": ...}``. On
start, the pipeline walks the target table's completed commits newest first and resumes after the first position of
its own. A crash anywhere before publish leaves the previous checkpoint in place, so the batch is read again; a
crash after publish finds the new one: exactly once. (Hudi's DeltaStreamer keeps its checkpoint the same way.)
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from governance.errors import CheckpointError
from tablecore import Table

logger = logging.getLogger(__name__)

CHECKPOINT_KEY = "lakegate.checkpoint"
"""The ``extraMetadata`` key of a pipeline's source checkpoint (compact JSON)."""


def checkpoint_metadata(pipeline: str, position: Any) -> dict[str, str]:
    """The ``extraMetadata`` entry that records ``position`` for ``pipeline``."""
    return {CHECKPOINT_KEY: json.dumps({"pipeline": pipeline, "position": position}, sort_keys=True,
                                       separators=(",", ":"))}


def position_id(position: Any) -> str:
    """A short stable id of a source position: its compact JSON, or a digest of it when longer than 64
    characters (quarantine keys and changelog batch ids use it)."""
    text = json.dumps(position, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= 64 else hashlib.sha256(text.encode()).hexdigest()[:32]


def read_checkpoint(extra_metadata: Mapping[str, str], where: str) -> tuple[str, Any] | None:
    """The (pipeline, position) recorded in a commit's ``extraMetadata``, or None if it carries no checkpoint.

    Raises:
        CheckpointError: the entry is unreadable (``where`` names the commit in the message).
    """
    text = extra_metadata.get(CHECKPOINT_KEY)
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise CheckpointError(f"{where} has an unreadable checkpoint: {e}") from None
    if not isinstance(data, dict) or "position" not in data:
        raise CheckpointError(f"{where} has a checkpoint without a position: {text}")
    return str(data.get("pipeline")), data["position"]


def last_checkpoint(table: Table, pipeline: str) -> tuple[str, Any] | None:
    """The newest (instant, position) that ``pipeline`` committed to ``table``, or None if it never did.

    Raises:
        CheckpointError: a commit carries an unreadable checkpoint.
    """
    for instant, metadata in table.commit_history():
        found = read_checkpoint(metadata.extra_metadata, f"commit {instant} of {table.name}")
        if found is not None and found[0] == pipeline:
            return instant, found[1]
    return None
