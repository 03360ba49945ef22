"""LLM batch providers: one folder each behind the typed contract (`contract`), found by `registry`."""
