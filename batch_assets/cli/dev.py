"""`batch-assets dev`: the provider emulator plus the Dagster UI and daemon (`dg dev`), on 127.0.0.1.

`--distributed` (`make dev-distributed`) first starts throwaway PostgreSQL and S3 servers (the
control ledger, the source and business tables, Dagster's storage; run files and partition stores),
runs Dagster with deploy/dagster.local.yaml (the queued run coordinator with one run per task
partition and a cap per provider, pools for create calls; the default launcher), seeds the demo
tables, submits the demo partitions' submit runs to the run queue and reports as the status sensor
carries them to final. Everything it started is stopped on exit; its state is gone with it.

Both ports are checked before anything starts, and the emulator must answer before `dg dev`
starts, so a taken port or a failed start never leaves half of the stack running. Each runs in its
own process group (batch_assets.process_group): SIGINT or SIGTERM, to `batch-assets dev` or to its
whole process group (Ctrl-C in its terminal), stops both, with every process they started (the
webserver and the daemon under `dg dev`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from batch_assets import dev_stack
from batch_assets.cli.context import reject_database_option
from batch_assets.cli.errors import CliError, UsageError
from batch_assets.ports import LOOPBACK, is_listening, port_in_use
from batch_assets.process_group import Stopped, signals_held, start_group, stop_group, stop_on_signals

HOST = LOOPBACK
DEFAULT_UI_PORT = 3000
DEFAULT_EMULATOR_PORT = 8765
EMULATOR_START_TIMEOUT_S = 30.0
UI_LOAD_TIMEOUT_S = 300.0
DISTRIBUTED_DIR = "distributed"  # under --data-dir: kept apart from `make dev`'s local warehouse
WATCH_EVERY_S = 5.0


def check_ports(ui_port: int, emulator_port: int) -> None:
    if ui_port == emulator_port:
        raise UsageError(f"--ui-port and --emulator-port are both {ui_port}: give them different ports")
    taken = [
        (name, flag, port)
        for name, flag, port in (("Dagster UI", "--ui-port", ui_port), ("emulator", "--emulator-port", emulator_port))
        if port_in_use(port)
    ]
    if taken:
        what = " and ".join(f"port {port} ({name})" for name, _, port in taken)
        fix = " / ".join(f"{flag} N" for _, flag, _ in taken)
        raise CliError(
            f"{what} already in use on {HOST}: stop what holds it, or choose another with {fix}; nothing was started"
        )


def _wait_until_listening(proc: subprocess.Popen, port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CliError(
                f"the emulator exited (status {proc.returncode}) before listening on port {port}; see its output above"
            )
        if is_listening(port, HOST):
            return
        time.sleep(0.1)
    raise CliError(f"the emulator did not listen on port {port} within {timeout_s:.0f} s")


def cmd_dev(args) -> int:
    reject_database_option(args, "dev")
    from batch_assets.spec.settings import partition_start

    partition_start()  # a bad $BATCH_ASSETS_PARTITION_START is named here, not in Dagster's load errors
    check_ports(args.ui_port, args.emulator_port)
    bin_dir = Path(sys.executable).parent
    dg = bin_dir / "dg"
    if not dg.exists():
        raise CliError(f"`dg` not found in {bin_dir}: install the dev extras (pip install -e '.[dev]', or `make dev`)")

    from batch_assets.demo.runner import prepare_dagster_home

    data_dir = Path(args.data_dir).resolve()
    if args.distributed:
        data_dir = data_dir / DISTRIBUTED_DIR
    env = dict(os.environ)
    emulator_url = f"http://{HOST}:{args.emulator_port}"
    env.update(
        {
            "DAGSTER_HOME": str(prepare_dagster_home(data_dir)),
            "BATCH_ASSETS_EMULATOR_URL": emulator_url,
            "BATCH_ASSETS_DATABASE": str(data_dir / "warehouse.duckdb"),
            "BATCH_ASSETS_DATA_DIR": str(data_dir),
        }
    )
    # dg wants to see the project's virtualenv as the active one.
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    with stop_on_signals():
        if args.distributed:
            return _run_distributed(args, dg, env, data_dir, emulator_url)
        return _run_stack(args, dg, env, data_dir, emulator_url)


def _run_stack(args, dg: Path, env: dict, data_dir: Path, emulator_url: str, then=None, shells=None) -> int:
    """The emulator, then `dg dev`; `then(ui)` once the UI runs (the distributed stack's launches);
    `shells`: the settings another shell needs (default: the warehouse and the emulator)."""
    emulator = ui = None
    try:
        with signals_held():  # a signal now is raised once `emulator` holds the child, so it is stopped
            emulator = start_group(
                [sys.executable, "-m", "batch_assets.cli", "emulator", "--port", str(args.emulator_port),
                 "--state-dir", str(data_dir / "emulator")],
                env=env,
            )  # fmt: skip
        _wait_until_listening(emulator, args.emulator_port, EMULATOR_START_TIMEOUT_S)
        ui_url = f"http://{HOST}:{args.ui_port}"
        dev_stack.record(data_dir, emulator_url=emulator_url, ui_url=ui_url)
        print(f"emulator: {emulator_url}   Dagster UI: {ui_url}", flush=True)
        shells = shells or {
            "BATCH_ASSETS_DATABASE": data_dir / "warehouse.duckdb",
            "BATCH_ASSETS_EMULATOR_URL": emulator_url,
        }
        print("other shells: export " + " ".join(f"{k}={v}" for k, v in shells.items()), flush=True)
        with signals_held():
            ui = start_group([str(dg), "dev", "--host", HOST, "--port", str(args.ui_port)], env=env)
        if then is not None:
            then(ui)
        return ui.wait()
    except Stopped as stopped:
        print(f"{stopped}: stopping the Dagster UI, the daemon and the emulator", file=sys.stderr, flush=True)
        return 128 + stopped.signum
    finally:
        dev_stack.clear(data_dir)
        if ui is not None:
            stop_group(ui)
        if emulator is not None:
            stop_group(emulator)


def _fresh_distributed_dir(data_dir: Path) -> None:
    """The earlier distributed stack's files: its servers were throwaway, so nothing else names them."""
    import shutil

    for child in ("services", "emulator", "dagster_home", "cache", "partitions", "warehouse.duckdb"):
        target = data_dir / child
        shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)


def _start_servers(data_dir: Path, env: dict) -> None:
    """Throwaway PostgreSQL and S3 servers under DATA_DIR/services; their settings into `env` (and
    this process, which seeds the tables and watches the ledger)."""
    from batch_assets.deployment.local_stack import INSTANCE_PG_VARIABLE, exported, prepare_instance
    from batch_assets.services import postgres, s3
    from batch_assets.services.__main__ import env_lines

    state = data_dir / "services"
    server = postgres.start(state)
    bucket = s3.start(state)
    env.update(exported(env_lines(server) + s3.env_lines(bucket)))
    env[INSTANCE_PG_VARIABLE] = env["BATCH_ASSETS_DAGSTER_PG_URL"]
    env["DAGSTER_HOME"] = str(prepare_instance(data_dir / "dagster_home"))
    env["BATCH_ASSETS_PROVIDER_MODE"] = "emulator"
    os.environ.update(env)
    print(f"PostgreSQL: {server.url}   S3: {bucket.endpoint}", flush=True)


def _stop_servers(data_dir: Path) -> None:
    from batch_assets.services import postgres, s3

    s3.stop(data_dir / "services")
    postgres.discard(data_dir / "services")


# What another shell needs to reach the distributed stack (the servers' own development settings).
SHELL_SETTINGS = (
    "BATCH_ASSETS_DATABASE",
    "BATCH_ASSETS_EMULATOR_URL",
    "BATCH_ASSETS_LEDGER_URL",
    "BATCH_ASSETS_TABLES_URL",
    "BATCH_ASSETS_TABLES_SCHEMA",
    "BATCH_ASSETS_STORAGE_URL",
    "BATCH_ASSETS_S3_ENDPOINT",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
)


def _run_distributed(args, dg: Path, env: dict, data_dir: Path, emulator_url: str) -> int:
    from batch_assets.demo.runner import DEMO_PARTITIONS, DEMO_TASKS, seed_demo_tables
    from batch_assets.deployment.local_stack import Launch, submit_runs, wait_for_location
    from batch_assets.ledger.warehouse import Warehouse
    from batch_assets.spec.resolve import task_id_for

    _fresh_distributed_dir(data_dir)
    try:
        with signals_held():  # a signal now is raised once the servers are recorded, so they are stopped
            _start_servers(data_dir, env)
        wh = Warehouse.at(data_dir / "warehouse.duckdb", data_dir)
        counts = seed_demo_tables(wh)
        print("seeded " + ", ".join(f"{n} rows in {t}" for t, n in counts.items()) + " (PostgreSQL)", flush=True)

        def launch_and_watch(ui: subprocess.Popen) -> None:
            try:
                wait_for_location(args.ui_port, UI_LOAD_TIMEOUT_S, alive=lambda: ui.poll() is None)
                launches = [Launch(f"{t}__submit", t, d) for t in DEMO_TASKS for d in DEMO_PARTITIONS]
                submit_runs(args.ui_port, launches)
            except RuntimeError as exc:  # the webserver did not come up, or refused a launch
                raise CliError(str(exc)) from None
            print(
                f"submitted {len(launches)} submit runs to the run queue (deploy/dagster.local.yaml); the status "
                "sensor asks for the collect runs. Ctrl-C stops everything.",
                flush=True,
            )
            _watch(ui, wh, [task_id_for(t, d) for t in DEMO_TASKS for d in DEMO_PARTITIONS])

        shells = {name: env[name] for name in SHELL_SETTINGS if name in env}
        return _run_stack(args, dg, env, data_dir, emulator_url, then=launch_and_watch, shells=shells)
    except Stopped as stopped:  # while the servers started or the tables were seeded
        print(f"{stopped}: stopping PostgreSQL and S3", file=sys.stderr, flush=True)
        return 128 + stopped.signum
    finally:
        _stop_servers(data_dir)


def _watch(ui: subprocess.Popen, wh, task_ids: list[str]) -> None:
    """Print each demo partition as it becomes final, and once when all are; return when the UI stops."""
    from batch_assets.deployment.local_stack import final_partitions

    seen: dict[str, str] = {}
    while ui.poll() is None:
        try:
            final = final_partitions(wh, task_ids)
        except Exception:  # noqa: BLE001 — the ledger may not exist yet: the first run creates it
            final = dict(seen)
        for task_id in sorted(set(final) - set(seen)):
            print(f"{task_id}: {final[task_id]} ({len(final)}/{len(task_ids)} final)", flush=True)
        if len(final) == len(task_ids) and len(seen) < len(task_ids):
            print(f"all {len(task_ids)} demo partitions are final: see them in the Dagster UI", flush=True)
        seen = final
        time.sleep(WATCH_EVERY_S)
