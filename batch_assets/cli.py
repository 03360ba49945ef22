"""`batch-assets`: the operator's command line (SPEC §10).

demo · dev · emulator · bench · seed · jobs · report · export · cancel · sql
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.resources import DEFAULT_EMULATOR_URL, default_resources


def _warehouse(args) -> Warehouse:
    db = args.database or os.environ.get("BATCH_ASSETS_DATABASE", "data/warehouse.duckdb")
    return Warehouse.at(db, os.environ.get("BATCH_ASSETS_DATA_DIR") or Path(db).parent)


def cmd_demo(args) -> int:
    from batch_assets.demo.runner import run_demo

    return run_demo(Path(args.data_dir), fresh=args.fresh)


def cmd_emulator(args, rest: list[str]) -> int:
    from batch_assets.emulator.server import main as emulator_main

    emulator_main(rest)
    return 0


def cmd_bench(args, rest: list[str]) -> int:
    from batch_assets.bench import main as bench_main

    return bench_main(rest) or 0


def cmd_seed(args) -> int:
    from batch_assets.demo import seed_kb_articles, seed_product_reviews, seed_support_tickets

    wh = _warehouse(args)
    with wh.connect() as conn:
        counts = {"support_tickets": seed_support_tickets(conn, days=args.days),
                  "kb_articles": seed_kb_articles(conn, days=args.days),
                  "product_reviews": seed_product_reviews(conn, days=args.days)}
    print(", ".join(f"{n} rows in {t}" for t, n in counts.items()) + f" ({wh.database})")
    return 0


def cmd_dev(args) -> int:
    """The emulator plus the Dagster UI and daemon (dg dev), both on 127.0.0.1."""
    from batch_assets.demo.runner import prepare_dagster_home

    data_dir = Path(args.data_dir).resolve()
    env = dict(os.environ)
    emulator_url = f"http://127.0.0.1:{args.emulator_port}"
    env.update({"DAGSTER_HOME": str(prepare_dagster_home(data_dir)), "BATCH_ASSETS_EMULATOR_URL": emulator_url,
                "BATCH_ASSETS_DATABASE": str(data_dir / "warehouse.duckdb"), "BATCH_ASSETS_DATA_DIR": str(data_dir)})
    bin_dir = Path(sys.executable).parent
    # dg wants to see the project's virtualenv as the active one.
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    emulator = subprocess.Popen([str(bin_dir / "batch-assets"), "emulator", "--port", str(args.emulator_port),
                                 "--state-dir", str(data_dir / "emulator")], env=env)
    print(f"emulator: {emulator_url}   Dagster UI: http://127.0.0.1:{args.port}", flush=True)
    try:
        return subprocess.call([str(bin_dir / "dg"), "dev", "--host", "127.0.0.1", "--port", str(args.port)], env=env)
    finally:
        emulator.send_signal(signal.SIGINT)
        emulator.wait(timeout=10)


def cmd_jobs(args) -> int:
    from batch_assets.reporting import format_table

    with _warehouse(args).connect(read_only=True) as conn:
        rows = fetch_dicts(conn, """
            SELECT job_key, provider, provider_batch_id, state, raw_status, request_total, request_completed,
                   request_failed, strftime(submitted_at, '%Y-%m-%d %H:%M:%S') AS submitted,
                   strftime(terminal_at, '%Y-%m-%d %H:%M:%S') AS terminal
            FROM ledger.provider_job
            WHERE (? IS NULL OR task_id LIKE ? || '%') ORDER BY created_at""", [args.task, args.task])
    headers = ["job_key", "provider", "batch_id", "state", "raw", "total", "done", "failed", "submitted", "terminal"]
    print(format_table(headers, [[("" if v is None else v) for v in r.values()] for r in rows]))
    return 0


def cmd_report(args) -> int:
    from batch_assets.pipeline.reconcile import reconcile_conn
    from batch_assets.reporting import reconciliation_table

    with _warehouse(args).connect(read_only=True) as conn:
        ids = [r[0] for r in conn.execute(
            "SELECT task_id FROM ledger.batch_task WHERE (? IS NULL OR task_id LIKE ? || '%') ORDER BY task_id",
            [args.task, args.task]).fetchall()]
        recs = [reconcile_conn(conn, i) for i in ids]
    print(reconciliation_table(recs))
    for r in recs:
        for p in r.problems():
            print(f"UNBALANCED {r.task_id}: {p}")
    return 1 if any(r.problems() for r in recs) else 0


def cmd_export(args) -> int:
    from batch_assets.pipeline.export import export_results

    n = export_results(_warehouse(args), args.task_id, Path(args.out))
    print(f"wrote {n} rows to {args.out} (UTF-8 with BOM)")
    return 0


def cmd_sql(args) -> int:
    """A read-only query over the warehouse (business tables and ledger.*)."""
    from batch_assets.reporting import format_table

    with _warehouse(args).connect(read_only=True) as conn:
        cur = conn.execute(args.query)
        headers = [d[0] for d in cur.description]
        rows = cur.fetchmany(args.limit)
    print(format_table(headers, [["NULL" if v is None else v for v in r] for r in rows]))
    return 0


def cmd_cancel(args) -> int:
    from batch_assets.pipeline.jobs import record_snapshot
    from batch_assets.providers.contract import JobRef

    wh = _warehouse(args)
    with wh.connect(read_only=True) as conn:
        jobs = fetch_dicts(conn, """
            SELECT job_key, provider, provider_batch_id FROM ledger.provider_job
            WHERE (job_key = ? OR task_id = ?) AND terminal_at IS NULL AND provider_batch_id IS NOT NULL""",
                           [args.target, args.target])
    if not jobs:
        print(f"no running provider job matches {args.target!r}")
        return 1
    providers = default_resources()["providers"]
    for job in jobs:
        snap = providers.adapter(job["provider"]).cancel(JobRef(job["provider_batch_id"]))
        with wh.connect() as conn:
            conn.execute("UPDATE ledger.provider_job SET cancel_requested = true WHERE job_key = ?", [job["job_key"]])
            record_snapshot(conn, job["job_key"], snap)
        print(f"{job['job_key']}: cancel requested ({snap.raw_status})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="batch-assets", description=__doc__.splitlines()[0])
    p.add_argument("--database", help="DuckDB warehouse file (default: $BATCH_ASSETS_DATABASE or data/warehouse.duckdb)")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run ticket_triage end to end on the emulator and print the reconciliation")
    d.add_argument("--data-dir", default="data")
    d.add_argument("--fresh", action="store_true", help="delete earlier demo data first")
    v = sub.add_parser("dev", help="the emulator plus the Dagster UI (dg dev) on 127.0.0.1")
    v.add_argument("--port", type=int, default=3000)
    v.add_argument("--emulator-port", type=int, default=int(DEFAULT_EMULATOR_URL.rsplit(":", 1)[1]))
    v.add_argument("--data-dir", default="data")
    sub.add_parser("emulator", help="the local provider emulator (flags: --port N, --state-dir, knobs; see --help)",
                   add_help=False)
    sub.add_parser("bench", help="the SPEC §9 benchmark (flags: --items N, --workdir, --keep)", add_help=False)
    s = sub.add_parser("seed", help="(re)create the demo business tables (tickets, KB articles, reviews)")
    s.add_argument("--days", type=int, default=7)
    j = sub.add_parser("jobs", help="provider jobs with status and counts")
    j.add_argument("--task", help="task name or task_id prefix")
    r = sub.add_parser("report", help="per-partition reconciliation table")
    r.add_argument("--task", help="task name or task_id prefix")
    e = sub.add_parser("export", help="results merged with inputs as CSV (UTF-8 with BOM, for spreadsheets)")
    e.add_argument("task_id")
    e.add_argument("--out", required=True)
    q = sub.add_parser("sql", help="run a read-only SQL query over the warehouse and print the rows")
    q.add_argument("query")
    q.add_argument("--limit", type=int, default=50)
    c = sub.add_parser("cancel", help="cancel a running provider job (by job_key, or all of a task_id)")
    c.add_argument("target")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # emulator and bench own their flags: pass everything after the subcommand through.
    for passthrough, handler in (("emulator", cmd_emulator), ("bench", cmd_bench)):
        if passthrough in argv:
            i = argv.index(passthrough)
            args = build_parser().parse_args(argv[: i + 1])
            sys.exit(handler(args, argv[i + 1:]))
    args = build_parser().parse_args(argv)
    handlers = {"demo": cmd_demo, "dev": cmd_dev, "seed": cmd_seed, "jobs": cmd_jobs, "report": cmd_report,
                "export": cmd_export, "cancel": cmd_cancel, "sql": cmd_sql}
    sys.exit(handlers[args.command](args))
