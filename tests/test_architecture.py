"""DESIGN §1: the dependency arrows between packages, checked on the import statements of every module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package (or sub-package) -> top-level modules it must never import
FORBIDDEN = {
    "tablecore": {"schema_registry", "validators", "governance"},
    "tablecore/format": {"pyspark", "schema_registry", "validators", "governance"},
    "schema_registry": {"tablecore", "validators", "governance"},
    "validators": {"governance", "schema_registry.server", "schema_registry.client"},
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_respects_dependency_direction(package: str) -> None:
    bad = []
    for path in (ROOT / package).rglob("*.py"):
        for name in imports_of(path):
            for banned in FORBIDDEN[package]:
                if name == banned or name.startswith(banned + "."):
                    bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_validators_do_not_reach_into_tablecore_internals() -> None:
    for path in (ROOT / "validators").rglob("*.py"):
        for name in imports_of(path):
            assert not (name.startswith("tablecore.") and name != "tablecore"), f"{path} imports {name}"
