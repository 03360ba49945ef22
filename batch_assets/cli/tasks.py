"""`batch-assets tasks`: every task folder under batch_assets/defs/tasks and whether it loads.

One record per folder, sorted: folder, name, status (ok | broken), provider, model; JSON and CSV also
carry file, field, error and fix. In a table the error of each broken folder follows as one line
(`BROKEN <folder>: <error>`, naming the file, the field and the fix): the line `report` prints and
the task's `<task>/task_spec` asset shows in Dagster. Needs no warehouse. Exit 0 when every task
loads, 1 when any is broken.
"""

from __future__ import annotations

import sys

from batch_assets.cli.errors import EXIT_RUNTIME
from batch_assets.cli.output import Field, render

FIELDS = [
    Field("folder"),
    Field("name"),
    Field("status"),
    Field("provider"),
    Field("model"),
    Field("file", in_table=False),
    Field("field", in_table=False),
    Field("error", in_table=False),  # in a table: one line per broken folder after it (never cut off)
    Field("fix", in_table=False),
]


def broken_line(broken) -> str:
    """A broken task folder as `tasks` and `report` print it."""
    return f"BROKEN {broken.folder}: {broken.error}"


def records(load) -> list[dict]:
    ok = [
        {
            "folder": t.yaml_path.parent.name,
            "name": t.name,
            "status": "ok",
            "provider": t.spec.provider,
            "model": t.spec.model,
            "file": str(t.yaml_path),
        }
        for t in load.tasks.values()
    ]
    broken = [
        {
            "folder": b.folder,
            "name": b.name,
            "status": "broken",
            "provider": b.provider,
            "model": b.model,
            "file": str(b.yaml_path),
            "field": b.field,
            "error": b.error,
            "fix": b.fix,
        }
        for b in load.broken
    ]
    return sorted(ok + broken, key=lambda r: r["folder"])


def cmd_tasks(args) -> int:
    from batch_assets.spec.resolve import load_tasks

    load = load_tasks()
    render(records(load), FIELDS, args.format)
    if args.format == "table":  # json/csv hold the error in their records
        for broken in load.broken:
            print(broken_line(broken), file=sys.stdout)
    return EXIT_RUNTIME if load.broken else 0
