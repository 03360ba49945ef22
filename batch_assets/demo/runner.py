"""`make demo` / `batch-assets demo`: every demo task end to end on the embedded defaults.

Starts the local provider emulator, seeds the demo tables (support tickets, knowledge-base articles,
product reviews), materializes the submit assets of two partitions of each of the five demo tasks
(DEMO_TASKS: OpenAI, Anthropic, Gemini and DashScope) through the project's real Dagster
definitions, then lets the provider status sensor drive: each tick polls the emulator and requests
collect runs, which are executed in process until every provider job is terminal and collected.
Prints the per-partition reconciliation table and the DuckDB path; returns non-zero if anything
fails to balance. Progress goes through `batch_assets.progress` (bars when the CLI installs them).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import duckdb

from batch_assets import progress
from batch_assets.demo.seed import seed_support_tickets
from batch_assets.demo.seed_kb import seed_kb_articles
from batch_assets.demo.seed_reviews import seed_product_reviews
from batch_assets.emulator.testing import running_emulator
from batch_assets.formatting import format_table
from batch_assets.ledger import distributed
from batch_assets.ledger.job_reads import job_counts
from batch_assets.ledger.partition_stores import STORES_DIR
from batch_assets.ledger.tasks import forget_tasks
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.collect_runs import DEFAULT_MAX_COLLECT_TRIES as COLLECT_MAX_TRIES
from batch_assets.pipeline.collect.collect_runs import pending_jobs
from batch_assets.pipeline.govern.cost import partition_gates
from batch_assets.pipeline.report.partition_tables import gate_cells, reconciliation_cells
from batch_assets.pipeline.report.summaries import record_final_figures
from batch_assets.pipeline.settle.reconcile import settle
from batch_assets.pipeline.settle.retry_ledger import pending_retries
from batch_assets.spec.resolve import load_tasks
from batch_assets.storage.run_files import CACHE_DIR

DEMO_PARTITIONS = ("2026-11-20", "2026-11-21")
# Every task of the project, one per provider at least (ticket_triage also runs on Anthropic).
DEMO_TASKS = ("ticket_triage", "ticket_summary", "kb_embeddings", "review_sentiment", "ticket_triage_anthropic")
# A realistic sprinkle of per-item failures so the table shows every column at work.
# Faults like a real service's: drawn per (request, occurrence), so a retried request can succeed.
DEMO_EMULATOR_KNOBS = {
    "speed": 20.0,
    "item_error_rate": 0.01,
    "content_filter_rate": 0.004,
    "truncate_rate": 0.004,
    "shuffle_output": True,
    "log_requests": False,
    "item_faults_by_occurrence": True,
}
SENSOR_TICK_S = 0.5
# Run logs go to the Dagster instance (see them in `make dev`); the console shows warnings only.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
TIMEOUT_S = 300.0
PROJECT_ROOT = Path(__file__).resolve().parents[2]


DAGSTER_PG_VARIABLE = "BATCH_ASSETS_DAGSTER_PG_URL"
# The instance's runs, events and schedules in PostgreSQL (dagster-postgres reads the URL at start;
# its scheme is postgresql+psycopg2: SQLAlchemy maps plain postgresql:// to psycopg 3).
POSTGRES_STORAGE = f"""
storage:
  postgres:
    postgres_url:
      env: {DAGSTER_PG_VARIABLE}
"""


# The tables the demo seeds: the sources its tasks read.
DEMO_SOURCE_TABLES = ("support_tickets", "kb_articles", "product_reviews")


def prepare_dagster_home(data_dir: Path) -> Path:
    """A persistent instance under data/ (so `make dev` shows the demo's runs), using our dagster.yaml;
    with $BATCH_ASSETS_DAGSTER_PG_URL set its storage is that PostgreSQL instead of SQLite files."""
    home = data_dir / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    config = (PROJECT_ROOT / "dagster.yaml").read_text(encoding="utf-8")
    if os.environ.get(DAGSTER_PG_VARIABLE):
        config += POSTGRES_STORAGE
    (home / "dagster.yaml").write_text(config, encoding="utf-8")
    return home


def _say(msg: str) -> None:
    print(f"[demo] {msg}", flush=True)


def _print_plain_table(headers: list[str], rows: list[list]) -> None:
    print(format_table(headers, rows))


def _forget_earlier_demo(wh: Warehouse, tasks: tuple[str, ...], partitions: tuple[str, ...]) -> None:
    """The earlier demo's warehouse and files deleted, and its control rows where they are elsewhere (PostgreSQL)."""
    data_dir = wh.data_dir
    if data_dir.exists():
        for child in (
            "warehouse.duckdb",
            "warehouse.duckdb.wal",
            STORES_DIR,
            CACHE_DIR,
            "manifests",
            "shards",
            "raw",
            "emulator",
            "dagster_home",
        ):
            target = data_dir / child
            shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
    if wh.ledger_url is not None:
        with wh.connect() as conn:
            forget_tasks(conn, [f"{t}_{p.replace('-', '')}" for t in tasks for p in partitions])


def seed_demo_tables(wh: Warehouse, connect: Callable | None = None, **sizes) -> dict[str, int]:
    """Seed the demo's source tables (rows per table) where the deployment keeps them: the warehouse
    file (opened by `connect()`, default wh.connect), or PostgreSQL (built in an in-memory DuckDB,
    then copied there). `sizes`: e.g. days=7."""
    with (connect or wh.connect)() if wh.tables is None else duckdb.connect() as conn:
        counts = {
            "support_tickets": seed_support_tickets(conn, **sizes),
            "kb_articles": seed_kb_articles(conn, **sizes),
            "product_reviews": seed_product_reviews(conn, **sizes),
        }
        if wh.tables is not None:
            for table in DEMO_SOURCE_TABLES:
                wh.tables.publish(conn, table, f"SELECT * FROM {table}")
    return counts


def run_demo(
    data_dir: Path,
    partitions: tuple[str, ...] = DEMO_PARTITIONS,
    tasks: tuple[str, ...] = DEMO_TASKS,
    fresh: bool = False,
    print_table: Callable[[list[str], list[list]], None] = _print_plain_table,
) -> int:
    """The demo in `data_dir`; `print_table(headers, rows)` shows the closing tables (plain text by default)."""
    data_dir = data_dir.resolve()
    wh = Warehouse.at(data_dir / "warehouse.duckdb", data_dir)
    if fresh:
        _forget_earlier_demo(wh, tasks, partitions)
    counts = tuple(seed_demo_tables(wh).values())
    where = wh.database if wh.tables is None else f"PostgreSQL at {wh.tables.where}"
    _say("seeded {} support tickets, {} knowledge-base articles, {} product reviews into {}".format(*counts, where))

    with running_emulator(data_dir / "emulator", **DEMO_EMULATOR_KNOBS) as emulator:
        _say(f"provider emulator on {emulator.base_url}")
        os.environ.update(
            {
                "BATCH_ASSETS_DATABASE": str(wh.database),
                "BATCH_ASSETS_DATA_DIR": str(data_dir),
                "BATCH_ASSETS_EMULATOR_URL": emulator.base_url,
                "DAGSTER_HOME": str(prepare_dagster_home(data_dir)),
            }
        )
        # The demo always runs on the local emulator, whatever the environment says about live mode.
        os.environ["BATCH_ASSETS_PROVIDER_MODE"] = "emulator"
        for provider in ("OPENAI", "ANTHROPIC", "GEMINI", "DASHSCOPE"):
            os.environ.pop(f"BATCH_ASSETS_{provider}_MODE", None)
            os.environ.pop(f"{provider}_BASE_URL", None)
        from batch_assets.definitions import defs
        from batch_assets.resources import default_resources

        definitions = defs()
        with dg.DagsterInstance.get() as instance:
            with progress.task("demo: submit", total=len(tasks) * len(partitions), unit="partitions", keep=True) as bar:
                for task in tasks:
                    for partition in partitions:
                        result = definitions.resolve_job_def(f"{task}__submit").execute_in_process(
                            partition_key=partition, instance=instance, raise_on_error=False, run_config=QUIET
                        )
                        _say(
                            f"{task} {partition}: manifest -> shards -> submissions "
                            f"{'ok' if result.success else 'FAILED'}"
                        )
                        bar.advance()
                        if not result.success:
                            return 1
            _drive_sensor(definitions, instance, default_resources(), wh)

    specs = load_tasks()  # the demo tasks; a broken other task folder does not stop the demo
    settled = [
        settle(wh, f"{t}_{p.replace('-', '')}", specs[t].spec.retry.max_failed_fraction, specs[t].spec.empty_source)
        for t in tasks
        for p in partitions
    ]
    recs = [r for r, _ in settled]
    final = [r.task_id for r, verdict in settled if verdict.final_status is not None]
    record_final_figures(wh, final, lambda t: _settings(specs, t))
    print()
    print_table(*reconciliation_cells(recs))
    print()
    with wh.connect() as conn:
        gates = partition_gates(conn, [r.task_id for r in recs])
    print_table(*gate_cells([gates[r.task_id] for r in recs if r.task_id in gates]))
    print()
    problems = [f"{r.task_id}: {v.status}: {reason}" for r, v in settled if not v.passed for reason in v.reasons]
    for p in problems:
        print(f"NOT DONE {p}")
    unresolved = sum(r.unresolved for r in recs)
    _say(
        f"{sum(r.retried for r in recs)} item(s) retried, {unresolved} unresolved, "
        f"{sum(r.final_failed_total for r in recs)} final-failed, "
        f"{sum(r.compliance_held for r in recs)} held for compliance"
    )
    if wh.partition_stores:
        print(f"Per-item DuckDB stores, one per partition: {wh.stores_dir}")
    else:
        print(f"DuckDB warehouse: {wh.database}")
    if wh.ledger_url is not None:
        print(f"Control ledger: PostgreSQL at {distributed.where(wh.ledger_url)}")
    if wh.tables is not None:
        print(f"Source and business tables: PostgreSQL at {wh.tables.where}")
        print(
            "Explore: `make dev` (Dagster UI), `.venv/bin/batch-assets report`, or psql, e.g.\n"
            f'  psql "$BATCH_ASSETS_TABLES_URL" -c "SELECT category, count(*) FROM {wh.tables.schema}.ticket_labels '
            'GROUP BY 1"'
        )
        return 1 if problems else 0
    print(
        "Explore: `make dev` (Dagster UI), `.venv/bin/batch-assets report`, or SQL, e.g.\n"
        '  .venv/bin/batch-assets sql "SELECT category, count(*) FROM ticket_labels GROUP BY ALL"'
    )
    return 1 if problems else 0


def _drive_sensor(definitions: dg.Definitions, instance: dg.DagsterInstance, resources: dict, wh: Warehouse) -> None:
    sensor = definitions.resolve_sensor_def("provider_status_sensor")
    cursor = None
    deadline = time.monotonic() + TIMEOUT_S
    with progress.task("demo: provider jobs collected", unit="jobs", keep=True) as bar:
        while True:
            context = dg.build_sensor_context(
                instance=instance, cursor=cursor, definitions=definitions, resources=resources
            )
            tick = sensor.evaluate_tick(context)
            cursor = tick.cursor
            for request in tick.run_requests:
                # Whatever the sensor asks for, under the job it names (a collect run, or submissions held
                # back by a provider's job cap), with its tags and run key, as the daemon would launch it.
                task = request.tags["batch_assets/task"]
                result = definitions.resolve_job_def(request.job_name).execute_in_process(
                    partition_key=request.partition_key,
                    instance=instance,
                    raise_on_error=False,
                    run_config=QUIET,
                    asset_selection=list(request.asset_selection) if request.asset_selection else None,
                    tags={**request.tags, "dagster/sensor_name": sensor.name, "dagster/run_key": request.run_key},
                )
                checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
                collect = request.job_name.endswith("__collect")
                retry = "batch_assets/retries_due" in request.tags
                stages = (
                    "raw_results -> parsed_results -> applied"
                    if collect
                    else f"submissions (retry of {request.tags['batch_assets/retries_due']} item(s), "
                    f"attempt {request.tags.get('batch_assets/attempt')})"
                    if retry
                    else "submissions (capacity freed)"
                )
                _say(
                    f"sensor -> {task} {request.partition_key}: {stages} "
                    f"{'ok' if result.success else 'FAILED'}; checks {checks}"
                )
            with wh.connect() as conn:
                jobs, open_jobs, collected = job_counts(conn)
            bar.update(completed=collected, total=jobs)
            # Jobs the sensor gave up collecting (after its bounded tries) no longer hold the demo up.
            uncollected = sum(1 for j in pending_jobs(wh) if j.collect_attempts < COLLECT_MAX_TRIES)
            retries = sum(r["pending"] for r in pending_retries(wh))
            if open_jobs == 0 and uncollected == 0 and retries == 0 and not tick.run_requests:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"provider jobs still open after {TIMEOUT_S:.0f}s: {open_jobs} running, "
                    f"{uncollected} uncollected, {retries} retries pending"
                )
            time.sleep(SENSOR_TICK_S)


def _settings(specs: dict, task_id: str) -> tuple[float, str]:
    """The verdict settings of a demo partition's task (its task_id: `<task name>_YYYYMMDD`)."""
    spec = specs[task_id.rsplit("_", 1)[0]].spec
    return spec.retry.max_failed_fraction, spec.empty_source
