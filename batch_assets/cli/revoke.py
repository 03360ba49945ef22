"""`batch-assets revoke --task-id T | --custom-id C... | --task NAME --business-id B... --reason R [--yes]`.

Takes applied answers back: each value is removed from the business table, or the earlier answer
for the key and output version (kept at apply) is put back; recorded in ledger.revocation. The
reconciliation counts revoked items as their own final outcome. Revoking twice changes nothing.
A reason is required; the count is confirmed at a prompt, or by --yes where there is no terminal.
"""

from __future__ import annotations

import sys

from batch_assets.cli import context
from batch_assets.cli.errors import CliError, UsageError


def cmd_revoke(args) -> int:
    from batch_assets.pipeline.govern.revoke import RevokeError, revoke

    if (args.task is None) != (not args.business_ids):
        raise UsageError("--task NAME and --business-id B go together (or use --task-id T or --custom-id C)")
    if sum(bool(x) for x in (args.task_id, args.custom_ids, args.task)) != 1:
        raise UsageError(
            "name what to revoke with one of --task-id T, --custom-id C..., --task NAME --business-id B..."
        )
    if not (args.reason or "").strip():
        raise UsageError("name why with --reason R (kept with each revoked answer in ledger.revocation)")
    wh = context.warehouse(args)
    with context.connect(wh, read_only=True) as conn:
        conn.execute("SELECT 1 FROM ledger.revocation LIMIT 1")
    selection = {
        "task_id": args.task_id,
        "custom_ids": args.custom_ids,
        "task_name": args.task,
        "business_ids": args.business_ids,
        "reason": args.reason.strip(),
    }
    try:
        if not args.yes:
            _confirm(revoke(wh, preview=True, **selection))
        summary = revoke(wh, **selection)
    except RevokeError as exc:
        raise CliError(str(exc)) from None
    print(summary.describe())
    return 0


def _confirm(preview) -> None:
    """Asks on a terminal; elsewhere (a script, CI) refuses unless --yes was given."""
    if preview.to_revoke == 0:
        return  # nothing would change: no need to ask
    question = f"revoke {preview.to_revoke:,} applied answer(s) ({preview.already_revoked:,} already revoked)"
    if not sys.stdin.isatty():
        raise CliError(f"would {question}; add --yes to confirm (nothing revoked)")
    answer = input(f"{question}? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise CliError("not confirmed: nothing revoked")
