"""The pipeline stages, Dagster-free, in order: manifest -> shards -> submit -> poll -> ingest ->
parse -> apply, plus reconcile. Each stage is set-based DuckDB SQL over the ledger."""
