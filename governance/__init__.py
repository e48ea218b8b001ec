"""governance: the policy around tablecore's write path — the only package that wires tablecore, validators and the
schema registry together.

- :mod:`governance.gate` — the write-audit-publish gate: a batch is checked against the table's registered subject
  (:mod:`governance.schema_gate`), staged as an inflight instant, audited by a validators suite while no reader can
  see it, then published (with its audit record in the commit), published without its quarantined rows, or blocked.
- :mod:`governance.quarantine` and :mod:`governance.replay` — the rows a gate held back, with why and where they
  came from, and their re-submission through the same gate once fixed; :mod:`governance.wap` — review of staged
  commits a gate kept.
- :mod:`governance.pipeline`, :mod:`governance.sources`, :mod:`governance.checkpoint` — YAML pipelines (files,
  Confluent wire-format Avro, Kafka and incremental table sources, a gated write) that run exactly once, with their
  source position committed with the data; :mod:`governance.secondary_sources` (other tables joined, read as much
  as a batch needs), :mod:`governance.transforms` (chains of SQL and Python steps), :mod:`governance.backfill`
  (a date range recomputed beside the incremental run), :mod:`governance.column_update` (partial-row updates),
  :mod:`governance.pipeline_health` (lag and health, Prometheus metrics).
- :mod:`governance.audit` — audit records in the commit, a JSON-lines log and HTML reports, Prometheus counters.
- :mod:`governance.cli` — the ``lakegate`` command line; :mod:`governance.demo` — ``lakegate demo``.

Errors: one tree under :class:`governance.errors.GovernanceError`.
"""
