"""The control plane of `batch-assets bench --distributed`: P processes take and clear poll leases
(ledger/poll_leases.py) over in-flight jobs on PostgreSQL, as sensors and CLI polls do; operations per
second, and no lease left held (the intent-claim race is bench/claims.py)."""

from __future__ import annotations

from batch_assets.bench.at_once import at_once

LEASE_JOBS = 2000  # in-flight jobs the poll-lease race takes leases over
LEASES_PER_TAKE = 20


def _lease_race(url: str, owner: str, ops: int, start, out) -> None:
    from batch_assets.ledger.control_db import connect_postgres
    from batch_assets.ledger.poll_leases import release_poll_leases, take_poll_leases

    db = connect_postgres(url)
    start.wait()
    taken = 0
    for _ in range(ops // 2):
        taken += len(take_poll_leases(db, owner, 60, max_jobs=LEASES_PER_TAKE).jobs)
        release_poll_leases(db, owner)
    out.put(taken)


def lease_race(url: str, processes: int, ops: int) -> float:
    """Poll-lease operations (a take or a clear) per second, `processes` racing over LEASE_JOBS jobs."""
    from batch_assets.ledger.control_db import connect_postgres
    from batch_assets.ledger.jobs import insert_in_flight_jobs
    from batch_assets.ledger.poll_leases import held_poll_leases

    db = connect_postgres(url)
    insert_in_flight_jobs(db, "bench_leases_20261120", "openai", LEASE_JOBS, "lease-")
    elapsed, _taken = at_once(_lease_race, [(url, f"p{k}", ops) for k in range(processes)])
    held = held_poll_leases(db)
    if held:
        raise RuntimeError(f"{held} poll lease(s) left held after every racer cleared its own")
    return processes * (ops // 2) * 2 / elapsed


# --- the command -------------------------------------------------------------------------------
