"""A semantic type stored before the registry refused backtracking patterns is never compiled into Spark's (Java,
backtracking) RLIKE: the field gets a structural issue naming the pattern instead."""

from __future__ import annotations

import datetime as dt

from pyspark.sql.types import StringType, StructField, StructType

from schema_registry.model import Constraints, SemanticType, SemanticTypeSpec
from validators.model import SemanticCheck
from validators.semantic import compile_semantic_check


def _compiled(pattern: str) -> tuple[list[str], int]:
    # model_construct: as a type read back from a store, without the registration-time validation
    spec = SemanticTypeSpec.model_construct(constraints=Constraints.model_construct(pattern=pattern))
    stored = SemanticType.model_construct(name="code", version=1, spec=spec)
    check = SemanticCheck(name="s", bindings={"code": "code"}, constraints=["pattern"])
    issues, rules = compile_semantic_check(check, StructType([StructField("code", StringType())]), None,
                                           {"code": stored}, dt.datetime.now(dt.UTC))
    return [i.problem for i in issues], len(rules)


def test_a_catastrophic_stored_pattern_becomes_an_issue_not_a_rule() -> None:
    problems, rules = _compiled("(a+)+$")
    assert rules == 0 and len(problems) == 1 and "(a+)+$" in problems[0] and "refused" in problems[0]


def test_a_safe_stored_pattern_is_compiled() -> None:
    assert _compiled("[A-Z]{3}-[0-9]+") == ([], 1)
