"""Acceptance 2: suites load from YAML; a bad suite fails at load time naming the offending entry (no Spark)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from validators import (
    JsonSchemaCheck,
    Policy,
    SchemaCheck,
    SemanticCheck,
    SqlCheck,
    SuiteConfigError,
    Tolerance,
    load_suite,
)
from validators.loading import suite_from_dict

DATA = Path(__file__).parent / "data"


def suite_text(*checks: str) -> str:
    """A suite whose checks are the given YAML snippets (each a mapping under ``- ``)."""
    body = "\n".join("  - " + textwrap.indent(textwrap.dedent(c).strip(), "    ").lstrip() for c in checks)
    return f"name: s\nchecks:\n{body}\n"


GOOD_SQL = """
name: ok_sql
kind: sql
form: zero_rows
query: SELECT * FROM {changes} WHERE fare < 0
"""


def test_load_suite_from_file_builds_typed_checks() -> None:
    suite = load_suite(DATA / "trips_suite.yaml")
    assert suite.name == "trips_quality"
    assert [c.kind for c in suite.checks] == ["schema", "semantic", "json_schema", "sql", "sql", "expectations"]
    assert isinstance(suite.checks[0], SchemaCheck) and suite.checks[0].avro.path == "trips.avsc"
    sem = suite.checks[1]
    assert isinstance(sem, SemanticCheck)
    assert sem.types["positive_distance"].constraints.exclusive_minimum is True
    assert isinstance(suite.checks[2], JsonSchemaCheck)
    assert suite.base_dir == DATA.resolve()
    assert suite.sample_size == 3


@pytest.mark.parametrize(("snippet", "expected"), [
    ("name: fare_range\nkind: rnage\n", "unknown kind 'rnage'"),
    ("name: no_kind\nquery: SELECT 1\n", "missing field 'kind'"),
    ("name: no_query\nkind: sql\nform: zero_rows\n", "missing field 'query'"),
    ("name: typo\nkind: sql\nform: zero_rows\nquery: SELECT * FROM {changes}\npolcy: warn\n",
     "unknown field 'polcy'"),
    ("name: bad_sql\nkind: sql\nform: zero_rows\nquery: SELEC * FROM {changes}\n", "SQL does not parse"),
    ("name: cut_sql\nkind: sql\nform: zero_rows\nquery: SELECT * FROM {changes} WHERE\n", "SQL does not parse"),
    ("name: bad_view\nkind: sql\nform: zero_rows\nquery: SELECT * FROM {chnages}\n", "unknown view {chnages}"),
    ("name: table_in_zero\nkind: sql\nform: zero_rows\nquery: SELECT * FROM {table}\n", "unknown view {table}"),
    ("name: eq_no_table\nkind: sql\nform: equality\nquery: SELECT count(*) FROM {changes}\n", "need the {table}"),
    ("name: no_expect\nkind: sql\nform: single_value\nquery: SELECT count(*) FROM {changes}\n", "needs expect"),
    ("name: ddl\nkind: sql\nform: zero_rows\nquery: DROP TABLE {changes}\n", "expected a query"),
    ("name: bad_regex\nkind: semantic\nbindings: {code: code_type}\ntypes:\n  code_type:\n    base_type: string\n"
     "    constraints: {pattern: '[A-Z'}\n", "is not a valid regular expression"),
    ("name: q_sql\nkind: sql\nform: zero_rows\nquery: SELECT * FROM {changes}\npolicy: quarantine\n",
     "policy quarantine needs a row-level check"),
    ("name: bad_tol\nkind: schema\nschema: trips.avsc\ntolerance: 5\n", "fraction in [0, 1]"),
    ("name: bad_policy\nkind: schema\nschema: trips.avsc\npolicy: explode\n", "policy"),
    ("name: missing_file\nkind: schema\nschema: nowhere.avsc\n", "cannot read"),
    ("name: bad_inline\nkind: schema\nschema: {inline: {type: record, name: T, fields: [{name: a, type: nope}]}}\n",
     "Invalid schema"),
    ("name: bad_js\nkind: json_schema\ncolumn: p\njson_schema: {type: 12}\n", "not a valid JSON Schema"),
    ("name: bad_gx\nkind: expectations\ninline: {expectations: [{type: not_an_expectation}]}\n", "expect_"),
    ("name: 'bad name!'\nkind: sql\nform: zero_rows\nquery: SELECT * FROM {changes}\n", "must match"),
])
def test_bad_entry_fails_at_load_naming_the_entry(snippet: str, expected: str) -> None:
    text = suite_text(GOOD_SQL, snippet)
    with pytest.raises(SuiteConfigError) as info:
        load_suite(text, base_dir=DATA)
    err = info.value
    assert err.entry == 1
    assert err.line == 7  # the line of the second "- " item of the generated YAML
    assert expected in str(err)
    assert str(err).startswith("line 7: checks[1]")
    name = snippet.split("\n")[0].removeprefix("name: ").strip("'")
    if name != "bad name!":
        assert err.check_name == name and f"(name {name!r})" in str(err)


def test_unknown_expectation_type_fails_at_load() -> None:
    pytest.importorskip("great_expectations")
    text = suite_text("name: gx\nkind: expectations\ninline: {expectations: [{type: expect_the_unexpected}]}\n")
    with pytest.raises(SuiteConfigError, match=r"checks\[0\] \(name 'gx'\): unknown expectation type"):
        load_suite(text)


def test_duplicate_names_point_at_the_second_entry() -> None:
    with pytest.raises(SuiteConfigError, match=r"checks\[1\] \(name 'ok_sql'\): duplicate check name"):
        load_suite(suite_text(GOOD_SQL, GOOD_SQL))


def test_suite_level_errors() -> None:
    with pytest.raises(SuiteConfigError, match="non-empty list of checks"):
        load_suite("name: s\nchecks: []\n")
    with pytest.raises(SuiteConfigError, match="unknown suite key"):
        load_suite("name: s\nchekcs: []\n")
    with pytest.raises(SuiteConfigError, match="not valid YAML") as info:
        load_suite("name: s\nchecks:\n  - {name: a\n")
    assert info.value.line is not None
    with pytest.raises(SuiteConfigError, match="cannot read the suite"):
        load_suite(Path("/nonexistent/suite.yaml"))


def test_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(suite_text(GOOD_SQL, "name: x\nkind: sqll\n"))
    with pytest.raises(SuiteConfigError) as info:
        load_suite(path)
    assert str(info.value).startswith(f"{path}:7: checks[1] (name 'x'): unknown kind 'sqll'")


def test_tolerance_shorthands() -> None:
    assert Tolerance.model_validate(0.001).max_fraction == 0.001
    assert Tolerance.model_validate("0.1%").max_fraction == pytest.approx(0.001)
    assert Tolerance.model_validate({"max_rows": 10}).allowed(10**9) == 10
    both = Tolerance(max_fraction=0.01, max_rows=5)
    assert both.allowed(100) == 1 and both.allowed(10_000) == 5
    with pytest.raises(ValueError):
        Tolerance.model_validate("ten")
    with pytest.raises(ValueError):
        Tolerance.model_validate({})


def test_python_built_suite_equals_yaml_suite() -> None:
    from validators import Suite

    built = Suite(name="s", checks=(SqlCheck(name="ok_sql", form="zero_rows",
                                             query="SELECT * FROM {changes} WHERE fare < 0"),))
    loaded = suite_from_dict({"name": "s", "checks": [{"name": "ok_sql", "kind": "sql", "form": "zero_rows",
                                                       "query": "SELECT * FROM {changes} WHERE fare < 0"}]})
    assert built.model_dump() == loaded.model_dump()
    assert built.checks[0].policy == Policy.BLOCK
