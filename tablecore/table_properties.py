"""Reading and rewriting ``.hoodie/hoodie.properties`` the way Hudi does, with ``hoodie.properties.backup``.

A rewrite (the first write records the table schema there) keeps the last good file as a backup while the main file
is replaced::

    1. hoodie.properties.backup  <- the current hoodie.properties
    2. hoodie.properties         <- the new text (one put on an object store)
    3. hoodie.properties.backup  deleted

A process killed between 1 and 3 leaves a backup beside a main file that is either the old or the new text. A main
file that is damaged (not UTF-8, does not parse, its ``hoodie.table.checksum`` missing or wrong: the checksum is the
last line, so a cut-off file loses it) is read from the backup instead, with a warning, as Hudi's
``HoodieTableConfig`` does; :func:`recover_properties` (``lakegate table repair --properties-from-backup``) writes the
backup back over it. Damaged with no valid backup is a :class:`~tablecore.exceptions.TableCorruptError`.
"""

from __future__ import annotations

import logging

from tablecore.config import TableConfig
from tablecore.exceptions import ConfigError, TableCorruptError, TableNotFoundError
from tablecore.format.properties import format_properties, parse_properties, table_checksum
from tablecore.format.timeline import HOODIE_DIR
from tablecore.io import FileIO

__all__ = ["PROPERTIES", "PROPERTIES_BACKUP", "read_config", "recover_properties", "write_config"]

logger = logging.getLogger(__name__)

PROPERTIES = f"{HOODIE_DIR}/hoodie.properties"
PROPERTIES_BACKUP = f"{HOODIE_DIR}/hoodie.properties.backup"


def damage_of(data: bytes) -> str | None:
    """Why ``data`` is not an intact ``hoodie.properties`` (None: intact; its values may still be unsupported)."""
    if not data.strip():
        return "the file is empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start})"
    try:
        props = parse_properties(text)
    except ValueError as exc:
        return f"does not parse ({exc})"
    checksum = props.get("hoodie.table.checksum")
    name = props.get("hoodie.table.name")
    if checksum is None:  # written last (by Hudi 0.10+ and lakegate): a file without it was cut short
        return "it has no hoodie.table.checksum (the file was cut short)"
    if not checksum.isdigit() or int(checksum) != table_checksum(props.get("hoodie.database.name", ""), name or ""):
        return f"hoodie.table.checksum {checksum!r} does not match the table name {name!r}"
    return None


def _read(io: FileIO, rel: str) -> bytes | None:
    try:
        return io.read_bytes(io.join(rel))
    except FileNotFoundError:
        return None


def read_config(io: FileIO, where: str) -> TableConfig:
    """The table's config from ``hoodie.properties``, or from its backup when the main file is damaged or missing.

    Raises:
        TableNotFoundError: neither file exists (``where`` names the table in the message).
        TableCorruptError: the main file is damaged and there is no intact backup.
        ConfigError: the file is intact but describes a table lakegate does not support.
    """
    main = _read(io, PROPERTIES)
    problem = "it is missing" if main is None else damage_of(main)
    if problem is None:
        assert main is not None
        return TableConfig.from_properties_text(main.decode("utf-8"))
    backup = _read(io, PROPERTIES_BACKUP)
    if backup is not None and damage_of(backup) is None:
        logger.warning("%s is damaged (%s): reading %s instead; run `lakegate table repair %s "
                       "--properties-from-backup` to restore it", PROPERTIES, problem, PROPERTIES_BACKUP, where)
        return TableConfig.from_properties_text(backup.decode("utf-8"))
    if main is None:
        raise TableNotFoundError(f"no table at {where}: {PROPERTIES} not found")
    raise TableCorruptError(f"hoodie.properties is damaged: {problem}, and there is no intact backup",
                            path=io.join(PROPERTIES))


def write_config(io: FileIO, config: TableConfig) -> None:
    """Replace ``hoodie.properties`` with ``config``, the old file kept as the backup until the new one is in place."""
    current = _read(io, PROPERTIES)
    if current is not None and damage_of(current) is None:
        io.write_bytes(io.join(PROPERTIES_BACKUP), current)
    io.write_bytes(io.join(PROPERTIES), config.to_properties_text().encode())
    io.delete(io.join(PROPERTIES_BACKUP))


def update_properties(io: FileIO, changes: dict[str, str | None]) -> dict[str, str]:
    """Change some keys of ``hoodie.properties`` (None: remove the key), keeping every other key as it is (a table
    Hudi wrote has keys lakegate does not model), with the same backup protocol as :func:`write_config`. Returns the
    new properties.

    Raises:
        TableCorruptError: ``hoodie.properties`` is damaged (recover it first).
    """
    current = _read(io, PROPERTIES)
    if current is None or damage_of(current) is not None:
        raise TableCorruptError("hoodie.properties is missing or damaged: recover it before changing it",
                                path=io.join(PROPERTIES))
    props = parse_properties(current.decode("utf-8"))
    for key, value in changes.items():
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    TableConfig.from_properties(props)  # refuse to write what could not be read back
    io.write_bytes(io.join(PROPERTIES_BACKUP), current)
    io.write_bytes(io.join(PROPERTIES), format_properties(props).encode())
    io.delete(io.join(PROPERTIES_BACKUP))
    return props


def recover_properties(io: FileIO) -> bool:
    """Write the intact backup over a damaged or missing ``hoodie.properties``, then drop the backup.

    Returns:
        True if the main file was restored; False if it was intact (a leftover backup is removed then).

    Raises:
        TableCorruptError: the main file is damaged and there is no intact backup to restore it from.
    """
    main = _read(io, PROPERTIES)
    if main is not None and damage_of(main) is None:
        io.delete(io.join(PROPERTIES_BACKUP))
        return False
    backup = _read(io, PROPERTIES_BACKUP)
    if backup is None or damage_of(backup) is not None:
        raise TableCorruptError("hoodie.properties is damaged and there is no intact hoodie.properties.backup to "
                                "restore it from", path=io.join(PROPERTIES))
    try:
        TableConfig.from_properties_text(backup.decode("utf-8"))
    except ConfigError as exc:
        raise TableCorruptError(f"hoodie.properties.backup does not describe a usable table: {exc}",
                                path=io.join(PROPERTIES_BACKUP)) from None
    io.write_bytes(io.join(PROPERTIES), backup)
    io.delete(io.join(PROPERTIES_BACKUP))
    logger.info("restored %s from its backup", io.join(PROPERTIES))
    return True
