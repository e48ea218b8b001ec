"""DESIGN §1: the dependency arrows between packages, checked on the import statements of every module."""

from __future__ import annotations

import ast
import subprocess
import sys
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


def test_only_the_spark_engine_mentions_pyspark() -> None:
    """Issue 16, acceptance 1: ``grep -rl pyspark tablecore`` lists files under ``tablecore/spark/`` only."""
    found = [p.relative_to(ROOT).as_posix() for p in (ROOT / "tablecore").rglob("*.py") if "pyspark" in p.read_text()]
    assert found and all(p.startswith("tablecore/spark/") for p in found), found


def test_jvm_handles_are_reached_in_one_module() -> None:
    """``sparkContext``, ``_jdf``, ``_jvm``, ``_jsc``: only in ``tablecore/spark/jvm.py`` (so a Spark Connect session,
    which has none of them, needs that one module changed)."""
    handles = ("sparkContext", "_jdf", "_jvm", "_jsc", "_jsparkSession")
    found = sorted({p.relative_to(ROOT).as_posix() for p in (ROOT / "tablecore").rglob("*.py")
                    if any(h in p.read_text() for h in handles)})
    assert found == ["tablecore/spark/jvm.py"]


def test_importing_tablecore_and_its_engine_neutral_layers_loads_no_spark() -> None:
    """The format layer, FileIO, the transaction, read planning, tasks and services run without Spark installed."""
    code = ("import sys, tablecore, tablecore.transaction, tablecore.table_transaction, tablecore.read_planning, "
            "tablecore.tasks.read, tablecore.tasks.clustering, tablecore.services.clean, "
            "tablecore.services.compaction, tablecore.services.clustering, tablecore.services.savepoint, "
            "tablecore.services.archive, tablecore.format.log_format, tablecore.io\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_import_contracts_hold() -> None:
    """The import-linter contracts of pyproject.toml (``make test`` also runs ``lint-imports`` itself)."""
    linter = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(linter)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:]
