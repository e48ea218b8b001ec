"""Validation of Confluent data-contract rule sets (stored and returned verbatim once valid).

Rules of Confluent's ``RuleSet.validate``: every rule has a ``name`` (1-256 characters: a letter or ``_``,
then letters, digits, ``_`` or ``-``) unique across the whole rule set and a ``type``; ``kind`` is CONDITION
or TRANSFORM; migration rules have mode UPGRADE, DOWNGRADE or UPDOWN, domain and encoding rules WRITE, READ
or WRITEREAD; a comma-separated ``onFailure``/``onSuccess`` pair only for WRITEREAD and UPDOWN. The server
does not execute rules: clients' serializers do.
"""

from __future__ import annotations

import re
from typing import Any

from schema_registry.errors import InvalidRuleSetError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,255}$")
_KINDS = {"CONDITION", "TRANSFORM"}
_MIGRATION_MODES = {"UPGRADE", "DOWNGRADE", "UPDOWN"}
_DOMAIN_MODES = {"WRITE", "READ", "WRITEREAD"}
_LISTS = {"migrationRules": _MIGRATION_MODES, "domainRules": _DOMAIN_MODES, "encodingRules": _DOMAIN_MODES}


def validate_rule_set(rule_set: Any) -> None:
    """Check a ruleSet document.

    Raises:
        InvalidRuleSetError: the first problem found (Confluent 42210).
    """
    if not isinstance(rule_set, dict):
        raise InvalidRuleSetError("Invalid rule set: must be an object")
    names: set[str] = set()
    for list_name, modes in _LISTS.items():
        rules = rule_set.get(list_name)
        if rules is None:
            continue
        if not isinstance(rules, list):
            raise InvalidRuleSetError(f"Invalid rule set: {list_name} must be a list")
        for rule in rules:
            _validate_rule(rule, list_name, modes, names)


def _validate_rule(rule: Any, list_name: str, modes: set[str], names: set[str]) -> None:
    if not isinstance(rule, dict):
        raise InvalidRuleSetError(f"Invalid rule set: every entry of {list_name} must be an object")
    name = rule.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidRuleSetError(f"Invalid rule name {name!r}: 1-256 characters, a letter or '_' first, "
                                  "then letters, digits, '_' or '-'")
    if name in names:
        raise InvalidRuleSetError(f"Found rule with duplicate name '{name}'")
    names.add(name)
    if not isinstance(rule.get("type"), str) or not rule["type"]:
        raise InvalidRuleSetError(f"Missing rule type for rule '{name}'")
    kind = str(rule.get("kind", "TRANSFORM")).upper()
    if kind not in _KINDS:
        raise InvalidRuleSetError(f"Invalid rule kind '{rule.get('kind')}' for rule '{name}'")
    mode = str(rule.get("mode", "WRITEREAD" if list_name != "migrationRules" else "UPGRADE")).upper()
    if mode not in modes:
        raise InvalidRuleSetError(f"Invalid mode '{rule.get('mode')}' for rule '{name}' in {list_name}: "
                                  f"use one of {', '.join(sorted(modes))}")
    for key in ("onSuccess", "onFailure"):
        action = rule.get(key)
        if isinstance(action, str) and "," in action and mode not in ("WRITEREAD", "UPDOWN"):
            raise InvalidRuleSetError(f"Multiple actions in {key} of rule '{name}' need mode WRITEREAD or UPDOWN")
