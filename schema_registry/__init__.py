"""schema_registry: the central schema service (not built yet; see the project issues)."""
