"""Freeze: a partition's source rows become the frozen input manifest (read, gated, rendered, hashed)."""
