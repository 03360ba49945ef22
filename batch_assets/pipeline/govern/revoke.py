"""Revoke applied answers: the value is taken out of the business table, or the earlier one put back.

Which answers: every applied item of a partition (`task_id`), chosen custom_ids, or for a task's
business ids the answer applied last for each key. Per answer, set-based:

- the business table still holds this answer and the apply that wrote it had overwritten an earlier
  answer (kept in `ledger.applied_previous`) -> the nearest earlier answer that is not revoked is put
  back (`restored`): a revoked one is walked past to the row it had overwritten in turn;
- it still holds this answer and there was nothing earlier that still stands -> the row is deleted
  (`removed`);
- the table holds another answer for the key by now (or none) -> nothing to change (`superseded`).

Each revoke is recorded in `ledger.revocation` in the same transaction as the business table change,
and a revoked answer still waiting for review leaves the queue (its review item becomes `revoked`);
an answer already revoked is left alone, so revoking twice changes nothing. The reconciliation
counts revoked items as their own final outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import duckdb

from batch_assets.ledger.control_db import registered
from batch_assets.ledger.review import close_revoked_reviews, insert_revocations
from batch_assets.ledger.tasks import task_rows
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.settle import business_table_pg
from batch_assets.pipeline.settle.business_table import value_sql
from batch_assets.spec.resolve import ResolvedTask, load_tasks
from batch_assets.sqltext import quote_ident, sql_literal
from batch_assets.task_tables.postgres import PgTables

# How many revoked answers in a row a revoke walks back over to find the row to put back (a bound
# against a malformed chain, far beyond any real history of one key).
MAX_WALK_BACK = 1000


class RevokeError(ValueError):
    """The selection names nothing that can be revoked (unknown ids, or no applied answer)."""


@dataclass
class RevokeSummary:
    requested: int = 0
    already_revoked: int = 0
    not_found: list[str] = field(default_factory=list)  # custom_ids named that have no applied answer
    by_action: dict[str, int] = field(default_factory=dict)  # removed | restored | superseded

    @property
    def revoked(self) -> int:
        return sum(self.by_action.values())

    @property
    def to_revoke(self) -> int:
        """Answers named that are not revoked yet."""
        return self.requested - self.already_revoked

    def describe(self) -> str:
        done = ", ".join(f"{a} {n}" for a, n in sorted(self.by_action.items()) if n) or "none"
        missing = f"; no applied answer for: {', '.join(self.not_found)}" if self.not_found else ""
        return f"revoked {self.revoked} answer(s) ({done}); {self.already_revoked} already revoked{missing}"


def _select(
    conn: duckdb.DuckDBPyConnection,
    *,
    task_id: str | None,
    custom_ids: Sequence[str] | None,
    task_name: str | None,
    business_ids: Sequence[str] | None,
) -> None:
    """Temp table _sel (custom_id, task_id, task_name, business_id, target_table, output_version, revoked)
    of the applied answers the selection names."""
    if task_id is not None:
        where, params = "a.task_id = $v", {"v": task_id}
    elif custom_ids:
        where, params = "a.custom_id IN (SELECT unnest($v::VARCHAR[]))", {"v": list(custom_ids)}
    elif task_name and business_ids:
        where, params = (
            "t.task_name = $n AND a.business_id IN (SELECT unnest($v::VARCHAR[]))",
            {"n": task_name, "v": list(business_ids)},
        )
    else:
        raise RevokeError("name what to revoke: a task_id, custom_ids, or a task name with business ids")
    params.setdefault("n", None)
    # By business id: the answer applied last for the key (revoked or not), so a second revoke of the
    # same key finds it revoked and changes nothing instead of taking back the earlier one too.
    latest = (
        (
            "QUALIFY row_number() OVER (PARTITION BY t.task_name, a.business_id, a.output_version "
            "ORDER BY a.applied_at DESC, a.custom_id DESC) = 1"
        )
        if task_id is None and not custom_ids
        else ""
    )
    with registered(conn, "revoke_task", task_rows(conn, [task_id] if task_id is not None else None)):
        _select_into_temp(conn, where, latest, params)


def _select_into_temp(conn, where: str, latest: str, params: dict) -> None:
    conn.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _sel AS
        SELECT a.custom_id, a.task_id, t.task_name, a.business_id, a.target_table, a.output_version,
               r.custom_id IS NOT NULL AS revoked
        FROM ledger.applied_result a JOIN revoke_task t USING (task_id)
        LEFT JOIN ledger.revocation r USING (custom_id)
        WHERE a.outcome = 'applied' AND ($n IS NULL OR t.task_name = $n) AND {where}
        {latest}
    """,
        params,
    )


def revoke(
    wh: Warehouse,
    *,
    task_id: str | None = None,
    custom_ids: Sequence[str] | None = None,
    task_name: str | None = None,
    business_ids: Sequence[str] | None = None,
    reason: str | None = None,
    tasks: dict[str, ResolvedTask] | None = None,
    preview: bool = False,
) -> RevokeSummary:
    """Revoke the applied answers the selection names (see the module doc). Raises RevokeError when
    it names no applied answer at all. `preview`: only count what would be revoked (`to_revoke`)."""
    if task_id is None and wh.partition_stores and wh.partition is None:
        return _revoke_per_store(
            wh,
            custom_ids=custom_ids,
            task_name=task_name,
            business_ids=business_ids,
            reason=reason,
            tasks=tasks,
            preview=preview,
        )
    if task_id is not None:
        wh = wh.of(task_id)  # its partition's store
    summary = RevokeSummary()
    with wh.connect() as conn:
        _select(conn, task_id=task_id, custom_ids=custom_ids, task_name=task_name, business_ids=business_ids)
        summary.requested, summary.already_revoked = conn.execute(
            "SELECT count(*), count(*) FILTER (revoked) FROM _sel"
        ).fetchone()
        if custom_ids:
            found = {r[0] for r in conn.execute("SELECT custom_id FROM _sel").fetchall()}
            summary.not_found = [c for c in dict.fromkeys(custom_ids) if c not in found]
        if summary.requested == 0:
            conn.execute("DROP TABLE _sel")
            raise RevokeError(
                "no applied answer matches (see `batch-assets review list` or query "
                "ledger.applied_result); stale or failed items have nothing to revoke"
            )
        if preview:
            conn.execute("DROP TABLE _sel")
            return summary
        groups = conn.execute("""SELECT DISTINCT task_name, target_table, output_version FROM _sel
                                 WHERE NOT revoked ORDER BY ALL""").fetchall()
        # load_tasks().get raises a broken task's one-line error; the other tasks load beside it.
        tasks = tasks if tasks is not None else (load_tasks() if groups else {})
        for task_name_, table, version in groups:
            task = tasks.get(task_name_)
            if task is None:
                raise RevokeError(
                    f"task {task_name_!r} is no longer defined in batch_assets/defs/tasks: its "
                    "business table columns are unknown, nothing revoked"
                )
            for action, n in _revoke_group(conn, task, table, version, reason, wh.tables).items():
                summary.by_action[action] = summary.by_action.get(action, 0) + n
        conn.execute("DROP TABLE _sel")
    return summary


def _revoke_per_store(wh: Warehouse, *, custom_ids, task_name, business_ids, **how) -> RevokeSummary:
    """A selection across partitions with partition stores: the answers it names are found across the
    stores, then each partition's are revoked in its own store (under its lease)."""
    with wh.across() as conn:
        _select(conn, task_id=None, custom_ids=custom_ids, task_name=task_name, business_ids=business_ids)
        picked = conn.execute(
            "SELECT task_id, list(custom_id ORDER BY custom_id) FROM _sel GROUP BY 1 ORDER BY 1"
        ).fetchall()
        conn.execute("DROP TABLE _sel")
    if not picked:
        raise RevokeError(
            "no applied answer matches (see `batch-assets review list` or query "
            "ledger.applied_result); stale or failed items have nothing to revoke"
        )
    found = {c for _, ids in picked for c in ids}
    summary = RevokeSummary(not_found=[c for c in dict.fromkeys(custom_ids or ()) if c not in found])
    for task_id, ids in picked:
        part = revoke(wh.of(task_id), custom_ids=ids, **how)
        summary.requested += part.requested
        summary.already_revoked += part.already_revoked
        for action, n in part.by_action.items():
            summary.by_action[action] = summary.by_action.get(action, 0) + n
    return summary


def _revoke_group(
    conn: duckdb.DuckDBPyConnection,
    task: ResolvedTask,
    table: str,
    version: str,
    reason: str | None,
    tables: PgTables | None = None,
) -> dict[str, int]:
    apply = task.spec.apply
    target, key = f"main.{quote_ident(table)}", quote_ident(apply.key)
    params = {"n": task.name, "t": table, "v": version}
    if tables is not None:
        # The rows the business table holds now for these keys, read once from PostgreSQL.
        business_table_pg.current_rows(
            tables,
            conn,
            task,
            "SELECT business_id, output_version FROM _sel "
            f"WHERE NOT revoked AND task_name = {sql_literal(task.name)} AND target_table = {sql_literal(table)} "
            f"AND output_version = {sql_literal(version)}",
            "_pg_current",
        )
        target, key = "_pg_current", "business_id"
    # The row to put back is the nearest earlier answer that is not revoked (nor being revoked now):
    # walk back through the rows each apply overwrote, past revoked ones. (An answer revoked while a
    # newer one held the table changed nothing then; revoking the newer one later must skip it.)
    conn.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _plan AS
        WITH RECURSIVE gone AS (
            SELECT custom_id FROM ledger.revocation UNION SELECT custom_id FROM _sel
        ),
        back(custom_id, step, previous_custom_id, previous_row) AS (
            SELECT p.custom_id, 1, p.previous_custom_id, p.previous_row
            FROM ledger.applied_previous p
            WHERE p.custom_id IN (SELECT custom_id FROM _sel WHERE NOT revoked)
            UNION ALL
            SELECT b.custom_id, b.step + 1, p.previous_custom_id, p.previous_row
            FROM back b JOIN ledger.applied_previous p ON p.custom_id = b.previous_custom_id
            WHERE b.previous_custom_id IN (SELECT custom_id FROM gone) AND b.step < {MAX_WALK_BACK}
        ),
        kept AS (  -- per answer: the nearest earlier answer still standing
            SELECT custom_id, arg_min(previous_row, step) AS previous_row
            FROM back WHERE previous_custom_id NOT IN (SELECT custom_id FROM gone)
            GROUP BY custom_id
        )
        SELECT s.custom_id, s.task_id, s.business_id, s.target_table, s.output_version,
               CASE WHEN b.custom_id IS DISTINCT FROM s.custom_id THEN 'superseded'
                    WHEN k.previous_row IS NOT NULL THEN 'restored'
                    ELSE 'removed' END AS action,
               k.previous_row
        FROM _sel s
        LEFT JOIN {target} b ON b.{key} = s.business_id AND b.output_version = s.output_version
        LEFT JOIN kept k ON k.custom_id = s.custom_id
        WHERE NOT s.revoked AND s.task_name = $n AND s.target_table = $t AND s.output_version = $v
    """,
        params,
    )
    conn.execute("ALTER TABLE _plan ADD COLUMN restored_custom_id VARCHAR")
    conn.execute("UPDATE _plan SET restored_custom_id = previous_row ->> '$.custom_id' WHERE action = 'restored'")
    if tables is not None:
        conn.execute("DROP TABLE _pg_current")
        # The business table first: a crash before the ledger commit leaves the rows changed and the
        # answers unrevoked; a second revoke finds them superseded and records that.
        business_table_pg.revoke_rows(tables, conn, task, "_plan")
        with transaction(conn):
            insert_revocations(conn, "SELECT * FROM _plan", reason)
            close_revoked_reviews(conn, "SELECT custom_id FROM _plan", reason)
        counts = dict(conn.execute("SELECT action, count(*) FROM _plan GROUP BY 1").fetchall())
        conn.execute("DROP TABLE _plan")
        return counts
    sets = ", ".join(f"{quote_ident(c)} = {value_sql(task, f, 'p.previous_row', c)}" for c, f in apply.columns.items())
    with transaction(conn):
        conn.execute(f"""
            UPDATE {target} SET {sets}, custom_id = p.previous_row ->> '$.custom_id',
                input_hash = p.previous_row ->> '$.input_hash', task_id = p.previous_row ->> '$.task_id',
                applied_at = CAST(p.previous_row ->> '$.applied_at' AS TIMESTAMP)
            FROM _plan p
            WHERE p.action = 'restored' AND {target}.{key} = p.business_id
              AND {target}.output_version = p.output_version
        """)
        conn.execute(f"""
            DELETE FROM {target} WHERE EXISTS (
                SELECT 1 FROM _plan p WHERE p.action = 'removed' AND p.business_id = {target}.{key}
                  AND p.output_version = {target}.output_version AND p.custom_id = {target}.custom_id)
        """)
        insert_revocations(conn, "SELECT * FROM _plan", reason)
        close_revoked_reviews(conn, "SELECT custom_id FROM _plan", reason)  # they leave the review queue
    counts = dict(conn.execute("SELECT action, count(*) FROM _plan GROUP BY 1").fetchall())
    conn.execute("DROP TABLE _plan")
    return counts
