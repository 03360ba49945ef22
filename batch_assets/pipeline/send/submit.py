"""Stage 3 — submit shards as provider batches, exactly once.

Per shard: claim the intent (provider_job row in state CREATED, owned by this run for a lease) →
prepare the input (upload where the provider takes files) → record the file id → renew the claim →
create the batch (tagged with the job_key) → record the batch id and release the claim. The intent
records where the job goes (emulator or live, `scheme://host[:port]`, never a key) and the request
options its lines were rendered with (`wire.WireFormat.request_options`), for every caller. Each step
is committed before the next network call, so after a crash anywhere the job is found again
(`find_job`) instead of being created twice: a duplicate submission is duplicate billing.

Exactly once:
- Claims. A run inserts a new intent already claimed (a second run inserting the same job_key
  loses on the primary key) or claims an existing one with one guarded UPDATE (free, lease
  expired, or its own). A run that does not win a shard neither uploads nor creates: it skips the
  shard and says so (`claimed_elsewhere`). The claim is renewed (strictly) before every create.
- Ambiguous creates are never guessed. A create without an answer (timeout, dropped connection,
  5xx, 429) is recorded as unknown and looked up: FOUND → adopted; ABSENT (confirmed) → created
  again (bounded, with backoff); CANNOT_TELL → nothing is created: the job stays undecided with
  the reason, and the next submit run looks again (or an operator settles it with
  `batch-assets jobs adopt|abandon`). A re-run that finds an intent without a batch id does the same.
- An abandoned intent's job key is never used again: the shard goes under the next one (`…:job2`).

Quota: before a new intent is recorded, the shard is admitted against its provider account's
limits (concurrent batches, enqueued tokens per model, creations per minute; a task's lower limits
too) in the same transaction (ledger.admission); a shard that does not fit, or has a waiter of
higher effective priority ahead of it, waits in the ledger's queue until a later run admits it.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from batch_assets.ledger.admission import (
    DEFAULT_AGEING_S,
    PRIORITY_RANKS,
    Candidate,
    QuotaLimits,
    Wait,
    admit,
    mark_waiting,
)
from batch_assets.ledger.job_reads import has_batch, intent_claim_owners, known_batch_ids, shards_with_live_jobs
from batch_assets.ledger.jobs import (
    DEFAULT_CLAIM_LEASE_S,
    claim_intent,
    claim_new_intent,
    mark_create_failed,
    mark_create_unknown,
    record_created,
    record_found,
    release_claim,
    release_claims_of,
    renew_claim,
    set_input_file,
)
from batch_assets.ledger.shards import resends_unmatched
from batch_assets.ledger.states import TaskStatus
from batch_assets.ledger.tasks import set_task_status
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline import faultpoints
from batch_assets.pipeline.govern.send_gate import require_may_send
from batch_assets.providers.contract import (
    JOB_KEY_METADATA,
    BatchError,
    BatchProvider,
    ClientSettings,
    CreateOutcome,
    CreateRequest,
    FindHints,
    FindOutcome,
    FindResult,
    InputKind,
    PreparedInput,
)
from batch_assets.providers.registry import job_endpoint, provider_limits, wire_format
from batch_assets.spec.resolve import ResolvedTask


@dataclass(frozen=True)
class SubmitSummary:
    task_id: str
    submitted: list[str]
    recovered: list[str]
    waiting_for_capacity: int
    already_submitted: int
    # Job keys of shards another submit run holds (its claim is live): skipped by this run.
    claimed_elsewhere: list[str] = field(default_factory=list)
    # Job keys whose create may or may not have happened and the provider cannot tell yet -> why.
    # Nothing was created for them; the next submit run looks again.
    undecided: dict[str, str] = field(default_factory=dict)
    # Shard ids waiting for quota -> why (the limit, or the waiter ahead of them).
    waiting_for_quota: dict[str, str] = field(default_factory=dict)


# A batch created just before the intent's clock reading (clock skew) is still looked at.
CLOCK_SKEW_S = 3600
# Pause before creating again after an unknown outcome and a confirmed absence, doubled each time.
CREATE_BACKOFF_S = 0.5


class SubmissionRefused(RuntimeError):
    """The provider refused a batch outright (nothing was created)."""


class SubmissionUnresolved(RuntimeError):
    """A create kept ending in an unknown outcome, and the batch was confirmed absent each time."""


def job_key_for(shard_id: str, number: int = 1) -> str:
    """The shard's `number`-th job key; a new one only after an operator abandoned the previous."""
    return f"{shard_id}:job{number}"


def new_run_owner(run_id: str | None = None) -> str:
    """Who holds claims for this submit run: the Dagster run id when there is one, else a fresh id."""
    return run_id or f"{uuid.uuid4().hex}:pid{os.getpid()}"


def _error_text(error: BatchError | None, status_code: int | None) -> str:
    parts = [f"HTTP {status_code}" if status_code else None, f"{error.code}: {error.message}" if error else None]
    return " ".join(p for p in parts if p) or "no answer"


class _ClaimLost(Exception):
    """The run's claim on the intent is gone (expired and taken over, or released): stop this shard."""


@dataclass
class _Run:
    wh: Warehouse
    task: ResolvedTask
    task_id: str
    adapter: BatchProvider
    owner: str
    lease_s: float
    limits: QuotaLimits
    priority: int  # PRIORITY_RANKS value of this run
    submitted: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    # Shards waiting for quota (recorded in the ledger by admission), with why.
    deferred: dict[str, str] = field(default_factory=dict)
    # Set once the account has no room for any shard: the run's other new shards wait with it.
    full: Wait | None = None
    already: int = 0
    claimed_elsewhere: list[str] = field(default_factory=list)
    undecided: dict[str, str] = field(default_factory=dict)

    @property
    def provider(self) -> str:
        return self.task.spec.provider

    @property
    def request_options(self) -> dict:
        """How the task's lines are rendered (e.g. which structured-output field), kept on each job."""
        return wire_format(self.provider, self.task.spec.endpoint).request_options(self.task)

    def hints(self, shard: dict, intent_unix: int) -> FindHints:
        with self.wh.control() as conn:
            known = known_batch_ids(conn, self.provider)
        return FindHints(
            created_after_unix=intent_unix - CLOCK_SKEW_S,
            line_count=int(shard["line_count"]),
            known_batch_ids=known,
            shard_path=self.wh.files.local(shard["path"]),
        )

    def candidate(self, shard: dict) -> Candidate:
        return Candidate(
            provider=self.provider,
            account=self.adapter.settings.account,
            model=self.task.spec.model,
            task_name=self.task.spec.name,
            shard_id=shard["shard_id"],
            est_tokens=int(shard["est_tokens"]),
            priority=self.priority,
        )

    @property
    def waiting(self) -> int:
        return len(self.deferred)

    def wait(self, shard: dict, wait: Wait) -> None:
        self.deferred[shard["shard_id"]] = wait.reason
        if wait.account_full:
            self.full = wait

    def wait_all(self, shards: list[dict]) -> None:
        """The account is full: the run's new shards wait behind it, recorded in one statement."""
        with self.wh.control() as conn:
            mark_waiting(conn, [self.candidate(s) for s in shards], self.full.reason)
        self.deferred.update({s["shard_id"]: self.full.reason for s in shards})

    # -- one shard ---------------------------------------------------------------------------------

    def shard(self, shard: dict) -> None:
        if shard["provider_batch_id"]:
            self.already += 1
            return
        job_key = shard["job_key"]
        if job_key is None:
            job_key = job_key_for(shard["shard_id"], int(shard["jobs_of_shard"]) + 1)
            mode, url = job_endpoint(self.provider, self.adapter.settings)
            won = False
            with self.wh.control() as conn:

                def take() -> bool:
                    nonlocal won
                    won = claim_new_intent(
                        conn,
                        job_key,
                        self.task_id,
                        shard["shard_id"],
                        self.provider,
                        self.task.spec.endpoint,
                        self.owner,
                        self.lease_s,
                        endpoint_mode=mode,
                        endpoint_url=url,
                        request_options=self.request_options,
                        account=self.adapter.settings.account,
                    )
                    return won

                waits = admit(conn, self.candidate(shard), self.limits, take)
                if waits is not None:
                    self.wait(shard, waits)
                    return
                lost_to_a_finished_run = not won and has_batch(conn, job_key)
            intent_unix, fresh = int(time.time()), True
        else:
            with self.wh.control() as conn:
                won = claim_intent(conn, job_key, self.owner, self.lease_s)
                lost_to_a_finished_run = not won and has_batch(conn, job_key)
            intent_unix, fresh = int(shard["intent_unix"]), False
        if not won:
            # Another run holds the shard (skipped here), or has already submitted it since this run looked.
            if lost_to_a_finished_run:
                self.already += 1
            else:
                self.claimed_elsewhere.append(job_key)
            return
        try:
            self.claimed(shard, job_key, intent_unix, fresh)
        except _ClaimLost:
            self.claimed_elsewhere.append(job_key)
        finally:
            # Also on a crash that unwinds (KeyboardInterrupt included); a killed process's claim expires.
            with contextlib.suppress(Exception), self.wh.control() as conn:
                release_claim(conn, job_key, self.owner)

    def claimed(self, shard: dict, job_key: str, intent_unix: int, fresh: bool) -> None:
        """The run holds the intent: look it up first if an earlier run may have created it, then create."""
        if not fresh:
            found = self.adapter.find_job(job_key, self.hints(shard, intent_unix))
            if self.settled_by_lookup(job_key, found, created_now=False, create_error=None):
                return
            # Absent: creating it takes a place like a new intent (this claim is not counted against itself).
            with self.wh.control() as conn:
                waits = admit(conn, self.candidate(shard), self.limits, lambda: True, exclude_job_key=job_key)
            if waits is not None:
                self.wait(shard, waits)
                return
        faultpoints.reached("submit.admitted")
        prepared = self.prepare(shard, job_key)
        self.create(shard, job_key, prepared, intent_unix)

    def settled_by_lookup(
        self, job_key: str, found: FindResult, *, created_now: bool, create_error: str | None
    ) -> bool:
        """Act on a lookup: FOUND -> adopt; CANNOT_TELL -> record undecided (nothing created);
        ABSENT -> False (creating is safe)."""
        if found.outcome == FindOutcome.FOUND:
            with self.wh.control() as conn:
                record_found(conn, job_key, found.snapshot, self.owner, found.reason)
            (self.submitted if created_now else self.recovered).append(job_key)
            return True
        if found.outcome == FindOutcome.CANNOT_TELL:
            reason = found.reason or "the provider cannot tell"
            detail = f"{reason} (create call: {create_error})" if create_error else reason
            with self.wh.control() as conn:
                mark_create_unknown(conn, job_key, detail)
            self.undecided[job_key] = detail  # the batch may exist: it keeps its place (ledger.admission)
            return True
        return False

    def prepare(self, shard: dict, job_key: str) -> PreparedInput:
        if shard["input_file_id"]:
            return PreparedInput(InputKind.FILE, self.wh.files.local(shard["path"]), shard["input_file_id"])
        inline_max = self.task.limits.max_inline_bytes
        if inline_max:
            with self.wh.connect() as conn:  # per-item tables
                if resends_unmatched(conn, shard["shard_id"]):
                    inline_max = 0  # its answers came back inline without their keys: send a file
        prepared = self.adapter.prepare_input(
            self.wh.files.local(shard["path"]), job_key, self.task.spec.endpoint, inline_max
        )
        if prepared.file_id:
            with self.wh.control() as conn:
                set_input_file(conn, job_key, prepared.file_id)
        return prepared

    def create(self, shard: dict, job_key: str, prepared: PreparedInput, intent_unix: int) -> None:
        """Create the batch; after an unknown outcome look it up: adopt it if found, stop (undecided)
        if the provider cannot tell, create again only on a confirmed absence (at most
        settings.max_retries more times, with backoff). A refusal raises."""
        spec, shard_id = self.task.spec, shard["shard_id"]
        request = CreateRequest(
            job_key=job_key,
            endpoint=spec.endpoint,
            model=spec.model,
            completion_window=self.task.limits.completion_window,
            line_count=int(shard["line_count"]),
            metadata={
                JOB_KEY_METADATA: job_key,
                "task_id": self.task_id,
                "shard_id": shard_id,
                "lines": str(shard["line_count"]),
            },
        )
        retries = self.adapter.settings.max_retries
        error = ""
        for attempt in range(retries + 1):
            with self.wh.control() as conn:
                if not renew_claim(conn, job_key, self.owner, self.lease_s):
                    raise _ClaimLost(job_key)
            result = self.adapter.create(request, prepared)
            if result.outcome == CreateOutcome.CREATED:
                with self.wh.control() as conn:
                    record_created(conn, job_key, result.snapshot, self.owner)
                self.submitted.append(job_key)
                return
            error = _error_text(result.error, result.status_code)
            if result.outcome == CreateOutcome.FAILED:
                with self.wh.control() as conn:
                    mark_create_failed(conn, job_key, error)
                details = result.error.as_dict() if result.error else {}
                raise SubmissionRefused(
                    f"{self.adapter.name} refused the batch for shard {shard_id} (job {job_key}): "
                    f"HTTP {result.status_code} {details}"
                )
            with self.wh.control() as conn:
                mark_create_unknown(conn, job_key, f"create call: {error}")
            found = self.adapter.find_job(job_key, self.hints(shard, intent_unix))
            if self.settled_by_lookup(job_key, found, created_now=True, create_error=error):
                return
            if attempt < retries:
                time.sleep(CREATE_BACKOFF_S * 2**attempt)
        raise SubmissionUnresolved(
            f"creating the {self.adapter.name} batch for shard {shard_id} (job {job_key}) "
            f"gave no answer {retries + 1} times and no such batch was found; last: {error}"
        )


def account_limits(provider: str, settings: ClientSettings | None = None) -> QuotaLimits:
    """A provider account's own limits: its connection's where set (tiers differ), else the
    provider's limits.yaml (also without settings)."""
    limits = provider_limits(provider)
    return QuotaLimits(
        max_jobs=getattr(settings, "account_max_concurrent_jobs", None) or limits.max_concurrent_jobs,
        max_tokens=getattr(settings, "account_max_enqueued_tokens", None) or limits.max_enqueued_tokens,
        max_creates_per_minute=getattr(settings, "account_max_creates_per_minute", None)
        or limits.max_creates_per_minute,
    )


def quota_limits(task: ResolvedTask, settings) -> QuotaLimits:
    """The account's limits (`account_limits`) and the task's own where it lowers them: the tighter wins."""
    account, own = account_limits(task.spec.provider, settings), task.limits
    max_jobs, max_tokens = account.max_jobs, account.max_tokens
    creates = [v for v in (account.max_creates_per_minute, own.max_creates_per_minute) if v]

    def lower(mine, theirs):
        return mine if mine is not None and mine < theirs else None

    return QuotaLimits(
        max_jobs=max_jobs,
        max_tokens=max_tokens,
        max_creates_per_minute=min(creates) if creates else None,
        task_max_jobs=lower(own.max_concurrent_jobs, max_jobs),
        task_max_tokens=lower(own.max_enqueued_tokens, max_tokens),
    )


def submit_pending(
    wh: Warehouse,
    task: ResolvedTask,
    partition_date: str,
    adapter: BatchProvider,
    *,
    run_id: str | None = None,
    lease_s: float = DEFAULT_CLAIM_LEASE_S,
    priority: str | None = None,
) -> SubmitSummary:
    """Submit the partition's shards that have no batch yet (see the module docstring). `run_id`
    (the Dagster run id, when there is one) owns this run's claims; `lease_s` is their lease;
    `priority` (low … urgent) overrides the task's for this run's admissions.
    Raises SendRefused, sending nothing, unless the gate (`may_send`) lets the partition through."""
    spec = task.spec
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    require_may_send(wh, task, partition_date)
    with wh.connect() as conn:
        shards = shards_with_live_jobs(conn, task_id, DEFAULT_AGEING_S)
    run = _Run(
        wh,
        task,
        task_id,
        adapter,
        new_run_owner(run_id),
        lease_s,
        limits=quota_limits(task, adapter.settings),
        priority=PRIORITY_RANKS[priority or spec.priority],
    )
    for i, shard in enumerate(shards):
        if run.full is not None:  # no room for a new intent: the rest of the new shards wait at once
            rest = [s for s in shards[i:] if s["job_key"] is None and not s["provider_batch_id"]]
            run.wait_all(rest)
            for s in shards[i:]:
                if s["job_key"] is not None:
                    run.shard(s)  # an intent of an earlier run is looked up before anything else
            break
        run.shard(shard)
    if run.submitted or run.recovered:
        with wh.control() as conn:
            set_task_status(conn, task_id, TaskStatus.SUBMITTED)
    return SubmitSummary(
        task_id,
        run.submitted,
        run.recovered,
        run.waiting,
        run.already,
        run.claimed_elsewhere,
        run.undecided,
        dict(run.deferred),
    )


# --- Intents left behind by runs that ended ------------------------------------------------------


def release_claims_of_ended_runs(conn, is_ended: Callable[[str], bool]) -> int:
    """Release the intent claims of owners `is_ended` says are gone (e.g. Dagster runs that failed
    or were cancelled): their shards need not wait out the lease. Returns how many were released."""
    return release_claims_of(conn, [owner for owner in intent_claim_owners(conn) if is_ended(owner)])
