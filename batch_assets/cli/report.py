"""`batch-assets report`: the reconciliation of every (or the chosen) task partition.

Exit status 1 when any partition does not balance; each broken equation is spelled out after the
table (on stderr with --format json/csv, so stdout stays machine-readable).
"""

from __future__ import annotations

import sys

from batch_assets.cli import context
from batch_assets.cli.output import Field, render

def fields() -> list[Field]:
    """The report's columns: the reconciliation table's, then `problems` (JSON/CSV only)."""
    from batch_assets.pipeline.reconcile import FAILURE_CLASSES
    from batch_assets.reporting import SHORT_CLASS

    return [
        Field("task_id"),
        Field("manifest_items", header="items"),
        Field("source_rejects", header="rejected"),
        Field("quarantined", header="quarant"),
        Field("shard_lines", header="lines"),
        Field("submitted_lines", header="submitted"),
        Field("succeeded"),
        *(Field(f"failed_{cls}", header=f"fail:{SHORT_CLASS[cls]}") for cls in FAILURE_CLASSES),
        Field("expired"),
        Field("canceled"),
        Field("missing"),
        Field("applied"),
        Field("stale"),
        Field("failed_to_parse", header="unparsed"),
        Field("balanced", cell=lambda ok: "yes" if ok else "NO"),
        Field("problems", in_table=False),
    ]


def record(rec) -> dict:
    """One partition's Reconciliation as a record of fields()."""
    from batch_assets.pipeline.reconcile import FAILURE_CLASSES

    problems = rec.problems()
    return {"task_id": rec.task_id, "manifest_items": rec.manifest_items, "source_rejects": rec.source_rejects,
            "quarantined": rec.quarantined, "shard_lines": rec.shard_lines, "submitted_lines": rec.submitted_lines,
            "succeeded": rec.succeeded, **{f"failed_{cls}": rec.failed.get(cls, 0) for cls in FAILURE_CLASSES},
            "expired": rec.expired, "canceled": rec.canceled, "missing": rec.missing, "applied": rec.applied,
            "stale": rec.stale, "failed_to_parse": rec.failed_to_parse, "balanced": not problems,
            "problems": problems}

def cmd_report(args) -> int:
    from batch_assets.pipeline.reconcile import reconcile_conn

    with context.connect(context.warehouse(args), read_only=True) as conn:
        task_ids = context.match_task_ids(context.known_task_ids(conn), args.task)
        records = [record(reconcile_conn(conn, t)) for t in task_ids]
    render(records, fields(), args.format)
    notes = sys.stdout if args.format == "table" else sys.stderr
    for r in records:
        for problem in r["problems"]:
            print(f"UNBALANCED {r['task_id']}: {problem}", file=notes)
    return 1 if any(not r["balanced"] for r in records) else 0
