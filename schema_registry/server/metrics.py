"""Prometheus metrics of one app instance (its own ``CollectorRegistry``, so several apps can share a process).

```
lakegate_registry_requests_total{method, route, status}      counter
lakegate_registry_request_duration_seconds{method, route}    histogram
lakegate_registry_subjects                                   gauge, read from the store at scrape time
lakegate_registry_schemas                                    gauge, schema ids used by some version
```

``route`` is the route template (``/subjects/{subject}/versions``), never the raw path, so subject names do
not multiply the series; unmatched paths count as ``unmatched``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _StoreCollector(Collector):
    def __init__(self, counts: Callable[[], tuple[int, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        try:
            subjects, schemas = self._counts()
        except Exception:  # a scrape must not fail because the store is down; the request metrics still show it
            logger.warning("metrics: cannot read subject and schema counts from the store", exc_info=True)
            return
        yield GaugeMetricFamily("lakegate_registry_subjects", "Subjects with at least one live version", subjects)
        yield GaugeMetricFamily("lakegate_registry_schemas", "Schema ids used by at least one version", schemas)


class Metrics:
    """Request counters and latency histograms plus store gauges."""

    def __init__(self, counts: Callable[[], tuple[int, int]]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("lakegate_registry_requests", "HTTP requests served",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("lakegate_registry_request_duration_seconds", "HTTP request latency",
                                 ["method", "route"], registry=self.registry)
        self.registry.register(_StoreCollector(counts))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Record one request."""
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
