"""governance: write-audit-publish, pipelines and the ``lakegate`` CLI (the CLI and a tablecore demo so far)."""
