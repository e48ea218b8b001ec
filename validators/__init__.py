"""validators: structural, semantic-type and SQL checks (not built yet; see the project issues)."""
