"""lakegate's archived timeline: instant files moved out of ``.hoodie/`` into ``.hoodie/archived/``.

**Not Java-compatible.** Hudi archives instants into an Avro *log* (``.hoodie/archived/.commits_.archive.N_<token>``
holding ``HoodieArchivedMetaEntry`` records). lakegate writes its own, simpler format instead, and gives it a name
Java's archived-timeline loader does not match (it globs ``.commits_.archive*``), so Java and hudi-rs ignore it. The
cost: Java's ``show archived commits`` cannot see instants lakegate archived. Readers never need the archive: data
of archived instants stays visible because base files and log blocks older than the first active instant count as
committed (format reference §2, "assumed archived").

One archive run writes one file ``lakegate-archive.<first>_<last>.jsonl`` (``first``/``last``: the oldest and newest
instant time it holds) of JSON lines, one per archived timeline file, oldest instant first and, per instant, in
lifecycle order (requested, inflight, completed)::

    {"format": "lakegate-archive/1", "time": "20250101000000000", "action": "commit", "state": "completed",
     "file": "20250101000000000.commit", "encoding": "utf-8", "content": "{\\n  \\"partitionToWriteStats\\" ..."}

``encoding`` is ``utf-8`` (``content`` is the file's text: commit metadata JSON, empty requested/inflight files) or
``base64`` (Avro instant files of cleans, rollbacks, compaction plans...).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from tablecore.format.instant import Action, Instant, State

ARCHIVED_DIR = ".hoodie/archived"
FORMAT = "lakegate-archive/1"
_NAME_RE = re.compile(r"^lakegate-archive\.(\d{14}|\d{17})_(\d{14}|\d{17})\.jsonl$")


@dataclass(frozen=True)
class ArchivedFile:
    """One timeline file kept in the archive."""

    instant: Instant
    content: bytes

    @property
    def file_name(self) -> str:
        """The file's name on the active timeline."""
        return self.instant.file_name


def archive_file_name(first: str, last: str) -> str:
    """The name of an archive file holding instants ``first`` .. ``last``."""
    return f"lakegate-archive.{first}_{last}.jsonl"


def parse_archive_file_name(name: str) -> tuple[str, str] | None:
    """(first, last) instant time of an archive file name; None for other names (Java's archive files too)."""
    m = _NAME_RE.match(name)
    return (m.group(1), m.group(2)) if m else None


def last_archived_instant(names: Iterable[str]) -> str | None:
    """The newest instant time held by the lakegate archive files among ``names`` (a listing of the archive)."""
    lasts = [p[1] for p in (parse_archive_file_name(n) for n in names) if p is not None]
    return max(lasts, default=None)


def encode_archive(files: Iterable[ArchivedFile]) -> bytes:
    """The JSON-lines content of an archive file."""
    lines = []
    for f in files:
        try:
            text, encoding = f.content.decode("utf-8"), "utf-8"
            if "\x00" in text:
                raise UnicodeDecodeError("utf-8", f.content, 0, 1, "binary")
        except UnicodeDecodeError:
            text, encoding = base64.b64encode(f.content).decode("ascii"), "base64"
        lines.append(json.dumps({"format": FORMAT, "time": f.instant.time, "action": f.instant.action.value,
                                 "state": f.instant.state.value, "file": f.file_name, "encoding": encoding,
                                 "content": text}, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode() if lines else b""


def decode_archive(data: bytes) -> list[ArchivedFile]:
    """The timeline files held by an archive file.

    Raises:
        ValueError: not a lakegate archive file.
    """
    out = []
    for line in data.decode("utf-8").splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        if d.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} line: {line[:80]!r}")
        raw = d["content"]
        content = base64.b64decode(raw) if d["encoding"] == "base64" else raw.encode("utf-8")
        out.append(ArchivedFile(Instant(d["time"], Action(d["action"]), State(d["state"])), content))
    return out
