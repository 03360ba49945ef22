"""Test helpers: a seeded warehouse's source table moved into PostgreSQL; the environment of runs
whose tables, ledger and files are off the machine."""

from __future__ import annotations

import dataclasses

from batch_assets.ledger.warehouse import Warehouse
from batch_assets.task_tables.postgres import PgTables


def tables_in_postgres(wh: Warehouse, postgres_url: str, schema: str = "biz") -> Warehouse:
    """`wh` with the seeded support_tickets moved from its file to `schema` in PostgreSQL."""
    tables = PgTables(postgres_url, schema=schema)
    with wh.connect() as conn:
        tables.publish(conn, "support_tickets", "SELECT * FROM support_tickets")
        conn.execute("DROP TABLE support_tickets")  # nothing left to read by mistake
    return dataclasses.replace(wh, tables=tables)


def demo_env_on_postgres(monkeypatch, postgres_url: str) -> None:
    """The environment `make services` prints, for a demo run in this test's process: the tables
    and Dagster's runs in PostgreSQL, the emulator for every provider."""
    for name in ("BATCH_ASSETS_DATABASE", "BATCH_ASSETS_DATA_DIR", "BATCH_ASSETS_EMULATOR_URL", "DAGSTER_HOME"):
        monkeypatch.setenv(name, "")  # the demo points its own process at its warehouse: restored after
    monkeypatch.setenv("BATCH_ASSETS_PROVIDER_MODE", "emulator")
    for provider in ("OPENAI", "ANTHROPIC", "GEMINI", "DASHSCOPE"):
        monkeypatch.delenv(f"BATCH_ASSETS_{provider}_MODE", raising=False)
        monkeypatch.delenv(f"{provider}_BASE_URL", raising=False)
    monkeypatch.setenv("BATCH_ASSETS_TABLES_URL", postgres_url)
    monkeypatch.setenv("BATCH_ASSETS_TABLES_SCHEMA", "warehouse")
    monkeypatch.setenv("BATCH_ASSETS_DAGSTER_PG_URL", postgres_url.replace("postgresql://", "postgresql+psycopg2://"))


def storage_env(monkeypatch, storage) -> None:
    """The object storage settings `make services` prints, pointing at `storage` (an ObjectStorage)."""
    monkeypatch.setenv("BATCH_ASSETS_STORAGE_URL", f"s3://{storage.bucket}/{storage.prefix}")
    monkeypatch.setenv("BATCH_ASSETS_S3_ENDPOINT", storage.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", storage.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", storage.secret_key)
    monkeypatch.setenv("AWS_REGION", storage.region)
