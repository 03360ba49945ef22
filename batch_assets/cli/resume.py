"""`batch-assets resume <provider> [--reason R]`: send to a paused provider account again.

A result saying the provider account cannot be used (DashScope's Arrearage, AccessDenied,
InvalidApiKey: billing, access or key) pauses that provider in the ledger (`ledger.account_pause`),
and the send gate refuses every send to it. After fixing the account, the operator resumes it: the
pause is lifted (kept, with when and by whom), the action is recorded in ledger.operator_action, and
the items the account error stopped (account_error, awaiting an operator) become due retries of every
partition of that provider, sent by the next submissions run (or `batch-assets retry <task_id>`).
An account that is not paused is left as it is.
"""

from __future__ import annotations

from batch_assets.cli import context


def cmd_resume(args) -> int:
    from batch_assets.ledger.accounts import resume_account
    from batch_assets.ledger.retries import reopen_decisions, set_final_status
    from batch_assets.ledger.tasks import task_ids
    from batch_assets.ledger.transaction import transaction
    from batch_assets.pipeline.settle.retry_ledger import FINAL_FAILED_ACTIONS, latest_attempt_sql
    from batch_assets.sqltext import sql_literal

    provider = args.provider
    wh = context.warehouse(args)
    who = "cli"
    with context.connect(wh, read_only=False) as conn, transaction(conn):
        pause = resume_account(conn, provider, who, args.reason)
        if pause is None:
            print(f"{provider}: the account is not paused; nothing to resume")
            return 0
        reopened: dict[str, int] = {}
        for task_id in task_ids(conn, provider=provider):
            tid = sql_literal(task_id)
            keys = f"""
                SELECT d.custom_id, d.attempt FROM ledger.retry_decision d
                JOIN ({latest_attempt_sql(tid)}) l USING (custom_id, attempt)
                WHERE d.task_id = {tid} AND d.error_class = 'account_error' AND d.action IN {FINAL_FAILED_ACTIONS}
                  AND d.custom_id NOT IN (SELECT custom_id FROM ledger.applied_result WHERE task_id = {tid})
            """
            n = reopen_decisions(conn, keys, reason=f"account resumed ({who})")
            if n:
                reopened[task_id] = n
                set_final_status(conn, task_id, None)  # work is pending again
    print(
        f"{provider}: resumed (paused since {pause['paused_at']:%Y-%m-%d %H:%M:%S} UTC by {pause['error_code']} "
        f"on {pause['task_id']})"
    )
    for task_id, n in reopened.items():
        print(f"{task_id}: {n} account_error item(s) due again; the next submissions run sends them")
    if not reopened:
        print(f"{provider}: no item waits on the account")
    return 0
