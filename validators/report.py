"""A self-contained HTML report of a :class:`~validators.results.SuiteResult`: one file, inline CSS, no scripts.

Layout: a verdict banner with counts, a table of every check (status, name, kind, policy, failing rows, message),
then one section per check that did not pass with its rules, observed/expected values and sampled failing rows.
Every value taken from data or configuration goes through :func:`html.escape`, so a sampled value such as
``<script>`` is shown, never run.
"""

from __future__ import annotations

import html
import json
from typing import Any

from validators.results import CheckResult, Status, SuiteResult, Verdict

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d232a;max-width:1200px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px} h3{font-size:14px;margin:18px 0 6px}
.banner{padding:14px 18px;border-radius:8px;margin:12px 0 18px;font-size:16px;font-weight:600;color:#fff}
.v-pass{background:#1f883d}.v-warn{background:#bf8700}.v-quarantine{background:#8250df}.v-block{background:#cf222e}
table{border-collapse:collapse;width:100%;margin:6px 0 12px}
th,td{border-bottom:1px solid #d0d7de;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600} td.num{text-align:right;font-variant-numeric:tabular-nums}
.s{display:inline-block;min-width:42px;text-align:center;border-radius:10px;padding:1px 8px;font-size:12px;
font-weight:600;color:#fff}.s-pass{background:#1f883d}.s-warn{background:#bf8700}.s-fail{background:#cf222e}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;background:#f6f8fa;border-radius:4px}
pre{padding:8px;white-space:pre-wrap;word-break:break-word;margin:4px 0} .muted{color:#59636e}
.err{color:#cf222e;font-weight:600}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _json(value: Any) -> str:
    return _e(json.dumps(value, indent=1, default=str, ensure_ascii=False))


def _status(status: Status) -> str:
    return f'<span class="s s-{_e(status.value)}">{_e(status.value)}</span>'


def render_html(result: SuiteResult) -> str:
    """The report as one HTML document."""
    counts = {s: sum(1 for c in result.checks if c.status == s) for s in Status}
    headline = {Verdict.PASS: "All checks pass", Verdict.WARN: "Passed with warnings",
                Verdict.QUARANTINE: "Failing rows quarantined, the rest may publish",
                Verdict.BLOCK: "Blocked: the commit must not publish"}[result.verdict]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(result.suite)}: {_e(result.verdict.value)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Validation report: {_e(result.suite)}</h1>",
        f'<div class="muted">started {_e(result.started_at.isoformat(timespec="seconds"))} &middot; '
        f"{result.duration_ms / 1000:.2f} s &middot; {len(result.checks)} checks &middot; "
        f"{result.row_pass_jobs} one-pass job(s) for the row rules</div>",
        f'<div class="banner v-{_e(result.verdict.value)}">{_e(result.verdict.value.upper())} &mdash; '
        f"{_e(headline)} &middot; {counts[Status.PASS]} pass, {counts[Status.WARN]} warn, "
        f"{counts[Status.FAIL]} fail</div>",
        "<h2>Checks</h2>",
        "<table><thead><tr><th>status</th><th>check</th><th>kind</th><th>policy</th>"
        '<th class="num">failing rows</th><th class="num">rows</th><th class="num">ms</th><th>summary</th>'
        "</tr></thead><tbody>",
    ]
    for c in result.checks:
        anchor = f'<a href="#c-{_e(_slug(c.name))}">{_e(c.name)}</a>' if c.status != Status.PASS else _e(c.name)
        parts.append(
            f"<tr><td>{_status(c.status)}</td><td>{anchor}</td><td>{_e(c.kind)}</td><td>{_e(c.policy.value)}</td>"
            f'<td class="num">{_e(_num(c.failing_rows))}</td><td class="num">{_e(_num(c.total_rows))}</td>'
            f'<td class="num">{c.duration_ms:.0f}</td><td>{_e(c.message)}</td></tr>')
    parts.append("</tbody></table>")
    details = [c for c in result.checks if c.status != Status.PASS]
    if details:
        parts.append("<h2>Details</h2>")
        parts.extend(_detail(c) for c in details)
    parts.append("</body></html>")
    return "\n".join(parts)


def _detail(c: CheckResult) -> str:
    out = [f'<h3 id="c-{_e(_slug(c.name))}">{_status(c.status)} {_e(c.name)} '
           f'<span class="muted">({_e(c.kind)}, policy {_e(c.policy.value)}'
           f'{", view " + _e(c.view) if c.view else ""})</span></h3>']
    if c.error:
        out.append(f'<div class="err">error: {_e(c.error)}</div>')
    out.append("<table><tbody>"
               f"<tr><th>observed</th><td><pre>{_json(c.observed)}</pre></td></tr>"
               f"<tr><th>expected</th><td><pre>{_json(c.expected)}</pre></td></tr></tbody></table>")
    failing_rules = [r for r in c.rules if r.failing_rows]
    if failing_rules:
        out.append('<table><thead><tr><th>rule</th><th>requires</th><th class="num">failing rows</th></tr></thead>'
                   "<tbody>")
        out.extend(f'<tr><td><code>{_e(r.name)}</code></td><td>{_e(r.description)}</td>'
                   f'<td class="num">{_e(_num(r.failing_rows))}</td></tr>' for r in failing_rules)
        out.append("</tbody></table>")
    if c.sample:
        out.append("<table><thead><tr><th>reason</th><th>row</th></tr></thead><tbody>")
        out.extend(f"<tr><td>{_e(s.reason)}</td><td><pre>{_json(s.row)}</pre></td></tr>" for s in c.sample)
        out.append("</tbody></table>")
    return "\n".join(out)


def _num(n: int | None) -> str:
    return "" if n is None else f"{n:,}"


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name)
