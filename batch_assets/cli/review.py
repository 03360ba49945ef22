"""`batch-assets review list [<task>] [--state S] [--limit N]` and `review approve|reject <custom_id>... [--reason R]`.

Applied answers sampled for review (the task's `review:` section) wait as pending. Approving keeps
them; rejecting revokes them (the value is removed from the business table or the earlier one put
back, recorded in ledger.revocation). Decided items keep their first decision; an answer revoked
while it waited left the queue (`revoked`) and cannot be approved.
"""

from __future__ import annotations

import sys

from batch_assets.cli import context
from batch_assets.cli.errors import CliError, UsageError
from batch_assets.cli.output import Field, render

LIST_FIELDS = [
    Field("task_id"),
    Field("custom_id"),
    Field("business_id"),
    Field("state"),
    Field("sampled_by"),
    Field("answer", cell=lambda v: "" if v is None else (v if len(v) <= 60 else v[:57] + "...")),
    Field("reason"),
    Field("attempt", in_table=False),
    Field("created_at", in_table=False),
    Field("decided_at", in_table=False),
]


TABLE_LIMIT = 50  # a table for a person; json and csv list everything unless --limit says otherwise


def cmd_review_list(args) -> int:
    from batch_assets.pipeline.govern.review import count_review_items, list_review_items

    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must be 0 (no limit) or more")
    limit = args.limit if args.limit is not None else (TABLE_LIMIT if args.format == "table" else 0)
    wh = context.warehouse(args)
    with context.connect(wh, read_only=True) as conn:
        conn.execute("SELECT 1 FROM ledger.review_item LIMIT 1")
    rows = list_review_items(wh, args.task, args.state, limit or None)
    render(rows, LIST_FIELDS, args.format)
    total = count_review_items(wh, args.task, args.state) if limit and len(rows) == limit else len(rows)
    shown = f"{len(rows):,} of {total:,} review item(s)"
    print(shown + ("; --limit N shows more, --limit 0 all" if total > len(rows) else ""), file=sys.stderr)
    return 0


def _decide(args, state: str) -> int:
    from batch_assets.pipeline.govern.review import ReviewError, decide
    from batch_assets.pipeline.govern.revoke import RevokeError

    wh = context.warehouse(args)
    try:
        result = decide(wh, args.custom_ids, state, args.reason)
    except (ReviewError, RevokeError) as exc:
        raise CliError(str(exc)) from None
    print(f"{state} {result.decided} item(s)")
    for custom_id in result.already_decided:
        print(f"{custom_id}: already decided, left as it was")
    if result.revoked is not None:
        print(result.revoked.describe())
    return 0


def cmd_review_approve(args) -> int:
    return _decide(args, "approved")


def cmd_review_reject(args) -> int:
    return _decide(args, "rejected")


def cmd_review(args) -> int:
    raise CliError("name a review command: list, approve or reject (see `batch-assets review --help`)", 2)
