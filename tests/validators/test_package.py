"""The public surface of validators and its import cost (no Spark)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types

import validators


def test_exported_members() -> None:
    exported = set(validators.__all__)
    assert {"Suite", "AuditContext", "load_suite", "SuiteResult", "CheckResult", "Policy", "Tolerance",
            "ValidationFailed", "RegistrySchemas"} <= exported
    for name in exported:
        assert hasattr(validators, name), name
    public = {n for n in dir(validators) if not n.startswith("_") and n != "annotations"
              and not isinstance(getattr(validators, n), types.ModuleType)}
    assert public == exported  # nothing public is left out of __all__


def test_importing_and_loading_a_suite_does_not_import_great_expectations() -> None:
    code = textwrap.dedent("""
        import sys
        import validators
        check = "{name: a, kind: sql, form: zero_rows, query: 'SELECT 1 FROM {changes}'}"
        validators.load_suite("name: s\\nchecks:\\n  - " + check + "\\n")
        print("great_expectations" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
