"""Results as data (no Spark): statuses, verdicts, JSON, and the self-contained HTML report."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest

from validators import CheckResult, FailingRow, Policy, RuleResult, Status, SuiteResult, Tolerance, Verdict, render_html
from validators.results import decide_status, verdict_of


def result(*checks: CheckResult) -> SuiteResult:
    return SuiteResult(suite="s", verdict=verdict_of(list(checks)), checks=checks,
                       started_at=dt.datetime(2024, 1, 1, tzinfo=dt.UTC), duration_ms=12.5, row_pass_jobs=1)


def check(name: str, status: Status, policy: Policy = Policy.BLOCK, failing: int = 0, **kw: object) -> CheckResult:
    return CheckResult(name=name, kind="semantic", policy=policy, status=status, failing_rows=failing,
                       total_rows=100, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("policy", "tolerance", "failing", "expected"), [
    (Policy.BLOCK, None, 0, Status.PASS),
    (Policy.BLOCK, None, 1, Status.FAIL),
    (Policy.BLOCK, Tolerance(max_fraction=0.001), 1, Status.WARN),    # 1 of 1000 is within 0.1 %
    (Policy.BLOCK, Tolerance(max_fraction=0.001), 2, Status.FAIL),
    (Policy.BLOCK, Tolerance(max_rows=5), 5, Status.WARN),
    (Policy.WARN, None, 500, Status.WARN),
    (Policy.QUARANTINE, None, 999, Status.WARN),
    (Policy.QUARANTINE, Tolerance(max_fraction=0.5), 501, Status.FAIL),
    (Policy.QUARANTINE, Tolerance(max_fraction=0.5), 500, Status.WARN),
])
def test_decide_status(policy: Policy, tolerance: Tolerance | None, failing: int, expected: Status) -> None:
    assert decide_status(policy, tolerance, failing, 1000) == expected


def test_verdict_precedence() -> None:
    quarantined = check("q", Status.WARN, Policy.QUARANTINE, failing=3)
    assert result(check("a", Status.PASS)).verdict == Verdict.PASS
    assert result(check("a", Status.WARN, Policy.WARN, 1)).verdict == Verdict.WARN
    assert result(check("a", Status.WARN, Policy.WARN, 1), quarantined).verdict == Verdict.QUARANTINE
    assert result(quarantined, check("b", Status.FAIL)).verdict == Verdict.BLOCK


def test_json_is_plain_and_round_trips() -> None:
    r = result(check("a", Status.FAIL, failing=2, observed={"failing_fraction": 0.02}, expected="no failing rows",
                     rules=(RuleResult(name="semantic:x:t:maximum", failing_rows=2,
                                       sample=(FailingRow(reason="x = 9", row={"id": 1}),)),)))
    data = json.loads(r.to_json())
    assert data["checks"][0]["rules"][0]["sample"][0] == {"reason": "x = 9", "row": {"id": 1}}
    assert data["checks"][0]["policy"] == "block" and data["verdict"] == "block"
    assert SuiteResult.from_json(r.to_json()) == r


def test_html_report_is_self_contained_and_escapes_values() -> None:
    evil = "<script>alert('x')</script>"
    r = result(
        check("ok", Status.PASS),
        check("bad<b>", Status.FAIL, failing=1, message=f"value {evil}", error=None,
              sample=(FailingRow(reason=f"name = '{evil}' is not allowed", row={"name": evil}),),
              rules=(RuleResult(name="semantic:name:t:pattern", description=evil, failing_rows=1),)))
    page = render_html(r)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "bad&lt;b&gt;" in page and "<b>" not in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing loaded from elsewhere
    assert "BLOCK" in page and "semantic:name:t:pattern" in page
