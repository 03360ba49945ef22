"""The provider status sensor: one for all tasks, or one per provider or bucket of tasks
($BATCH_ASSETS_POLL_SENSORS, pipeline/collect/poll_scopes.py).

Each tick
- polls the in-flight provider jobs of its scope (bounded time; through poll leases, so sensors
  whose scopes overlap and `batch-assets poll` never poll one job twice at once) and records every
  transition in the ledger, including whether a terminal job's results can be fetched yet;
- marks jobs of its scope over their state's SLA as stuck and, under the `cancel_and_retry` policy, cancels
  those stuck long enough (see pipeline.collect.stuck);
- requests a `<task>__collect` run for every task partition whose terminal jobs are not fully
  collected, read from the ledger's state (see pipeline.collect.collect_runs): a failed collect run is asked for
  again under a new run key, at most DEFAULT_MAX_COLLECT_TRIES times per job;
- requests a `<task>__collect` run, once per frozen manifest, for every partition with nothing to
  send and no provider job whose final status is not recorded (0 items, every row rejected or every
  item quarantined before sending), so it reaches `settled` (pipeline.settle.partition_status);
- requests a `<task>__submit` run (submissions only) for partitions whose shards wait for a
  provider's capacity;
- requests a `<task>__collect` run for every partition whose answers were revoked since the last
  tick (CLI revoke, review reject), so its metadata and its business table's row count are current;
- logs every run it requests with its partition and why (collect due, settle, capacity freed,
  orphaned intents, retry due, revoked);
- tries again to delete provider-side files whose deletion after download failed (retention).

Every sensor plans the runs of every task; before asking Dagster for them it claims their run keys
in the ledger (ledger/run_requests.py), so a run two sensors plan is asked for once.

Runs carry the tags `batch_assets/task`, `batch_assets/partition` and `batch_assets/attempt` (the
highest shard attempt of the partition), so they can be found per task and partition.

The sensor declares every task's jobs as its targets. Dagster copies each component's definitions
(metadata), and one job may not be defined twice, so the sensors are built from the jobs the loaded
definitions hold (`build_provider_status_sensors`, called by batch_assets.definitions) rather than
at import time.
"""

import json
import time
from dataclasses import dataclass
from datetime import datetime

import dagster as dg

from batch_assets.components.asset_metadata import task_partition_tag
from batch_assets.components.wiring import COLLECT_STAGES, REPORT_STAGE, SETTLED_STAGE, SUBMIT_STAGES
from batch_assets.formatting import format_duration
from batch_assets.ledger.accounts import active_pauses
from batch_assets.ledger.job_reads import max_terminal_seq, partitions_with_orphaned_intents, shard_attempts
from batch_assets.ledger.run_requests import claim_run_keys
from batch_assets.pipeline.collect.collect_runs import (
    DEFAULT_MAX_COLLECT_TRIES,
    DEFAULT_RESULTS_WAIT_S,
    plan_collection,
)
from batch_assets.pipeline.collect.poll import partitions_waiting_to_submit, poll_jobs
from batch_assets.pipeline.collect.poll_scopes import BASE_SENSOR_NAME, EVERY_JOB, PollScope, poll_scopes
from batch_assets.pipeline.collect.stuck import StuckPolicy, handle_stuck_jobs, resolve_policy
from batch_assets.pipeline.govern.retention import delete_remote_files
from batch_assets.pipeline.send.submit import account_limits, release_claims_of_ended_runs
from batch_assets.pipeline.settle.partition_status import partitions_revoked_since, partitions_to_settle
from batch_assets.pipeline.settle.retry_ledger import pending_retries
from batch_assets.providers.registry import provider_limits
from batch_assets.resources import ProviderConfigurationError, ProvidersResource, WarehouseResource
from batch_assets.spec.resolve import load_tasks, task_id_for

POLL_BUDGET_S = 20.0
POLL_MAX_JOBS: int | None = None  # no cap on polls per tick: the time budget bounds them
REMOTE_DELETIONS_PER_TICK = 20  # failed provider-file deletions retried per tick (bounded tick time)
COLLECT_MAX_TRIES = DEFAULT_MAX_COLLECT_TRIES
RESULTS_WAIT_S = DEFAULT_RESULTS_WAIT_S
TAG_TASK, TAG_PARTITION, TAG_ATTEMPT = "batch_assets/task", "batch_assets/partition", "batch_assets/attempt"
TAG_REASON = "batch_assets/requested_because"  # why the sensor asked for the run (also in the tick log)
# A run of these statuses is still going (or about to): no second run of the same partition.
ACTIVE_RUN_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
SENSOR_NAME = BASE_SENSOR_NAME  # the default (unsharded) sensor


def _load_tasks() -> dict:
    """Every task spec that loads, read once per tick; a task file being edited (broken) must not
    stop polling (its jobs get the provider's stuck defaults and no automatic retries until it loads
    again), nor change the others' policies."""
    try:
        return load_tasks().tasks
    except Exception:
        return {}


def _policies(tasks: dict):
    """policy_for(task_name, provider): the task's stuck policy (provider defaults for a task not found)."""
    cache: dict[tuple[str, str], StuckPolicy] = {}

    def policy_for(task_name: str, provider: str) -> StuckPolicy:
        if (task_name, provider) not in cache:
            task = tasks.get(task_name)
            if task is not None:
                cache[task_name, provider] = resolve_policy(
                    task.limits.completion_window, task.limits.stuck, task.spec.stuck
                )
            else:
                limits = provider_limits(provider)
                cache[task_name, provider] = resolve_policy(limits.completion_window, limits.stuck)
        return cache[task_name, provider]

    return policy_for


# The assets each of a task's jobs materializes (components/task_jobs.py).
JOB_STAGES = {"submit": SUBMIT_STAGES, "collect": (*COLLECT_STAGES, REPORT_STAGE, SETTLED_STAGE)}


def _covers(tags: dict, day: str) -> bool:
    """Whether a run's partition tags (one day, or a range of a backfill run) include `day`."""
    if tags.get("dagster/partition") == day:
        return True
    start, end = tags.get("dagster/asset_partition_range_start"), tags.get("dagster/asset_partition_range_end")
    return bool(start and end and start <= day <= end)


@dataclass(frozen=True)
class _ActiveRuns:
    """The runs queued or going at the tick's start, whoever launched them (this sensor, a schedule,
    the CLI, a backfill, or the UI as an asset materialization): seen by the tags Dagster sets at
    launch (partition or range) and the run's job or asset selection, not by tags set inside a run."""

    runs: tuple

    @classmethod
    def of(cls, instance: dg.DagsterInstance) -> "_ActiveRuns":
        return cls(tuple(instance.get_runs(filters=dg.RunsFilter(statuses=ACTIVE_RUN_STATUSES))))

    def running(self, job_name: str, day: str) -> bool:
        """Whether a run doing `job_name`'s work (its job, or any of its assets) for `day` is going."""
        task, _, kind = job_name.partition("__")
        keys = {dg.AssetKey([task, stage]) for stage in JOB_STAGES[kind]}
        return any(
            _covers(run.tags, day) and (run.job_name == job_name or bool(keys & set(run.asset_selection or ())))
            for run in self.runs
        )


def _ended(instance: dg.DagsterInstance, owner: str) -> bool:
    """Whether a claim owner is a Dagster run that has finished (owners that are not run ids: no)."""
    try:
        run = instance.get_run_by_id(owner)
    except Exception:  # not a run id the storage understands
        return False
    return run is not None and run.is_finished


def _tags(task: str, day: str, attempt: int, **extra: str) -> dict[str, str]:
    return {TAG_TASK: task, TAG_PARTITION: day, TAG_ATTEMPT: str(attempt), **task_partition_tag(task, day), **extra}


def build_provider_status_sensors(jobs: list, scopes: list[PollScope] | None = None) -> list[dg.SensorDefinition]:
    """The status sensors (`scopes`, default: as $BATCH_ASSETS_POLL_SENSORS says), each targeting
    `jobs` (every task's `<task>__submit` and `<task>__collect`)."""
    return [_status_sensor(jobs, scope) for scope in scopes or poll_scopes()]


def _status_sensor(jobs: list, scope: PollScope) -> dg.SensorDefinition:
    def tick(
        context: dg.SensorEvaluationContext, warehouse: WarehouseResource, providers: ProvidersResource
    ) -> dg.SensorResult:
        return provider_status_tick(context, warehouse, providers, scope)

    polls = "every provider batch" if scope == EVERY_JOB else f"the provider batches of {_scope_text(scope)}"
    return dg.sensor(
        name=scope.name,
        jobs=jobs,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Polls {polls}, records state transitions, flags and cancels stuck jobs, requests "
        "collect runs for partitions with uncollected results and submit runs for waiting shards.",
    )(tick)


def _scope_text(scope: PollScope) -> str:
    parts = [f"provider {', '.join(scope.providers)}"] if scope.providers else []
    if scope.buckets > 1:
        parts.append(f"task bucket {scope.bucket + 1} of {scope.buckets}")
    return " and ".join(parts)


def _log_polls(log, polled) -> None:
    for job_key, old, new in polled.transitions:
        log.info(f"{job_key}: {old} -> {new}")
    for job_key, reason in polled.batch_failures.items():
        log.warning(f"{job_key}: provider batch ended {reason}")
    for job_key, err in polled.errors.items():
        log.warning(f"{job_key}: poll failed, retried next tick: {err}")
    for provider, err in polled.listing_errors.items():
        log.warning(f"{provider}: listing its batches failed, its jobs were retrieved one by one: {err}")


def _retry_remote_deletions(wh, providers: ProvidersResource, tasks: dict, log, scope: PollScope) -> None:
    """Provider-side files whose deletion failed after download are tried again (collect runs delete
    the others right after ingesting; jobs never tried are theirs, so no race with a running collect),
    each by the sensor whose scope holds its task."""
    deleting = sorted(
        name
        for name, task in tasks.items()
        if task.spec.retention.delete_remote_files and scope.holds(name, task.spec.provider)
    )
    if not deleting:
        return
    retried = delete_remote_files(
        wh, providers.adapter, task_names=deleting, retry_only=True, limit=REMOTE_DELETIONS_PER_TICK
    )
    for job_key, err in retried.failed.items():
        log.warning(f"{job_key}: deleting its provider files failed again, retried next tick: {err}")


@dataclass(frozen=True)
class _LedgerState:
    """What one tick reads from (and settles in) the ledger, over one connection."""

    stuck: object
    plan: object
    attempts: dict
    high_water: int
    waiting_to_submit: list
    released: int
    orphaned: list
    settle_due: list
    revoked: list

    def attempt_of_jobs(self, task_name: str, day: str) -> int | None:
        return self.attempts.get((task_name, day), (None, 1))[0]

    def attempt_of_shards(self, task_name: str, day: str) -> int:
        return self.attempts.get((task_name, day), (None, 1))[1]


def _account_limits(providers: ProvidersResource):
    """An account's limits as its submit runs count them (its connection's, else limits.yaml)."""

    def limits_of(provider: str, _account: str):
        try:
            settings = providers.settings_for(provider)
        except ProviderConfigurationError:  # no key: its submit runs fail and say so; count the defaults
            return account_limits(provider)
        return account_limits(provider, settings)

    return limits_of


def _read_ledger(
    wh,
    tasks: dict,
    providers: ProvidersResource,
    instance: dg.DagsterInstance,
    revoked_since: datetime | None,
    scope: PollScope,
) -> _LedgerState:
    # One connection for the tick's ledger work (opening one is not free).
    with wh.connect() as conn:
        # Stuck jobs are acted on by the sensor whose scope polls them.
        stuck = handle_stuck_jobs(wh, _policies(tasks), providers.adapter, conn, in_scope=scope.holds)
        plan = plan_collection(wh, COLLECT_MAX_TRIES, RESULTS_WAIT_S, conn)
        attempts = shard_attempts(conn)
        high_water = max_terminal_seq(conn)
        waiting_to_submit = partitions_waiting_to_submit(wh, conn, _account_limits(providers))
        # Claims held by runs Dagster reports ended (failed, cancelled, killed and marked by run
        # monitoring) are released now rather than when their lease runs out; the intents they and
        # expired leases leave are sent to a submit run, which looks each up before creating anything.
        released = release_claims_of_ended_runs(conn, lambda owner: _ended(instance, owner))
        orphaned = partitions_with_orphaned_intents(conn)
        settle_due = partitions_to_settle(conn)
        revoked = partitions_revoked_since(conn, revoked_since)
    return _LedgerState(stuck, plan, attempts, high_water, waiting_to_submit, released, orphaned, settle_due, revoked)


def _log_stuck_and_uncollected(log, stuck, plan) -> None:
    for job in stuck.newly_stuck:
        log.warning(
            f"{job['job_key']} ({job['task_name']}): stuck in {job['state']} for "
            f"{format_duration(job['seconds_in_state'])}, over its SLA"
        )
    for job in stuck.cancelled:
        log.warning(
            f"{job['job_key']} ({job['task_name']}): stuck in {job['state']} for "
            f"{format_duration(job['seconds_in_state'])}; cancel requested (its unfinished items are sent again)"
        )
    for job_key, err in stuck.errors.items():
        log.warning(f"{job_key}: cancelling the stuck job failed, tried again next tick: {err}")
    for job in plan.results_not_ready:
        message = (
            f"{job['job_key']}: {job['state']} but its results are not ready yet ({format_duration(job['seconds'])})"
        )
        (log.warning if job["seconds"] > RESULTS_WAIT_S else log.info)(message + "; polled again next tick")
    for job in plan.given_up:
        log.warning(
            f"{job.job_key} ({job.task_name} {job.partition_date}): not collected after "
            f"{job.collect_attempts} collect runs, no longer requested: {job.reason}"
            + (f"; last error: {job.collect_error}" if job.collect_error else "")
        )


def _collect_requests(active: _ActiveRuns, state: _LedgerState, log) -> list[dg.RunRequest]:
    """A collect run per partition with uncollected terminal jobs, unless one is going."""
    requests = []
    for r in state.plan.requests:
        job_name = f"{r.task_name}__collect"
        if active.running(job_name, r.partition_date):
            log.info(f"{job_name} {r.partition_date}: a collect run is in progress; not requested again")
            continue
        if r.generation > 0:
            log.warning(
                f"{job_name} {r.partition_date}: requested again (try {r.tries + 1} of at most "
                f"{COLLECT_MAX_TRIES} per job): {r.describe()}"
            )
        requests.append(
            dg.RunRequest(
                run_key=r.run_key,
                job_name=job_name,
                partition_key=r.partition_date,
                tags=_tags(
                    r.task_name,
                    r.partition_date,
                    state.attempt_of_jobs(r.task_name, r.partition_date) or r.attempt,
                    **{
                        "batch_assets/jobs": ",".join(r.job_keys)[:1000],
                        TAG_REASON: f"collect due: {r.describe()}"[:500],
                    },
                ),
            )
        )
    return requests


def _settle_requests(active: _ActiveRuns, state: _LedgerState, log) -> list[dg.RunRequest]:
    """A collect run for each partition with nothing to send and no provider job, not final yet: no
    job will ever end for it, so only this run settles it. Not while a submit or collect run of the
    partition is going (it may still cut or quarantine); the run key is the frozen manifest's, so it
    is asked for once (again after a refreeze)."""
    requests = []
    for due in state.settle_due:
        job_name = f"{due.task_name}__collect"
        if active.running(f"{due.task_name}__submit", due.partition_date) or active.running(
            job_name, due.partition_date
        ):
            continue
        log.info(f"{job_name} {due.partition_date}: requested to settle {due.task_id}: {due.reason}")
        requests.append(
            dg.RunRequest(
                run_key=due.run_key,
                job_name=job_name,
                partition_key=due.partition_date,
                tags=_tags(
                    due.task_name,
                    due.partition_date,
                    state.attempt_of_shards(due.task_name, due.partition_date),
                    **{"batch_assets/settle": due.reason[:200], TAG_REASON: f"settle: {due.reason}"},
                ),
            )
        )
    return requests


def _revoke_requests(state: _LedgerState) -> list[dg.RunRequest]:
    """A collect run for each partition with answers revoked since the last tick: it applies nothing
    again and records the partition's figures and its business table's rows as they now are."""
    requests = []
    for r in state.revoked:
        job_name = f"{r.task_name}__collect"
        requests.append(
            dg.RunRequest(
                run_key=r.run_key,
                job_name=job_name,
                partition_key=r.partition_date,
                tags=_tags(
                    r.task_name,
                    r.partition_date,
                    state.attempt_of_shards(r.task_name, r.partition_date),
                    **{TAG_REASON: f"revoked: {r.revoked} answer(s) of {r.task_id} taken back"},
                ),
            )
        )
    return requests


def _log_requests(log, requests: list[dg.RunRequest]) -> None:
    """Every run asked for, with its partition and why."""
    for r in requests:
        log.info(f"requested {r.job_name} {r.partition_key}: {r.tags.get(TAG_REASON, '-')[:300]}")


def _revoked_cursor(cursor: dict, state: _LedgerState) -> str | None:
    """The newest revocation acted on, so the next tick asks only for later ones."""
    latest = [r.last_revoked_at.isoformat() for r in state.revoked]
    return max([*latest, *([cursor["revoked_at"]] if cursor.get("revoked_at") else [])], default=None)


def _submissions_request(task_name: str, day: str, run_key: str, attempt: int, **tags: str) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=run_key,
        job_name=f"{task_name}__submit",
        partition_key=day,
        asset_selection=[dg.AssetKey([task_name, "submissions"])],
        tags=_tags(task_name, day, attempt, **tags),
    )


def _capacity_requests(state: _LedgerState, now_s: float) -> list[dg.RunRequest]:
    """Shards waiting for quota go out once their account has room; the run key changes only when a
    job has finished since (or, for a wait on the creation cap, once a minute), so a waiting
    partition is asked for once per chance."""
    requests = []
    for w in state.waiting_to_submit:
        minute = f":m{int(now_s // 60)}" if w.rate_capped else ""
        requests.append(
            _submissions_request(
                w.task_name,
                w.partition_date,
                f"submit:{w.task_name}:{w.partition_date}:{state.high_water}{minute}",
                state.attempt_of_shards(w.task_name, w.partition_date),
                **{
                    "batch_assets/waiting_shards": str(w.shards),
                    TAG_REASON: f"capacity freed: {w.shards} shard(s) waiting",
                },
            )
        )
    return requests


def _orphan_requests(active: _ActiveRuns, state: _LedgerState, log) -> list[dg.RunRequest]:
    """A submit run for intents left without a batch and without a live run."""
    if state.released:
        log.warning(f"released {state.released} intent claim(s) of runs that ended without creating their batch")
    requests = []
    for task_name, day, intents, fingerprint in state.orphaned:
        if active.running(f"{task_name}__submit", day):
            continue  # a submit run of the partition is going: it takes the intents up itself
        log.warning(
            f"{task_name} {day}: {intents} intent(s) without a batch and without a live run; "
            "a submit run looks them up and creates only what the provider lacks"
        )
        requests.append(
            _submissions_request(
                task_name,
                day,
                f"resume:{task_name}:{day}:{fingerprint}:{state.high_water}",
                state.attempt_of_shards(task_name, day),
                **{"batch_assets/orphaned_intents": str(intents), TAG_REASON: f"orphaned intents: {intents}"},
            )
        )
    return requests


def _retry_requests(wh, tasks: dict) -> list[dg.RunRequest]:
    """Retries the retry ledger decided on go out once their backoff has passed (tasks with
    automatic retries); the run key changes with what is due, so each wave is asked for once."""
    automatic = {name for name, task in tasks.items() if task.spec.retry.automatic}
    return [
        _submissions_request(
            row["task_name"],
            row["partition_date"],
            f"retry:{row['task_name']}:{row['partition_date']}:a{row['next_attempt']}:{row['due']}",
            int(row["next_attempt"]),
            **{"batch_assets/retries_due": str(row["due"]), TAG_REASON: f"retry due: {row['due']} item(s)"},
        )
        for row in pending_retries(wh)
        if row["due"] and row["task_name"] in automatic
    ]


def _without_paused_accounts(wh, tasks: dict, submit: list[dg.RunRequest], log) -> list[dg.RunRequest]:
    """The submit requests minus those of providers whose account is paused (ledger.account_pause):
    the send gate would refuse them. Each paused account is logged with its cause and fix every tick."""
    with wh.connect() as conn:
        pauses = active_pauses(conn)
    for pause in pauses:
        log.warning(
            f"{pause['provider']}: account paused since {pause['paused_at']:%Y-%m-%d %H:%M:%S} UTC "
            f"({pause['error_code']} on {pause['task_id']}); nothing is sent to it. Fix: {pause['fix']}, "
            f"then run `batch-assets resume {pause['provider']}`"
        )
    paused = {pause["provider"] for pause in pauses}

    def provider_of(request: dg.RunRequest) -> str | None:
        task = tasks.get((request.job_name or "").removesuffix("__submit"))
        return task.spec.provider if task is not None else None

    return [r for r in submit if provider_of(r) not in paused] if paused else submit


def _claimed(wh, sensor: str, *groups: list[dg.RunRequest], log) -> list[list[dg.RunRequest]]:
    """Each group of requests, less those whose run key another status sensor already asked for
    (ledger/run_requests.py; one statement for all), so sensors with overlapping scopes ask once."""
    keyed = [r for group in groups for r in group if r.run_key]
    if not keyed:
        return list(groups)
    with wh.control() as conn:
        won = claim_run_keys(
            conn, sensor, [(r.run_key, task_id_for(r.tags[TAG_TASK], r.tags[TAG_PARTITION]), r.job_name) for r in keyed]
        )
    for r in keyed:
        if r.run_key not in won:
            log.info(f"{r.job_name} {r.partition_key}: already asked for by another status sensor ({r.run_key})")
    return [[r for r in group if not r.run_key or r.run_key in won] for group in groups]


def provider_status_tick(
    context: dg.SensorEvaluationContext,
    warehouse: WarehouseResource,
    providers: ProvidersResource,
    scope: PollScope = EVERY_JOB,
) -> dg.SensorResult:
    wh, log = warehouse.warehouse(), context.log
    tasks = _load_tasks()
    polled = poll_jobs(
        wh, providers.adapter, budget_s=POLL_BUDGET_S, max_jobs=POLL_MAX_JOBS, scope=scope, poller=scope.name
    )
    _log_polls(log, polled)
    _retry_remote_deletions(wh, providers, tasks, log, scope)
    cursor = json.loads(context.cursor) if context.cursor else {}
    since = datetime.fromisoformat(cursor["revoked_at"]) if cursor.get("revoked_at") else None
    state = _read_ledger(wh, tasks, providers, context.instance, since, scope)
    _log_stuck_and_uncollected(log, state.stuck, state.plan)
    active = _ActiveRuns.of(context.instance)
    collect = [
        *_collect_requests(active, state, log),
        *_settle_requests(active, state, log),
        *_revoke_requests(state),
    ]
    submit = [
        *_capacity_requests(state, time.time()),
        *_orphan_requests(active, state, log),
        *_retry_requests(wh, tasks),
    ]
    submit = _without_paused_accounts(wh, tasks, submit, log)
    collect, submit = _claimed(wh, scope.name, collect, submit, log=log)
    stuck = state.stuck
    n_stuck = len(stuck.newly_stuck) + len(stuck.still_stuck) + len(stuck.cancelled)
    held = f" (another poller was polling {polled.held_elsewhere})" if polled.held_elsewhere else ""
    log.info(
        f"polled {polled.polled}{held}, transitions {len(polled.transitions)}, collect requests {len(collect)}, "
        f"submit requests {len(submit)}, stuck {n_stuck} "
        f"(newly {len(stuck.newly_stuck)}, cancelled {len(stuck.cancelled)}), "
        f"collect given up {len(state.plan.given_up)}, results not ready {len(state.plan.results_not_ready)}"
    )
    _log_requests(log, [*collect, *submit])
    new_cursor = {"terminal_seq": state.high_water, "revoked_at": _revoked_cursor(cursor, state)}
    return dg.SensorResult(run_requests=[*collect, *submit], cursor=json.dumps(new_cursor))
