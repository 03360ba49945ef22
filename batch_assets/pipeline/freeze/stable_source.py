"""Whether a task's source query can be read more than once instead of copied.

The freeze reads its source several times (the gate's id check and scan, the rejects, the manifest
COPY). A copy of the source rows (`_raw_src`) makes those reads agree whatever the query does, but
a copy of a 10M-item source spills out of the memory pool and is read back. A view reads the same
rows each time when the query is a pure function of DuckDB tables: inside one transaction DuckDB
reads every table as of the transaction's start, and the warehouse file (and any attached DuckDB
file) cannot be written by another process while this one holds it.

So `view_sql` accepts a query only when its parsed form (`json_serialize_sql`) is made of plain
parts, and returns it with `$partition_date` written in as a literal (a view holds no parameters).
Anything it does not know, it refuses, and the freeze copies the source:
* every table it names is a DuckDB base table outside the ledger schema (not a view, whose text
  is not checked; not a table function such as `read_csv`, whose files may change; not another
  engine's catalog);
* every function is a scalar function DuckDB marks as consistent (not `random()`, `uuid()` or
  `nextval()`; `now()`, consistent within a transaction, is accepted); no aggregates (`string_agg`
  concatenates in thread order), no window functions, no macros, no lambdas;
* no LIMIT, SAMPLE or DISTINCT ON (which rows they keep is not fixed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import duckdb

_EXPRESSIONS = {
    "COLUMN_REF",
    "CONSTANT",
    "COMPARISON",
    "CONJUNCTION",
    "OPERATOR",
    "CAST",
    "CASE",
    "BETWEEN",
    "STAR",
    "PARAMETER",
    "COLLATE",
    "SUBQUERY",
    "FUNCTION",
    "POSITIONAL_REFERENCE",
    "TYPE",
}
_TABLE_REFS = {"BASE_TABLE", "JOIN", "SUBQUERY", "EMPTY", "EXPRESSION_LIST"}
_QUERY_NODES = {"SELECT_NODE", "SET_OPERATION_NODE"}
_MODIFIERS = {"ORDER_MODIFIER", "DISTINCT_MODIFIER"}
_STABLE = ("CONSISTENT", "CONSISTENT_WITHIN_QUERY")
LEDGER_SCHEMA = "ledger"


class _Refused(Exception):
    """The query has a part view_sql does not accept (the message says which)."""


def view_sql(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, str]) -> str | None:
    """The query with its parameters written in, for a view, when reading it twice gives the same
    rows (see the module); None when it must be copied. `why_not` says why."""
    try:
        return _view_sql(conn, sql, params)
    except _Refused:
        return None


def why_not(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, str]) -> str | None:
    """Why `view_sql` refuses the query (None when it accepts it)."""
    try:
        _view_sql(conn, sql, params)
    except _Refused as exc:
        return str(exc)
    return None


def _view_sql(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, str]) -> str:
    tree = json.loads(conn.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])
    if tree.get("error"):
        raise _Refused(f"DuckDB could not serialize the query: {tree.get('error_message')}")
    if len(tree["statements"]) != 1:
        raise _Refused("the source is more than one statement")
    ctes = {entry["key"] for node in _dicts(tree) for entry in (node.get("cte_map") or {}).get("map", [])}
    functions: set[str] = set()
    tables: set[tuple[str, str, str]] = set()
    for node in _dicts(tree):
        _check_node(node, ctes, functions, tables)
    _check_functions(conn, functions)
    _check_tables(conn, tables)
    # Listed first, then changed: each parameter node becomes a string literal in place (its
    # position fields are kept).
    for node in [n for n in _dicts(tree) if n.get("class") == "PARAMETER"]:
        name = node.pop("identifier")
        if name not in params:
            raise _Refused(f"the parameter ${name} has no value")
        node.update(
            {"class": "CONSTANT", "type": "VALUE_CONSTANT", "literal": {"kind": "STRING", "text": str(params[name])}}
        )
    return conn.execute("SELECT json_deserialize_sql(?)", [json.dumps(tree)]).fetchone()[0]


def _dicts(value) -> Iterator[dict]:
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _dicts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _dicts(v)


def _check_node(node: dict, ctes: set[str], functions: set[str], tables: set[tuple[str, str, str]]) -> None:
    kind, cls = node.get("type"), node.get("class")
    if cls is not None:
        _check_expression(node, cls, functions)
    elif isinstance(kind, str):
        _check_clause(node, kind)
        if kind not in _QUERY_NODES and "alias" in node and "query_location" in node:  # a table reference
            _check_table_ref(node, kind, ctes, tables)


def _check_expression(node: dict, cls: str, functions: set[str]) -> None:
    if cls not in _EXPRESSIONS:
        raise _Refused(f"the query uses {cls.lower()} expressions")
    if cls == "FUNCTION":
        functions.add(node["function_name"])


def _check_clause(node: dict, kind: str) -> None:
    """Refuse query nodes, modifiers and samples whose rows are not fixed by the query."""
    if kind.endswith("_NODE") and kind not in _QUERY_NODES:
        raise _Refused(f"the query uses {kind.lower()}")
    if kind.endswith("_MODIFIER"):
        if kind not in _MODIFIERS or (kind == "DISTINCT_MODIFIER" and node.get("distinct_on_targets")):
            raise _Refused(f"the query uses {kind.removesuffix('_MODIFIER').lower().replace('_', ' ')}")
    if node.get("sample"):
        raise _Refused("the query samples rows")


def _check_table_ref(node: dict, kind: str, ctes: set[str], tables: set[tuple[str, str, str]]) -> None:
    """Refuse table references other than plain tables and subqueries; collect the tables named."""
    if kind not in _TABLE_REFS:
        raise _Refused(f"the query reads a {kind.lower().replace('_', ' ')}")
    if kind == "BASE_TABLE":
        if node.get("at_clause"):
            raise _Refused("the query reads a table AT a version")
        name = (node.get("catalog_name") or "", node.get("schema_name") or "", node["table_name"])
        if not (name[0] == name[1] == "" and name[2] in ctes):
            tables.add(name)


def _check_functions(conn: duckdb.DuckDBPyConnection, names: set[str]) -> None:
    if not names:
        return
    rows = conn.execute(
        """
        SELECT n.name,
               bool_and(f.function_type = 'scalar' AND f.stability IN (SELECT unnest(?))) AND count(f.function_name) > 0
        FROM (SELECT unnest(?) AS name) n LEFT JOIN duckdb_functions() f ON f.function_name = lower(n.name)
        GROUP BY n.name
    """,
        [list(_STABLE), sorted(names)],
    ).fetchall()
    refused = sorted(name for name, ok in rows if not ok)
    if refused:
        raise _Refused(f"the query calls {', '.join(refused)} (not a consistent scalar function)")


def _check_tables(conn: duckdb.DuckDBPyConnection, names: set[tuple[str, str, str]]) -> None:
    for catalog, schema, table in sorted(names):
        # Every object the name could mean: a view or another engine's table with the same name
        # makes it ambiguous, and it is refused rather than resolved here.
        found = conn.execute(
            """
            SELECT kind, database_name, schema_name, db_type FROM (
                SELECT 'table' AS kind, t.database_name, t.schema_name, d.type AS db_type, t.table_name AS name
                FROM duckdb_tables() t JOIN duckdb_databases() d USING (database_name)
                UNION ALL
                SELECT 'view', v.database_name, v.schema_name, NULL, v.view_name
                FROM duckdb_views() v WHERE NOT v.internal)
            WHERE lower(name) = lower(?) AND (? = '' OR lower(schema_name) = lower(?))
              AND (? = '' OR lower(database_name) = lower(?))
        """,
            [table, schema, schema, catalog, catalog],
        ).fetchall()
        shown = ".".join(p for p in (catalog, schema, table) if p)
        if not found:
            raise _Refused(f"{shown} is not a table")
        for kind, _db, sch, db_type in found:
            if kind != "table" or db_type != "duckdb":
                raise _Refused(f"{shown} is (or could be) a {kind if kind != 'table' else db_type + ' table'}")
            if sch.lower() == LEDGER_SCHEMA:
                raise _Refused(f"{shown} is a ledger table (the freeze writes the ledger)")
