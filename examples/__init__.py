"""Runnable examples of lakegate (each folder is self-contained; see its README)."""
