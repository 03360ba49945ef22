"""`batch-assets purge --older-than 30d [--dry-run] [--task NAME]`: local files of final partitions.

Shard files of task partitions that are final and finished longer ago than the age are deleted; raw
result files are gzip-compressed in place (the only verbatim copy of the provider's answers). Ledger
rows and hashes stay; running it again changes nothing. Also says how many jobs still have
provider-side files waiting to be deleted (retried by the next collect and the `retention` job).
Every path printed is absolute, with --dry-run and without: the file that is (or would be) touched.
"""

from __future__ import annotations

from batch_assets.cli import context


def cmd_purge(args) -> int:
    from batch_assets.ledger.tasks import task_ids
    from batch_assets.pipeline.govern.retention import pending_remote_deletions, purge_local

    wh = context.warehouse(args)
    with context.connect(wh, read_only=True) as conn:
        task_ids(conn)  # a warehouse without a ledger: one clear line
    summary = purge_local(wh, args.older_than, dry_run=args.dry_run, task_name=args.task)
    for path in summary.shards:
        print(f"{'would delete' if args.dry_run else 'deleted'} shard {path}")
    for path in summary.raw_files:
        archive = summary.archives.get(path) or ("a gzip object" if path.startswith("s3://") else f"{path}.gz")
        print(f"{'would compress' if args.dry_run else 'compressed'} raw file {path} -> {archive}")
    print(summary.describe())
    pending = pending_remote_deletions(wh, task_names=[args.task] if args.task else None)
    if pending:
        failed = sum(1 for p in pending if p["last_error"])
        print(
            f"{len(pending)} job(s) with provider-side files not deleted yet ({failed} after a failed try; "
            "retried by the next collect run and the retention job)"
        )
    return 0
