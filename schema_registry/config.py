"""Compatibility configs and modes, global and per subject (``ConfigService``), and their JSON documents.

Documents follow Confluent's ``Config`` (GET) and ``ConfigUpdateRequest`` (PUT) shapes. Stored form: the
``Config`` keys (``compatibilityLevel``, ``normalize``, ``compatibilityGroup``, ``defaultMetadata``, ...).
A PUT merges the given keys into the stored document (absent or null keys keep their value) and answers with
the request's own keys, ``compatibility`` upper-cased. What applies to a subject is its own setting, else the
global one, else the server default (level) or READWRITE (mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schema_registry.errors import (
    InvalidCompatibilityLevelError,
    OperationNotPermittedError,
    SubjectConfigNotFoundError,
    SubjectModeNotFoundError,
    SubjectNotFoundError,
)
from schema_registry.identifiers import GLOBAL_SCOPE, validate_subject
from schema_registry.model import CompatibilityLevel, Mode
from schema_registry.rules import validate_rule_set
from schema_registry.settings import Settings
from schema_registry.store import RegistryStore, StoreSession

# keys kept verbatim (besides the level and normalize): Confluent's data-contract and validation knobs
_PASSTHROUGH = ("alias", "compatibilityGroup", "compatibilityPolicy", "defaultMetadata", "overrideMetadata",
                "defaultRuleSet", "overrideRuleSet", "validateFields", "validateRules", "validateNewSchemas")


def config_response(stored: dict[str, Any], default: CompatibilityLevel) -> dict[str, Any]:
    """The ``Config`` body for a stored document (level defaulted when the document has none)."""
    out: dict[str, Any] = {"compatibilityLevel": stored.get("compatibilityLevel") or default.value}
    for key in ("normalize", *_PASSTHROUGH):
        if stored.get(key) is not None:
            out[key] = stored[key]
    return out


def merge_config_update(stored: dict[str, Any] | None, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Apply a ``ConfigUpdateRequest`` to a stored document.

    Returns:
        (the new stored document, the response echo).

    Raises:
        InvalidCompatibilityLevelError: a missing or unknown level when nothing else is set, or a bad level.
        InvalidRuleSetError: a bad default/override ruleSet.
    """
    new = dict(stored or {})
    echo: dict[str, Any] = {}
    level = body.get("compatibility", body.get("compatibilityLevel"))
    if level is not None:
        parsed = CompatibilityLevel.parse(level)
        new["compatibilityLevel"] = parsed.value
        echo["compatibility"] = parsed.value
    if body.get("normalize") is not None:
        if not isinstance(body["normalize"], bool):
            raise InvalidCompatibilityLevelError("Invalid config: normalize must be true or false")
        new["normalize"] = echo["normalize"] = body["normalize"]
    for key in _PASSTHROUGH:
        if body.get(key) is not None:
            if key in ("defaultRuleSet", "overrideRuleSet"):
                validate_rule_set(body[key])
            new[key] = echo[key] = body[key]
    if not echo:
        CompatibilityLevel.parse(level)  # nothing usable in the request: the same 42203 Confluent answers
    return new, echo


@dataclass(frozen=True)
class EffectiveConfig:
    """What applies to a subject: its own setting, else the global one, else the default.

    Attributes:
        level: the compatibility level (default: the server's ``default_compatibility``).
        normalize: whether schemas are normalized (default: false).
    """

    level: CompatibilityLevel
    normalize: bool


class ConfigService:
    """Compatibility configs and modes, global and per subject, over a store."""

    def __init__(self, store: RegistryStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    def get(self, subject: str | None, *, default_to_global: bool = False) -> dict[str, Any]:
        """The Config response of the global scope or a subject.

        Raises:
            SubjectConfigNotFoundError: a subject without its own config and ``default_to_global`` false.
        """
        def tx(s: StoreSession) -> dict[str, Any]:
            glob = s.config(GLOBAL_SCOPE) or {}
            if subject is None:
                return config_response(glob, self.settings.default_compatibility)
            own = s.config(subject)
            if own is not None:
                return config_response(own, self.settings.default_compatibility)
            if default_to_global:
                return config_response(glob, self.settings.default_compatibility)
            raise SubjectConfigNotFoundError(
                f"Subject '{subject}' does not have subject-level compatibility configured")

        return self.store.run(tx, write=False)

    def update(self, subject: str | None, body: dict[str, Any]) -> dict[str, Any]:
        """Apply a ConfigUpdateRequest; returns its echo.

        Raises:
            InvalidSubjectError, InvalidCompatibilityLevelError, InvalidRuleSetError.
        """
        if subject is not None:
            validate_subject(subject)
        scope = subject if subject is not None else GLOBAL_SCOPE

        def tx(s: StoreSession) -> dict[str, Any]:
            stored, echo = merge_config_update(s.config(scope), body)
            s.put_config(scope, stored)
            return echo

        return self.store.run(tx, write=True)

    def delete(self, subject: str | None) -> dict[str, Any]:
        """Remove a config and return what it was.

        Raises:
            SubjectNotFoundError: a subject without its own config.
        """
        scope = subject if subject is not None else GLOBAL_SCOPE

        def tx(s: StoreSession) -> dict[str, Any]:
            previous = s.config(scope)
            if previous is None and subject is not None:
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            s.delete_config(scope)
            return config_response(previous or {}, self.settings.default_compatibility)

        return self.store.run(tx, write=True)

    def mode(self, subject: str | None, *, default_to_global: bool = False) -> Mode:
        """The mode of the global scope or a subject.

        Raises:
            SubjectModeNotFoundError: a subject without its own mode and ``default_to_global`` false.
        """
        def tx(s: StoreSession) -> Mode:
            if subject is None:
                return Mode(s.mode(GLOBAL_SCOPE) or Mode.READWRITE)
            own = s.mode(subject)
            if own is not None:
                return Mode(own)
            if default_to_global:
                return Mode(s.mode(GLOBAL_SCOPE) or Mode.READWRITE)
            raise SubjectModeNotFoundError(f"Subject '{subject}' does not have subject-level mode configured")

        return self.store.run(tx, write=False)

    def update_mode(self, subject: str | None, mode: Mode, *, force: bool = False) -> Mode:
        """Set a mode. Entering IMPORT while (those) subjects have versions needs ``force``.

        Raises:
            InvalidSubjectError, OperationNotPermittedError.
        """
        if subject is not None:
            validate_subject(subject)

        def tx(s: StoreSession) -> Mode:
            if mode is Mode.IMPORT and not force:
                has = s.versions(subject) if subject is not None else s.subjects(deleted=True, deleted_only=False)
                if has:
                    raise OperationNotPermittedError(
                        "Cannot import since found existing subjects" if subject is None
                        else f"Cannot import since subject {subject} has versions")
            s.put_mode(subject if subject is not None else GLOBAL_SCOPE, mode.value)
            return mode

        return self.store.run(tx, write=True)

    def delete_mode(self, subject: str | None) -> Mode:
        """Remove a mode and return what it was.

        Raises:
            SubjectModeNotFoundError: a subject without its own mode.
        """
        scope = subject if subject is not None else GLOBAL_SCOPE

        def tx(s: StoreSession) -> Mode:
            previous = s.mode(scope)
            if previous is None and subject is not None:
                raise SubjectModeNotFoundError(f"Subject '{subject}' does not have subject-level mode configured")
            s.delete_mode(scope)
            return Mode(previous or Mode.READWRITE)

        return self.store.run(tx, write=True)

    def level_in(self, s: StoreSession, subject: str) -> CompatibilityLevel:
        """The level that applies to a subject: its own, else the global one, else the server default."""
        return self.effective_in(s, subject).level

    def normalize_in(self, s: StoreSession, subject: str) -> bool:
        """Whether the subject's (or the global) config asks for normalized schemas."""
        return self.effective_in(s, subject).normalize

    def effective_in(self, s: StoreSession, subject: str) -> EffectiveConfig:
        """The level and the normalize flag that apply to a subject, reading each config (subject, global) once."""
        scoped = [s.config(subject)]
        level: CompatibilityLevel | None = None
        normalize: bool | None = None
        for index in range(2):
            cfg = scoped[index]
            if cfg:
                if level is None and cfg.get("compatibilityLevel"):
                    level = CompatibilityLevel.parse(cfg["compatibilityLevel"])
                if normalize is None and cfg.get("normalize") is not None:
                    normalize = bool(cfg["normalize"])
            if index == 0:
                if level is not None and normalize is not None:
                    break
                scoped.append(s.config(GLOBAL_SCOPE))
        return EffectiveConfig(level if level is not None else self.settings.default_compatibility, bool(normalize))

    def mode_in(self, s: StoreSession, subject: str) -> Mode:
        """The mode that applies to a subject: its own, else the global one, else READWRITE."""
        return Mode(s.mode(subject) or s.mode(GLOBAL_SCOPE) or Mode.READWRITE)

    def require_writable(self, s: StoreSession, subject: str) -> None:
        """Refuse writes in READONLY modes.

        Raises:
            OperationNotPermittedError: the subject is read-only (42205).
        """
        if not self.mode_in(s, subject).writable:
            raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")
