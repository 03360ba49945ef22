"""Provider jobs stuck in one state: how long is too long, and what to do about it.

Each in-flight state has an SLA (how long a job may stay in it). Defaults: VALIDATING 1 h,
SUBMITTED 24 h, RUNNING 24 h plus the provider's completion window, FINALIZING 2 h. A provider's
`limits.yaml` may set its own under `stuck:`, a task's `defs.yaml` may override them under
`stuck:` (see `spec.model.StuckSpec`).

A job over its SLA is marked (`stuck_at`). Policy `cancel_and_retry` (the default): once it has
been stuck for `act_after` more (default: the state's SLA again), the provider status sensor
cancels it and records `stuck_action = 'cancel_requested'` (its unfinished items are then sent
again by the retry ledger). Policy `notify`: it is only marked and logged
(`stuck_action = 'notified'`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import duckdb

from batch_assets.formatting import parse_duration
from batch_assets.ledger import job_reads
from batch_assets.ledger.jobs import mark_stuck, record_snapshot, request_cancel, set_stuck_action
from batch_assets.ledger.transaction import transaction
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.providers.contract import BatchProvider, JobRef

POLICIES = ("cancel_and_retry", "notify")
CANCEL_REQUESTED = "cancel_requested"
NOTIFIED = "notified"


def default_sla(completion_window: str) -> dict[str, float]:
    return {
        "VALIDATING": 3600.0,
        "SUBMITTED": 86400.0,
        "RUNNING": 86400.0 + parse_duration(completion_window),
        "FINALIZING": 7200.0,
    }


@dataclass(frozen=True)
class StuckPolicy:
    sla_s: Mapping[str, float] = field(default_factory=dict)  # state -> seconds
    policy: str = "cancel_and_retry"
    act_after_s: float | None = None  # None: the state's SLA again

    def sla_for(self, state: str) -> float | None:
        return self.sla_s.get(state)

    def act_after_for(self, state: str) -> float | None:
        return self.act_after_s if self.act_after_s is not None else self.sla_for(state)


def resolve_policy(completion_window: str, provider_stuck: Mapping | None = None, task_stuck=None) -> StuckPolicy:
    """Project defaults, then the provider's `stuck:` (limits.yaml), then the task's `stuck:`."""
    sla = default_sla(completion_window)
    policy, act_after = "cancel_and_retry", None
    for layer in (provider_stuck or {}), (task_stuck.model_dump(exclude_none=True) if task_stuck is not None else {}):
        sla.update({str(k).upper(): parse_duration(v) for k, v in (layer.get("sla") or {}).items()})
        policy = layer.get("policy", policy)
        if layer.get("act_after") is not None:
            act_after = parse_duration(layer["act_after"])
    if policy not in POLICIES:
        raise ValueError(f"stuck policy {policy!r}: use one of {', '.join(POLICIES)}")
    return StuckPolicy(sla, policy, act_after)


@dataclass
class StuckOutcome:
    newly_stuck: list[dict] = field(default_factory=list)  # job_key, task_name, state, seconds_in_state
    cancelled: list[dict] = field(default_factory=list)
    still_stuck: list[dict] = field(default_factory=list)  # marked earlier, no action (yet, or notify)
    errors: dict[str, str] = field(default_factory=dict)  # job_key -> cancel error


def in_flight_jobs(
    wh: Warehouse, task_name: str | None = None, conn: duckdb.DuckDBPyConnection | None = None
) -> list[dict]:
    if conn is None:
        with wh.connect() as own:
            return in_flight_jobs(wh, task_name, own)
    return job_reads.in_flight_jobs(conn, task_name)


def stuck_jobs(wh: Warehouse, task_name: str) -> list[dict]:
    """The task's in-flight jobs marked stuck: job_key, state, seconds in that state, stuck_action."""
    return [j for j in in_flight_jobs(wh, task_name) if j["stuck_at"] is not None]


def handle_stuck_jobs(
    wh: Warehouse,
    policy_for: Callable[[str, str], StuckPolicy],
    adapter_for: Callable[[str], BatchProvider],
    conn: duckdb.DuckDBPyConnection | None = None,
    in_scope: Callable[[str, str], bool] | None = None,
) -> StuckOutcome:
    """Mark the in-flight jobs over their state's SLA; act on those marked on an earlier pass.

    `policy_for(task_name, provider)` gives the policy; `in_scope(task_name, provider)`, when
    given, which jobs this pass looks at (a status sensor's scope). A job is cancelled at most once by this
    system (its `stuck_action` records it); a failed cancel is tried again on the next pass."""
    if conn is None:
        with wh.connect() as own:
            return handle_stuck_jobs(wh, policy_for, adapter_for, own, in_scope)
    out = StuckOutcome()
    for job in in_flight_jobs(wh, conn=conn):
        if in_scope is not None and not in_scope(job["task_name"], job["provider"]):
            continue
        policy = policy_for(job["task_name"], job["provider"])
        state = job["state"]
        if job["stuck_at"] is None:
            sla = policy.sla_for(state)
            if sla is not None and job["seconds_in_state"] >= sla:
                mark_stuck(conn, job["job_key"])
                if policy.policy == "notify":
                    set_stuck_action(conn, job["job_key"], NOTIFIED)
                out.newly_stuck.append(job)
            continue
        act_after = policy.act_after_for(state)
        # A job already being cancelled (by this system or by hand) is not cancelled again.
        if (
            policy.policy != "cancel_and_retry"
            or job["stuck_action"] == CANCEL_REQUESTED
            or job["cancel_requested"]
            or act_after is None
            or job["seconds_stuck"] < act_after
        ):
            out.still_stuck.append(job)
            continue
        try:
            snap = adapter_for(job["provider"]).cancel(JobRef(job["provider_batch_id"]))
        except Exception as exc:  # the next pass tries again
            out.errors[job["job_key"]] = f"{type(exc).__name__}: {exc}"
            continue
        with transaction(conn):
            request_cancel(conn, job["job_key"])
            set_stuck_action(conn, job["job_key"], CANCEL_REQUESTED)
            record_snapshot(conn, job["job_key"], snap)
        out.cancelled.append(job)
    return out
