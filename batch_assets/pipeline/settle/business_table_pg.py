"""The business table when it lives in PostgreSQL: its creation, the rows an apply finds there, the
upsert that writes answers, and a revoke's restores and removals.

The apply and the revoke decide in DuckDB, as for a business table in the warehouse file; only the
rows they read and write cross over (task_tables.postgres). The business write and the ledger rows
that record it commit in two databases, so the order is what makes a crash harmless: the rows an
answer overwrites are recorded in the ledger first, then the business rows commit in PostgreSQL,
then ledger.applied_result. A run after a crash between the two finds its own rows (same custom_id
and input hash): the upsert changes nothing and the ledger catches up.
"""

from __future__ import annotations

import duckdb

from batch_assets.pipeline.settle.business_table import column_type, value_sql
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import quote_ident
from batch_assets.task_tables.postgres import PgTables, copy_query_into, copy_rows_into, create_if_missing, pg_type, run

_LEDGER_COLUMNS = ("output_version", "custom_id", "input_hash", "task_id", "applied_at")


class BusinessTableChanged(RuntimeError):
    """The business table changed under an apply or a revoke (another writer): nothing was written."""


def _lock(pg, target: str) -> None:
    # One writer of the table at a time from the check to the commit: what was read stays true.
    pg.execute(f"LOCK TABLE {target} IN SHARE ROW EXCLUSIVE MODE")


def ensure_business_table(pg, tables: PgTables, task: ResolvedTask) -> str:
    """Create the task's business table in the tables' schema when missing; returns its qualified name."""
    apply = task.spec.apply
    target = tables.table(apply.table)
    cols = ", ".join(f"{quote_ident(c)} {pg_type(column_type(task, f))}" for c, f in apply.columns.items())
    create_if_missing(  # two partitions' first applies may create it at the same moment
        pg,
        f"CREATE SCHEMA IF NOT EXISTS {quote_ident(tables.schema)}",
        f"""CREATE TABLE IF NOT EXISTS {target} (
            {quote_ident(apply.key)} text NOT NULL,
            {cols},
            output_version text NOT NULL,
            custom_id text NOT NULL,
            input_hash text NOT NULL,
            task_id text NOT NULL,
            applied_at timestamp NOT NULL,
            PRIMARY KEY ({quote_ident(apply.key)}, output_version)
        )""",
    )
    return target


def current_rows(
    tables: PgTables, duck: duckdb.DuckDBPyConnection, task: ResolvedTask, keys_sql: str, into: str
) -> int:
    """DuckDB temp table `into` (business_id, output_version, custom_id, row JSON): the business rows
    now held for the (business_id, output_version) pairs DuckDB query `keys_sql` returns, each whole
    row as JSON (what a revoke puts back). Returns how many."""
    apply = task.spec.apply
    key = quote_ident(apply.key)
    with tables.session(read_only=False) as pg:
        target = ensure_business_table(pg, tables, task)
        copy_rows_into(pg, duck, f"SELECT DISTINCT business_id, output_version FROM ({keys_sql}) AS _k", "_keys")
        return copy_query_into(
            pg,
            duck,
            into,
            f"""SELECT b.{key} AS business_id, b.output_version, b.custom_id, row_to_json(b)::jsonb AS row
                FROM {target} b JOIN _keys k ON k.business_id = b.{key} AND k.output_version = b.output_version""",
        )


def upsert_answers(tables: PgTables, duck: duckdb.DuckDBPyConnection, task: ResolvedTask, rows_sql: str) -> int:
    """Write the answers of DuckDB query `rows_sql` — the business columns named as the table's, plus
    output_version, custom_id, input_hash, task_id, applied_at and `expected_custom_id` (the answer
    the row now holds as the apply found it, NULL when it found none) — in one transaction.

    A row whose answer is already written (same custom_id and input hash: a re-run) is left as it
    is. A row that holds neither that answer nor the one the apply found (another writer came in
    between) stops the whole write: BusinessTableChanged, nothing written. Returns the rows written."""
    apply = task.spec.apply
    key = quote_ident(apply.key)
    names = [apply.key, *apply.columns, *_LEDGER_COLUMNS]
    cols = ", ".join(quote_ident(n) for n in names)
    updates = ", ".join(f"{quote_ident(n)} = EXCLUDED.{quote_ident(n)}" for n in names[1:])
    with tables.session(read_only=False) as pg:
        target = ensure_business_table(pg, tables, task)
        copy_rows_into(pg, duck, rows_sql, "_answers")
        _lock(pg, target)
        changed = run(
            pg,
            f"""SELECT count(*) FROM _answers a
                LEFT JOIN {target} b ON b.{key} = a.{key} AND b.output_version = a.output_version
                WHERE b.custom_id IS DISTINCT FROM a.custom_id AND b.custom_id IS DISTINCT FROM a.expected_custom_id""",
        )[0][0]
        if changed:
            raise BusinessTableChanged(
                f"{changed} row(s) of {apply.table} changed while the answers were being applied "
                "(another apply or revoke): nothing of this chunk was written; run the apply again"
            )
        cur = pg.execute(f"""
            INSERT INTO {target} ({cols}) SELECT {cols} FROM _answers
            ON CONFLICT ({key}, output_version) DO UPDATE SET {updates}
            WHERE ({target}.custom_id, {target}.input_hash) IS DISTINCT FROM (EXCLUDED.custom_id, EXCLUDED.input_hash)
        """)
        return max(cur.rowcount, 0)


def revoke_rows(tables: PgTables, duck: duckdb.DuckDBPyConnection, task: ResolvedTask, plan: str) -> None:
    """Carry out a revoke's plan (DuckDB table `plan`: custom_id, business_id, output_version, action,
    previous_row) on the business table: a 'restored' row gets the earlier answer back, a 'removed'
    row is deleted, each only while it still holds the answer being revoked."""
    apply = task.spec.apply
    key = quote_ident(apply.key)
    values = ", ".join(f"{value_sql(task, f, 'previous_row', c)} AS {quote_ident(c)}" for c, f in apply.columns.items())
    restored = f"""
        SELECT custom_id AS revoked_custom_id, business_id, output_version, {values},
               previous_row ->> '$.custom_id' AS custom_id, previous_row ->> '$.input_hash' AS input_hash,
               previous_row ->> '$.task_id' AS task_id, CAST(previous_row ->> '$.applied_at' AS TIMESTAMP) AS applied_at
        FROM {plan} WHERE action = 'restored'"""
    removed = f"SELECT custom_id, business_id, output_version FROM {plan} WHERE action = 'removed'"
    sets = ", ".join(f"{quote_ident(c)} = r.{quote_ident(c)}" for c in [*apply.columns, *_LEDGER_COLUMNS[1:]])
    with tables.session(read_only=False) as pg:
        target = ensure_business_table(pg, tables, task)
        copy_rows_into(pg, duck, restored, "_restored")
        copy_rows_into(pg, duck, removed, "_removed")
        _lock(pg, target)
        pg.execute(f"""
            UPDATE {target} b SET {sets} FROM _restored r
            WHERE b.{key} = r.business_id AND b.output_version = r.output_version AND b.custom_id = r.revoked_custom_id
        """)
        pg.execute(f"""
            DELETE FROM {target} b USING _removed r
            WHERE b.{key} = r.business_id AND b.output_version = r.output_version AND b.custom_id = r.custom_id
        """)


def table_counts(tables: PgTables, task: ResolvedTask, task_ids: list[str] | None = None) -> tuple[int, int]:
    """(rows of the business table, rows the given task partitions wrote) for its metadata."""
    with tables.session(read_only=True) as pg:
        exists = run(pg, "SELECT to_regclass($t) IS NOT NULL", {"t": tables.table(task.spec.apply.table)})[0][0]
        if not exists:
            return 0, 0
        target = tables.table(task.spec.apply.table)
        total, mine = run(
            pg,
            f"SELECT count(*), count(*) FILTER (WHERE task_id = ANY($ids)) FROM {target}",
            {"ids": list(task_ids or [])},
        )[0]
        return int(total), int(mine)
