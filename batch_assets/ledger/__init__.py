"""The DuckDB ledger: versioned schema, migrations and short-lived connections."""
