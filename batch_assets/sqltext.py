"""Quoting helpers for SQL built from task specs (identifiers and literals)."""


def sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def in_range_sql(column: str, lo: int | None, hi: int | None) -> str:
    """`column` in [lo, hi) (None: unbounded on that side), e.g. a chunk of item numbers."""
    bounds = ([f"{column} >= {int(lo)}"] if lo is not None else []) + (
        [f"{column} < {int(hi)}"] if hi is not None else []
    )
    return " AND ".join(bounds) or "true"


# A bound on the statement's size, not a tuned threshold: beyond this many partitions (the first
# sensor tick after an upgrade, say) one IN-list scan is used instead of a scan each.
MAX_PARTITION_SCANS = 16


def rows_of_partitions(table: str, columns: str, task_ids) -> str:
    """A parenthesized subquery: `columns` of `table`'s rows whose task_id is one of `task_ids`.

    One scan per partition with `task_id = '…'`: DuckDB filters an equality inside the scan and
    reads the other columns only for the matching rows, whereas an IN list is filtered after every
    row's columns were read (its zone maps cannot skip either: partitions' task_ids share their first
    8 bytes). So a query over a few partitions costs what their rows cost, not the ledger's history.
    More than MAX_PARTITION_SCANS partitions: one scan with an IN list. None: no rows."""
    ids = sorted(set(task_ids))
    if not ids:
        return f"(SELECT {columns} FROM {table} WHERE false)"
    if len(ids) > MAX_PARTITION_SCANS:
        return f"(SELECT {columns} FROM {table} WHERE task_id IN ({', '.join(sql_literal(t) for t in ids)}))"
    return (
        "(" + " UNION ALL ".join(f"SELECT {columns} FROM {table} WHERE task_id = {sql_literal(t)}" for t in ids) + ")"
    )
