"""What every benchmark script shares and that needs neither Spark nor the project: the commit, the machine's
memory, and matplotlib for the charts. Scripts run as ``python benchmarks/<name>.py`` import it as ``common``."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def git_sha() -> str | None:
    """The checked-out commit, or None outside a git work tree."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10,
                             check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def total_ram_bytes() -> int | None:
    """MemTotal of /proc/meminfo, or None where there is none."""
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


def pyplot() -> Any | None:
    """``matplotlib.pyplot`` on the file-only Agg backend, or None (and a note) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed; skipping the chart (pip install -e '.[bench]')")
        return None
    return plt


def write_results(doc: dict[str, Any], out: Path, write_chart: Callable[[dict[str, Any], Path], bool],
                  summary: Callable[[dict[str, Any]], str], started: float) -> None:
    """Write ``doc`` as JSON to ``out`` and its chart next to it (``.png``), then print the summary and the total
    time since ``started`` (a ``time.perf_counter()`` value)."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"results: {out}")
    chart = out.with_suffix(".png")
    if write_chart(doc, chart):
        print(f"chart: {chart}")
    print()
    print(summary(doc))
    print(f"(total {time.perf_counter() - started:.0f} s)")
