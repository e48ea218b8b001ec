"""Reading configuration files (pipelines, suites) so that every problem names the file, the line and the entry:
UTF-8 decoding, YAML errors, and the line of a pydantic error location in the YAML document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from governance.errors import PipelineConfigError

__all__ = ["line_of", "read_config_text", "without_tags", "yaml_problem"]


def read_config_text(path: Path, what: str) -> str:
    """The text of a configuration file (a pipeline, a suite), decoded as UTF-8.

    Raises:
        PipelineConfigError: the file is missing, unreadable or a directory (``trips.yaml: cannot read the pipeline:
            Is a directory``), or a byte is not UTF-8 (``trips.yaml:3: the pipeline is not UTF-8 text (byte 0xff at
            offset 41)``).
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise PipelineConfigError(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise PipelineConfigError(f"{path}:{line}: the {what} is not UTF-8 text (byte 0x{data[e.start]:02x} at "
                                  f"offset {e.start})") from None


def yaml_problem(error: yaml.YAMLError, text: str) -> tuple[int | None, str]:
    """The 1-based line and the problem of a YAML error (a reader error, such as a control character, gives a
    character position instead of a mark)."""
    if isinstance(error, yaml.reader.ReaderError):
        line = text.count("\n", 0, error.position) + 1
        if isinstance(error.character, int):
            return line, f"unacceptable character #x{error.character:04x}: {error.reason}"
        return line, str(error.reason)
    mark = getattr(error, "problem_mark", None)
    return (mark.line + 1 if mark is not None else None), str(getattr(error, "problem", None) or error)


def without_tags(data: Any, loc: list[Any]) -> list[Any]:
    """``loc`` without the union and discriminator tags pydantic puts in locations (``source.files.path``,
    ``transform.steps.1.python_step.python``): the parts that are not keys or indexes of the document."""
    out: list[Any] = []
    for n, part in enumerate(loc):
        last = n == len(loc) - 1
        if isinstance(data, list) and not isinstance(part, int):
            continue  # a tag before an index
        if isinstance(data, dict) and part not in data and (not last or part[:1].isupper()):
            continue  # a tag before a field, or a model's name
        data = data[part] if isinstance(data, dict) and part in data else \
            data[part] if isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data) else None
        out.append(part)
    return out


def line_of(node: Any, loc: list[Any]) -> int | None:
    """The 1-based line of the deepest YAML key along ``loc`` that exists (a missing field: its parent's key)."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)),
                         None)
            if found is None:
                return line if line is not None else node.start_mark.line + 1
            line = found[0].start_mark.line + 1
            node = found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
    return line
