"""Table services: compaction, clean, clustering, rollback, savepoint/restore and archival (DESIGN §2.5)."""
