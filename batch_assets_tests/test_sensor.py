"""The provider status sensor: polls jobs, records every transition with its time,
requests one collect run per partition with uncollected terminal jobs under the task's collect job
(deterministic run keys that change only when a collect run has started), and a tick overlapping a
run - in another thread or another process - loses nothing."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import textwrap
import threading
import time

import dagster as dg
import openai
import pytest

from batch_assets.components.wiring import collect_asset_keys
from batch_assets.defs.sensors import build_provider_status_sensors
from batch_assets.emulator import clock as emulator_clock
from batch_assets.pipeline.collect.collect_runs import plan_collection
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.collect.poll_scopes import PollScope
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.resources import EMULATOR_API_KEY, default_resources

from .conftest import DAY1, DAY2
from .sensor_ticks import limited, tick

pytestmark = pytest.mark.slow  # starts the emulator or Dagster

TERMINAL = {"completed", "failed", "expired", "cancelled"}
COLLECT_KEYS = [
    dg.AssetKey(["ticket_triage", s]) for s in ("raw_results", "parsed_results", "applied", "report", "settled")
]


def submit(wh, task, adapter, *days):
    for day in days:
        freeze_manifest(wh, task, day)
        cut_shards(wh, task, day)
        submit_pending(wh, task, day, adapter)


def wait_provider_terminal(emulator, timeout_s: float = 15.0) -> None:
    """Wait on the provider side only (no ledger writes), so the sensor sees the transitions."""
    deadline = time.monotonic() + timeout_s
    with openai.OpenAI(api_key=EMULATOR_API_KEY, base_url=emulator.openai_base_url) as client:
        while {b.status for b in client.batches.list(limit=100)} - TERMINAL:
            assert time.monotonic() < deadline, "provider batches did not finish"
            time.sleep(0.05)


def jobs_by_partition(wh) -> dict[str, list[str]]:
    with wh.connect() as conn:
        rows = conn.execute(
            "SELECT strftime(t.partition_date, '%Y-%m-%d'), list(j.job_key ORDER BY j.job_key) "
            "FROM ledger.provider_job j JOIN ledger.batch_task t USING (task_id) GROUP BY 1"
        ).fetchall()
    return {day: keys for day, keys in rows}


def events(wh, job_key: str) -> list[tuple]:
    with wh.connect() as conn:
        return conn.execute(
            "SELECT from_state, to_state, raw_status, request_completed, observed_at "
            "FROM ledger.status_event WHERE job_key = ? ORDER BY observed_at, to_state",
            [job_key],
        ).fetchall()


def test_one_tick_requests_one_collect_run_per_newly_terminal_partition(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator
):
    wh = dagster_env
    submit(wh, limited(ticket_task, 30), adapter, DAY1, DAY2)  # two jobs per partition
    wait_provider_terminal(emulator)
    jobs = jobs_by_partition(wh)
    assert [len(jobs[d]) for d in (DAY1, DAY2)] == [2, 2]

    result = tick(defs, sensor_instance, None)
    requests = sorted(result.run_requests, key=lambda r: r.partition_key)
    assert [r.partition_key for r in requests] == [DAY1, DAY2]
    collect_job = defs.resolve_job_def("ticket_triage__collect")
    assert (
        sorted(collect_job.asset_layer.executable_asset_keys)
        == sorted(COLLECT_KEYS)
        == sorted(collect_asset_keys("ticket_triage"))
    )
    for r, day in zip(requests, (DAY1, DAY2)):
        assert r.job_name == "ticket_triage__collect" and r.asset_selection is None
        assert r.run_key.startswith(f"collect:ticket_triage:{day}:")
        assert r.tags["batch_assets/jobs"] == ",".join(jobs[day])
        assert (r.tags["batch_assets/task"], r.tags["batch_assets/partition"], r.tags["batch_assets/attempt"]) == (
            "ticket_triage",
            day,
            "1",
        )
    assert len({r.run_key for r in requests}) == 2
    # Every job's transitions were recorded, with their times.
    with wh.connect() as conn:
        lines = dict(
            conn.execute(
                "SELECT j.job_key, s.line_count FROM ledger.provider_job j JOIN ledger.shard s USING (shard_id)"
            ).fetchall()
        )
    for day in (DAY1, DAY2):
        for job_key in jobs[day]:
            ev = events(wh, job_key)
            assert [(e[0], e[1]) for e in ev] == [
                (None, "CREATED"),
                ("CREATED", "VALIDATING"),
                ("VALIDATING", "COMPLETED"),
            ]
            assert (ev[-1][2], ev[-1][3]) == ("completed", lines[job_key])
            assert all(a[4] <= b[4] for a, b in zip(ev, ev[1:]))
    with wh.connect() as conn:
        assert (
            conn.execute(
                "SELECT count(*) FROM ledger.provider_job WHERE terminal_at IS NULL OR terminal_seq IS NULL"
            ).fetchone()[0]
            == 0
        )

    # Until a collect run starts, every tick asks for the same runs under the same keys (Dagster
    # launches a run key once); a re-evaluation without the cursor too.
    assert json.loads(result.cursor)["terminal_seq"] == 4
    for again in (tick(defs, sensor_instance, result.cursor), tick(defs, sensor_instance, None)):
        assert sorted((r.partition_key, r.run_key) for r in again.run_requests) == [
            (r.partition_key, r.run_key) for r in requests
        ]
    # A second status sensor whose scope overlaps (the openai jobs) plans the same runs: the first
    # one asked for them (their keys are claimed in the ledger), so it asks for none.
    task_jobs = [j for j in defs.jobs or [] if j.name.endswith(("__submit", "__collect"))]
    (other,) = build_provider_status_sensors(task_jobs, [PollScope("status_openai", providers=("openai",))])
    context = dg.build_sensor_context(instance=sensor_instance, definitions=defs, resources=default_resources())
    assert other.evaluate_tick(context).run_requests == []
    # Once collected, a partition is asked for no more.
    collect_partition(wh, ticket_task, DAY1, adapter)
    assert [r.partition_key for r in tick(defs, sensor_instance, result.cursor).run_requests] == [DAY2]


def test_transitions_are_recorded_with_times_and_later_jobs_request_only_their_partition(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator, monkeypatch
):
    wh = dagster_env
    # The emulator's clock is held by the test: every phase is observed by a tick, whatever the load.
    fake = {"now": time.time()}
    monkeypatch.setattr(emulator_clock, "now", lambda: fake["now"])
    emulator.configure(queue_delay_s=10, seconds_per_request=0.1, finalize_delay_s=10)
    submit(wh, ticket_task, adapter, DAY1)
    (job_key,) = jobs_by_partition(wh)[DAY1]
    cursor, requests = None, []
    # validating -> in_progress (after 10 s) -> finalizing (53 requests x 0.1 s later) -> completed (10 s)
    for advance in (0.0, 11.0, 6.0, 11.0):
        fake["now"] += advance
        assert not requests, "DAY1 was requested before its job was terminal"
        result = tick(defs, sensor_instance, cursor)
        cursor, requests = result.cursor, result.run_requests
    assert [r.partition_key for r in requests] == [DAY1]
    ev = events(wh, job_key)
    assert [(e[0], e[1]) for e in ev if e[0] != e[1]] == [
        (None, "CREATED"),
        ("CREATED", "VALIDATING"),
        ("VALIDATING", "RUNNING"),
        ("RUNNING", "FINALIZING"),
        ("FINALIZING", "COMPLETED"),
    ]
    times = [e[4] for e in ev]
    assert times == sorted(times) and times[-1] > times[0]
    raw = {e[1]: e[2] for e in ev}
    assert (raw["VALIDATING"], raw["RUNNING"], raw["FINALIZING"], raw["COMPLETED"]) == (
        "validating",
        "in_progress",
        "finalizing",
        "completed",
    )
    assert ev[-1][3] == 50
    with wh.connect() as conn:
        created, submitted, changed, terminal = conn.execute(
            "SELECT created_at, submitted_at, state_changed_at, terminal_at FROM ledger.provider_job"
        ).fetchone()
    assert created <= submitted <= terminal and changed == terminal

    # A job that finishes later is requested on its own.
    submit(wh, ticket_task, adapter, DAY2)
    fake["now"] += 40.0
    later = tick(defs, sensor_instance, cursor)
    by_day = {r.partition_key: r for r in later.run_requests}
    assert sorted(by_day) == [DAY1, DAY2] and by_day[DAY1].run_key == requests[0].run_key  # DAY1: not collected yet
    assert by_day[DAY2].tags["batch_assets/jobs"] == ",".join(jobs_by_partition(wh)[DAY2])
    collect_partition(wh, ticket_task, DAY1, adapter)
    collect_partition(wh, ticket_task, DAY2, adapter)
    assert tick(defs, sensor_instance, later.cursor).run_requests == []


# --- overlap: nothing lost, nothing twice -------------------------------------------------------------


def collect_partition(wh, task, day, adapter):
    collect_raw_results(wh, task, day, adapter)
    parse_results(wh, task, day)
    apply_results(wh, task, day)


def assert_consistent(wh, requested_job_keys: list[str]):
    with wh.connect() as conn:
        all_jobs = [r[0] for r in conn.execute("SELECT job_key FROM ledger.provider_job ORDER BY 1").fetchall()]
        seqs = [r[0] for r in conn.execute("SELECT terminal_seq FROM ledger.provider_job").fetchall()]
        terminal_events = conn.execute("""
            SELECT job_key, count(*) FROM ledger.status_event WHERE to_state = 'COMPLETED' AND from_state <> 'COMPLETED'
            GROUP BY 1""").fetchall()
    # Every job handed to collection; one terminal transition each; distinct sequence numbers.
    assert sorted(set(requested_job_keys)) == all_jobs
    assert None not in seqs and len(set(seqs)) == len(seqs)
    assert sorted(terminal_events) == [(k, 1) for k in all_jobs]
    for task_id in ("ticket_triage_20261120", "ticket_triage_20261121"):
        r = reconcile(wh, task_id)
        assert r.problems() == [] and r.succeeded == r.applied == 50 and r.jobs == r.jobs_terminal


def test_a_sensor_tick_in_another_thread_overlapping_runs_loses_nothing(
    defs, sensor_instance, dagster_env, ticket_task, adapter, emulator
):
    wh, task = dagster_env, limited(ticket_task, 20)
    submit(wh, task, adapter, DAY1)
    freeze_manifest(wh, task, DAY2)
    cut_shards(wh, task, DAY2)
    wait_provider_terminal(emulator)
    stop, errors, requested, ticks = threading.Event(), [], [], []

    def ticker():
        cursor = None
        while not stop.is_set():
            started = time.monotonic()
            try:
                result = tick(defs, sensor_instance, cursor)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(repr(exc))
                continue
            ticks.append((started, time.monotonic()))
            cursor = result.cursor
            requested.extend(result.run_requests)
            time.sleep(0.05)

    thread = threading.Thread(target=ticker, name="sensor-ticker")
    thread.start()
    try:
        time.sleep(0.05)
        work_started = time.monotonic()
        submit_pending(wh, task, DAY2, adapter)  # a submit run ...
        collect_partition(wh, task, DAY1, adapter)  # ... and a collect run, while the sensor ticks
        work_ended = time.monotonic()
        wait_provider_terminal(emulator)
        deadline = time.monotonic() + 20
        while len({k for r in requested for k in r.tags["batch_assets/jobs"].split(",")}) < 6 and not errors:
            assert time.monotonic() < deadline, "the sensor did not hand over every job"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert errors == []
    assert any(a < work_ended and b > work_started for a, b in ticks), "no tick overlapped the runs"
    collect_partition(wh, task, DAY1, adapter)
    collect_partition(wh, task, DAY2, adapter)
    keys = [k for r in requested for k in r.tags["batch_assets/jobs"].split(",")]
    # A run key names one partition's jobs at one collect generation: never two different requests.
    by_key = {}
    for r in requested:
        assert by_key.setdefault(r.run_key, (r.partition_key, r.tags["batch_assets/jobs"])) == (
            r.partition_key,
            r.tags["batch_assets/jobs"],
        )
    assert_consistent(wh, keys)
    assert tick(defs, sensor_instance, None).run_requests == []  # all collected: nothing asked for


SENSOR_PROCESS = textwrap.dedent("""
    import json, logging, sys, time
    from batch_assets.ledger import file_locks as warehouse_mod
    from batch_assets.ledger.warehouse import Warehouse
    from batch_assets.pipeline.collect.collect_runs import plan_collection
    from batch_assets.pipeline.collect.poll import poll_jobs
    from batch_assets.providers.contract import ClientSettings
    from batch_assets.providers.openai.adapter import OpenAIBatchAdapter


    class Report(logging.Handler):
        # Every lock wait the Warehouse records is reported to the test on stdout as it happens.
        def emit(self, record):
            print(json.dumps({"lock_wait": record.getMessage()}), flush=True)


    warehouse_mod.log.addHandler(Report())
    warehouse_mod.log.setLevel(logging.INFO)
    database, data_dir, base_url, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    wh = Warehouse.at(database, data_dir)
    adapter = OpenAIBatchAdapter(ClientSettings("emulator-no-key", base_url))
    handed, deadline = [], time.monotonic() + 60
    print(json.dumps({"started": True}), flush=True)
    while len(set(handed)) < want and time.monotonic() < deadline:
        # What provider_status_sensor does on every tick, from its own process: poll, then plan the
        # collect runs from the ledger's state (a job is asked for until it is collected).
        poll_jobs(wh, lambda _p: adapter)
        requests = plan_collection(wh).requests
        handed += [k for r in requests for k in r.job_keys]
        print(json.dumps({"tick": [[r.run_key, list(r.job_keys)] for r in requests]}), flush=True)
    print(json.dumps({"handed": handed, "lock_waits": warehouse_mod.lock_waits()}), flush=True)
""")


def _stdout_lines(proc: subprocess.Popen) -> queue.Queue:
    """The process's stdout, one JSON message per line, readable with a timeout."""
    lines: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stdout:
            lines.put(json.loads(line))
        lines.put(None)  # end of output

    threading.Thread(target=pump, name="sensor-process-stdout", daemon=True).start()
    return lines


def _next_message(lines: queue.Queue, deadline: float, what: str) -> dict:
    remaining = deadline - time.monotonic()
    assert remaining > 0, f"timed out waiting for {what}"
    try:
        message = lines.get(timeout=remaining)
    except queue.Empty:
        raise AssertionError(f"timed out waiting for {what}") from None
    assert message is not None, f"the sensor process ended before {what}"
    return message


def test_a_sensor_tick_in_another_process_overlapping_runs_loses_nothing(seeded_copy, ticket_task, adapter, emulator):
    """DuckDB admits one writing process per file: the other process waits for the lock and retries.

    The contention is forced, not hoped for: this process holds a write connection (the file lock)
    while the sensor process starts its tick, the sensor process reports that it is waiting for the
    lock, and submit and collect runs go on here meanwhile. Only then is the lock released; the
    sensor's tick proceeds and every job not collected meanwhile is handed to collection, a run key
    always naming the same jobs."""
    wh, task = seeded_copy, limited(ticket_task, 20)
    submit(wh, task, adapter, DAY1)
    freeze_manifest(wh, task, DAY2)
    cut_shards(wh, task, DAY2)
    wait_provider_terminal(emulator)
    proc = subprocess.Popen(
        [sys.executable, "-c", SENSOR_PROCESS, str(wh.database), str(wh.data_dir), emulator.openai_base_url, "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = _stdout_lines(proc)
        with wh.connect() as held:  # the file lock: the sensor process cannot open the file until this closes
            assert _next_message(lines, time.monotonic() + 60, "the sensor process to start") == {"started": True}
            waiting = _next_message(lines, time.monotonic() + 60, "the sensor process to wait for the lock")
            assert "lock_wait" in waiting, waiting
            # Runs of this process overlap the waiting tick (same process: they share the open database).
            submit_pending(wh, task, DAY2, adapter)
            collect_partition(wh, task, DAY1, adapter)
            assert (
                held.execute("SELECT count(*) FROM ledger.provider_job WHERE terminal_seq IS NOT NULL").fetchone()[0]
                == 3
            )
            assert lines.empty(), "the sensor process got past the lock while it was held"
        deadline = time.monotonic() + 90
        messages = []
        while not messages or "handed" not in messages[-1]:
            messages.append(_next_message(lines, deadline, "the sensor process to hand over every job"))
        out_err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out_err[1]
    summary = messages[-1]
    assert summary["lock_waits"] >= 1
    handed = summary["handed"]
    # A run key names one partition's jobs at one collect generation, in every tick that asks for it.
    by_key: dict[str, list[str]] = {}
    for message in messages:
        for run_key, job_keys in message.get("tick", []):
            assert by_key.setdefault(run_key, job_keys) == job_keys
    # Collection is planned from the ledger: DAY1, collected here while the sensor waited, is not asked
    # for; DAY2's three jobs are.
    day1_jobs = jobs_by_partition(wh)[DAY1]
    assert sorted(set(handed)) == jobs_by_partition(wh)[DAY2]
    collect_partition(wh, task, DAY1, adapter)
    collect_partition(wh, task, DAY2, adapter)
    assert_consistent(wh, handed + day1_jobs)
    assert plan_collection(wh).requests == []  # all collected: nothing asked for
