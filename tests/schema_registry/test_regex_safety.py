"""Semantic-type patterns: the syntax subset both engines read alike, and no catastrophic backtracking.

The vectors are the classic shapes of ReDoS (nested quantifiers, overlapping alternatives under a loop, chains of
loops over the same characters) next to look-alikes that are safe, so the check is shown to tell them apart rather
than to refuse anything with two quantifiers.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from schema_registry.catalogue import SemanticCatalogue
from schema_registry.errors import InvalidSemanticTypeError
from schema_registry.model import STORED, Constraints, SemanticType, SemanticTypeSpec
from schema_registry.regex_safety import MAX_PATTERN_LENGTH, pattern_problem
from schema_registry.semantic import builtin_types
from schema_registry.store import open_store
from tests.schema_registry.conftest import LiveServer

EXPONENTIAL = [
    ("(a+)+$", "(a+)+"),
    ("(a*)*b", "(a*)*"),
    ("(a|a)*", "(a|a)*"),
    ("(a|b|ab)*c", "(a|b|ab)*"),
    (r"(\w|\d)+$", r"(\w|\d)+"),
    (r"(\d+)*x", r"(\d+)*"),
    (r"(\w+\s?)+$", r"(\w+\s?)+"),
    (r"(\s*,\s*)*", r"(\s*,\s*)*"),
    ("(a?b?)*c", "(a?b?)*"),
    ("(x(a?)*y)*", "(x(a?)*y)*"),  # an empty iteration can be had two ways, so every x..y doubles the count
    ("(a|a){30}", "(a|a){30}"),  # bounded, still 2^30 ways
    ("(?:a+){2,}", "(?:a+){2,}"),
    ("(.*,){1,10}", "(.*,){1,10}"),
    ("(?>a+)+", "(?>a+)+"),  # atomic groups are not credited
    (r"^([a-zA-Z0-9])(([\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$",
     r"(([\-.]|[_]+)?([a-zA-Z0-9]+))*"),  # a published e-mail ReDoS
]
CUBIC_OR_WORSE = [".*a.*a.*", ".*(?:.*=.*)", "a*a*a*", r"\d+\d+\d+x", "[a-z]*[a-z0-9]*[a-z]*!"]
ACCEPTED = [
    "(a|ab)*", "(ab?)*", ".*a.*", "[a-z]+[a-z0-9]*", r"\s*\S+\s*", r"^\s+|\s+$", r"[^\d\s]+", "(.|\n)*",
    r"\d{3}\d{3}\d{4}", r"\d{1,5}\d{1,5}\d{1,5}", r"(\d{1,3}\.){3}\d{1,3}", r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    r"[A-Z]{2}[0-9]{2}[A-Z0-9]{1,30}", "a{0,1000}b{0,1000}", ".{0,61}", "(?s)a.b", "a*?b", "a*+b",
    r"\$[0-9]+\.[0-9]{2}",
    r"[a-z0-9_-]+(\.[a-z0-9_-]+)*", r"([A-Za-z]+ )*[A-Za-z]+", "[-a-z]+", r"[\]\[]+", r"\x41\u00e9\t",
]
UNSUPPORTED = [
    ("(?i)abc", "inline flags"), ("(?m)^a$", "inline flags"), ("a(?=b)", "lookaround"), ("(?<!a)b", "lookaround"),
    (r"(a)\1", "backreferences"), ("(?P<x>a)", "named groups"), (r"[a-z&&[^e]]", "intersection"),
    ("[[:alpha:]]", "nested class"), ("a{,3}", "{n}, {n,} or {n,m}"), ("a{x}", "{n}, {n,} or {n,m}"),
    ("]", "'\\]'"), ("a}", "'\\}'"), (r"\p{L}", "unknown to one of Python and Java"), (r"\Z", "unknown"),
    (r"\v", "unknown"), (r"\0", "octal"), (r"[\b]", "backspace"), (r"[\d-z]", "range"), ("^*", "anchor"),
    ("a**", "a quantifier"), ("a{2}{3}", "a quantifier"),
]


@pytest.mark.parametrize("pattern,part", EXPONENTIAL)
def test_exponential_patterns_are_refused_naming_the_part(pattern: str, part: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None and "exponential time" in problem, problem
    assert repr(pattern) in problem and f"{part!r} can match the same text in more than one way" in problem


@pytest.mark.parametrize("pattern", CUBIC_OR_WORSE)
def test_cubic_or_worse_patterns_are_refused(pattern: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None and "to the power" in problem and repr(pattern) in problem, problem


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_linear_or_quadratic_patterns_are_accepted(pattern: str) -> None:
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize("pattern,text", UNSUPPORTED)
def test_syntax_outside_the_common_subset_is_refused(pattern: str, text: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None and text in problem and "is not accepted" in problem, problem


def test_engines_are_analysed_with_their_own_classes() -> None:
    # '.' and '\n' never overlap, in either engine; with (?s) they do
    assert pattern_problem("(.|\n)*") is None
    assert "exponential" in (pattern_problem("(?s)(.|\n)*") or "")
    # '\r' is a line terminator for Java's '.', not Python's
    problem = pattern_problem("(.|\r)*")
    assert problem is not None and "Python's re" in problem
    # Python's \d is any Unicode digit, Java's only 0-9: an Arabic-Indic digit overlaps \d in Python only
    problem = pattern_problem("(\\d|\u0663)*")
    assert problem is not None and "Python's re" in problem
    assert "Java" in (pattern_problem("(\\w|[0-9])*") or "")


def test_builtin_patterns_pass_the_check() -> None:
    patterns = [t.spec.constraints.pattern for t in builtin_types().values() if t.spec.constraints.pattern]
    assert len(patterns) == 4
    assert all(pattern_problem(p) is None for p in patterns)


def test_long_and_deep_patterns_are_refused_not_analysed_for_ever() -> None:
    assert "longer than" in (pattern_problem("a" * (MAX_PATTERN_LENGTH + 1)) or "")
    assert "nest more than" in (pattern_problem("(" * 150 + "a" + ")" * 150) or "")
    # wide and ambiguous: refused fast either way
    assert pattern_problem("(" + "|".join("a" * 5 for _ in range(150)) + ")*") is not None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab.()|*+?{}[]^$\\d,0123-", max_size=40))
def test_any_text_gets_an_answer(pattern: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is None or problem.startswith("pattern")


def test_constraints_refuse_a_catastrophic_pattern_unless_read_from_the_registry() -> None:
    with pytest.raises(ValidationError, match=r"pattern '\(a\+\)\+\$' can take exponential time"):
        Constraints(pattern="(a+)+$")
    stored = Constraints.model_validate({"pattern": "(a+)+$"}, context={STORED: True})
    assert stored.pattern == "(a+)+$"
    with pytest.raises(ValidationError, match="not a valid regular expression"):  # compiling is still checked
        Constraints.model_validate({"pattern": "(a"}, context={STORED: True})


def test_a_type_stored_before_the_check_is_still_served(tmp_path: object) -> None:
    store = open_store(f"sqlite:///{tmp_path}/r.db")
    try:
        spec = SemanticTypeSpec.model_validate({"base_type": "string", "constraints": {"pattern": "(a+)+$"}},
                                               context={STORED: True})
        store.run(lambda s: s.insert_semantic(SemanticType(name="legacy", version=1, spec=spec)), write=True)
        catalogue = SemanticCatalogue(store)
        assert catalogue.get("legacy").spec.constraints.pattern == "(a+)+$"
        assert "legacy" in {t.name for t in catalogue.all()}
        with pytest.raises(InvalidSemanticTypeError, match="exponential time"):  # a new version is checked
            catalogue.put("legacy", {"base_type": "string", "constraints": {"pattern": "(a|a)*"}})
    finally:
        store.close()


@pytest.mark.integration
def test_put_answers_42250_naming_the_pattern(shared_server: LiveServer) -> None:
    r = shared_server.http.put("/semantic-types/sku", json={"base_type": "string", "constraints": {
        "pattern": r"([A-Z]+-?)+[0-9]{4}"}})
    assert (r.status_code, r.json()["error_code"]) == (422, 42250), r.text
    message = r.json()["message"]
    assert message.startswith("Invalid semantic type 'sku': constraints.pattern: ")
    assert "'([A-Z]+-?)+'" in message and "exponential time" in message
    ok = shared_server.http.put("/semantic-types/sku", json={"base_type": "string", "constraints": {
        "pattern": r"[A-Z]+(-[A-Z]+)*[0-9]{4}"}})
    assert ok.status_code == 201, ok.text
