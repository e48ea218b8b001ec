"""Driver daily earnings: a derived table maintained from incremental pulls of a trips table (see README.md)."""
