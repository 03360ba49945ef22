"""`batch-assets export`: one task partition's results merged with its inputs, as CSV for spreadsheets."""

from __future__ import annotations

from pathlib import Path

from batch_assets.cli import context
from batch_assets.cli.errors import CliError


def cmd_export(args) -> int:
    from batch_assets.pipeline.report.export import export_results

    out = Path(args.out)
    if not out.parent.is_dir():  # a typo in the path must not become a new directory tree
        raise CliError(f"--out {out}: the directory {out.parent} does not exist; create it or choose another path")
    wh = context.warehouse(args)
    with context.connect(wh, read_only=True) as conn:
        known = context.known_task_ids(conn)
    if args.task_id not in known:
        near = [t for t in known if t.startswith(args.task_id)]
        hint = f" (did you mean {', '.join(near[:3])}?)" if near else "; list them with `batch-assets report`"
        raise CliError(f"no batch task {args.task_id!r}{hint}")
    n = export_results(wh, args.task_id, out)
    print(f"wrote {n} rows to {args.out} (UTF-8 with BOM)")
    return 0
