"""Where a task's source and business tables live: in the warehouse DuckDB file (the default) or
in a PostgreSQL schema ($BATCH_ASSETS_TABLES_URL, see postgres.py).

The stages work in DuckDB either way: from PostgreSQL, a partition's source rows stream into a
DuckDB temp table (one read-only SELECT, COPY out), and the answers an apply writes stream back
(COPY in, one upsert keyed by business id and output version)."""
