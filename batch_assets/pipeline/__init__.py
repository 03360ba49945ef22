"""The pipeline, Dagster-free, by phase: freeze -> send -> collect -> settle, with govern (what may be
sent, what it costs, what is kept) and report beside them. Each stage is set-based DuckDB SQL over the
ledger; only batch_assets.ledger writes ledger tables."""
