"""Reading a task's source for a partition: the source query, passed through the sensitive-data
policy, as the temp views the freeze (and apply's stale guard) read (`_raw_src`, `_src`)."""

from __future__ import annotations

import re

import duckdb

from batch_assets.pipeline.errors import SourceQueryError
from batch_assets.pipeline.freeze import stable_source
from batch_assets.pipeline.freeze.render import blank_columns_sql, prompt_sql
from batch_assets.pipeline.govern.sensitive import GATED_TABLE, GateCounts, blocked_reason_sql, drop_gate, gate_source
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.task_tables.postgres import PgTables, TablesError

PG_SOURCE = "_pg_source"  # the partition's source rows read from PostgreSQL, once per stage


def load_source(
    conn: duckdb.DuckDBPyConnection, task: ResolvedTask, partition_date: str, tables: PgTables | None = None
) -> GateCounts:
    """The source query as `_raw_src` (a view when reading it again gives the same rows, see
    query_source), passed through the task's sensitive-data policy (`pipeline.govern.sensitive`: redacted
    columns, block reasons, the local `_pii_map`); `_src` (business_id, prompt_text, blank_columns,
    blocked_reason, source_fp) is a temp VIEW over the gated rows, so the rendered prompts are
    computed where used, never stored twice. Drop all with drop_source(). Run it and every read of
    `_src` in one transaction (freeze_manifest does): a view's reads agree only within one.
    `tables`: the source tables are in PostgreSQL (see source_relation)."""
    return gate_loaded_source(conn, task, query_source(conn, task, partition_date, reread=True, tables=tables))


def source_subquery(task: ResolvedTask) -> str:
    """The source query as a parenthesized subquery (a trailing `;` and line comments removed; the
    closing parenthesis on its own line so a last `-- comment` cannot swallow it)."""
    text = re.sub(r";\s*(--[^\n]*\s*)*$", "", task.spec.source.sql.strip())
    return f"({text}\n)"


def source_relation(
    conn: duckdb.DuckDBPyConnection, task: ResolvedTask, partition_date: str, tables: PgTables | None
) -> tuple[str, dict]:
    """The source as a relation DuckDB SQL can read, with the parameters it needs: the query as a
    subquery when its tables are in DuckDB; when they are in PostgreSQL, temp table `_pg_source`,
    filled by running the query there once (one read-only SELECT for all the stage's reads of it;
    dropped by drop_source)."""
    if tables is None:
        return source_subquery(task), {"partition_date": partition_date}
    exists = conn.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'temp' AND table_name = ?", [PG_SOURCE]
    ).fetchall()[0][0]
    if not exists:
        try:
            tables.read_query(conn, PG_SOURCE, task.spec.source.sql, {"partition_date": partition_date})
        except TablesError:
            raise
        except Exception as exc:  # psycopg's errors: the query's own message, its first line
            raise SourceQueryError(
                f"task {task.spec.name!r}: the source query (source.sql in {task.yaml_path}) failed on the "
                f"PostgreSQL tables at {tables.where} for partition {partition_date}: {str(exc).splitlines()[0]}"
            ) from None
    return PG_SOURCE, {}


def query_source(
    conn: duckdb.DuckDBPyConnection,
    task: ResolvedTask,
    partition_date: str,
    where: str | None = None,
    reread: bool = False,
    tables: PgTables | None = None,
) -> set[str]:
    """The source query into temp table `_raw_src` (checked for the columns the task needs); returns
    its columns. `where`: only the source rows matching this condition (over the source's columns).
    `reread`: the caller only reads the source (it writes no table the query may read), so when the
    query is a pure function of DuckDB tables (`stable_source.view_sql`) `_raw_src` is a view over
    it, not a copy: a copy of a large source spills out of the memory pool and is read back.
    `tables`: the source tables are in PostgreSQL; `_raw_src` is then read from `_pg_source`."""
    spec = task.spec
    if tables is not None:
        relation, params = source_relation(conn, task, partition_date, tables)
        query = f"SELECT * FROM {relation} AS _q" + (f" WHERE {where}" if where is not None else "")
    elif where is None:
        query, params = spec.source.sql, {"partition_date": partition_date}
    else:
        query, params = f"SELECT * FROM {source_subquery(task)} AS _q WHERE {where}", {"partition_date": partition_date}
    _drop_raw_source(conn)
    try:
        view = stable_source.view_sql(conn, query, params) if reread and tables is None else None
        if view is not None:
            conn.execute(f"CREATE TEMP VIEW _raw_src AS {view}")
        else:
            conn.execute(f"CREATE TEMP TABLE _raw_src AS {query}", params)
    except duckdb.Error as exc:
        raise SourceQueryError(
            f"task {spec.name!r}: the source query (source.sql in {task.yaml_path}) failed for partition "
            f"{partition_date}: {exc}"
        ) from exc
    columns = {row[0] for row in conn.execute("DESCRIBE _raw_src").fetchall()}
    needed = {spec.source.business_id, *task.template_columns, *(spec.source.required_columns or [])}
    missing = sorted(needed - columns)
    if missing:
        raise SourceQueryError(
            f"task {spec.name!r}: the source query returns no column(s) {missing} (needed by source.business_id, "
            f"the prompt template or source.required_columns in {task.yaml_path}); it returns {sorted(columns)}. "
            "Fix: select those columns or correct the names."
        )
    return columns


def gate_loaded_source(conn: duckdb.DuckDBPyConnection, task: ResolvedTask, columns: set[str]) -> GateCounts:
    """The gate over the rows now in `_raw_src`, and the `_src` view (see load_source)."""
    counts = gate_source(conn, task, columns)
    conn.execute(f"""
        CREATE OR REPLACE TEMP VIEW _src AS
        -- The id exactly as the source holds it: 'A' and ' A ' are two records, and a trimmed id
        -- would be a key the business table does not have. The prompt is rendered from the
        -- redacted columns: what is hashed and sent holds placeholders, never the values.
        SELECT __bid AS business_id,
               {prompt_sql(task)} AS prompt_text,
               {blank_columns_sql(task)} AS blank_columns,
               {blocked_reason_sql()} AS blocked_reason,
               __fp AS source_fp
        FROM {GATED_TABLE}
    """)
    return counts


def _raw_source_kind(conn: duckdb.DuckDBPyConnection) -> str | None:
    """'VIEW' or 'LOCAL TEMPORARY' (a copy): what `_raw_src` is now; None when there is none."""
    return conn.execute(
        "SELECT any_value(table_type) FROM information_schema.tables "
        "WHERE table_catalog = 'temp' AND table_name = '_raw_src'"
    ).fetchone()[0]


def source_read(
    conn: duckdb.DuckDBPyConnection, task: ResolvedTask, partition_date: str, tables: PgTables | None = None
) -> str:
    """ManifestSummary.source_read for the `_raw_src` loaded now: 'view', or 'copy: ' and why."""
    if tables is not None:
        return f"copy: read from PostgreSQL at {tables.where}"
    if _raw_source_kind(conn) == "VIEW":
        return "view"
    why = stable_source.why_not(conn, task.spec.source.sql, {"partition_date": partition_date})
    return f"copy: {why or 'not read as a view'}"


def _drop_raw_source(conn: duckdb.DuckDBPyConnection) -> None:
    kind = _raw_source_kind(conn)
    if kind is not None:
        conn.execute(f"DROP {'VIEW' if kind == 'VIEW' else 'TABLE'} _raw_src")


def drop_source(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute("DROP VIEW IF EXISTS _src")
    conn.execute(f"DROP TABLE IF EXISTS {PG_SOURCE}")
    _drop_raw_source(conn)
    drop_gate(conn)
