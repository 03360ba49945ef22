"""A task partition's report: what became of every item, what it took (tokens, cost, time) and,
while work is under way, how far it got and when it should end.

Dagster-free. `build_report(conn, task_id)` reads the ledger once and returns a `PartitionReport`;
`report_markdown`, `report_numbers` and `render_html` turn it into Markdown tables, plain numbers
(for plots) and a standalone HTML page with two inline SVG charts (items by outcome; time each
provider job spent in each state); `write_report` writes the page to
`<data_dir>/reports/<task_id>.html`, `publish_report` where the deployment keeps reports (with
object storage: `reports/<task_id>.html` in the bucket).

The item counts are the reconciliation's (`pipeline.settle.reconcile`), so the report and the
reconciliation check never disagree. Times come from the providers' own timestamps of each batch
(created, in progress, finalizing, ended: `ledger.provider_job.provider_*_at`) where the provider
reports them, and only otherwise from what the ledger observed (submitted, terminal, status events
seen when the provider status sensor polls, so a state shorter than the poll interval is counted in
the state seen before it). A partition's queue and run times are unions of its jobs' intervals, so
parallel batches are not counted twice and the gaps between retry waves count as neither.
"""

from __future__ import annotations

import datetime as dt
import html
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from batch_assets.formatting import format_duration, format_money
from batch_assets.ledger.jobs import CreateMark
from batch_assets.ledger.partition_control import partition_views
from batch_assets.ledger.tasks import task_row
from batch_assets.pipeline.govern.cost import partition_gates
from batch_assets.pipeline.settle.reconcile import (
    DEFAULT_MAX_FAILED_FRACTION,
    Reconciliation,
    Verdict,
    batch_failure_reason,
    reconcile_conn,
)
from batch_assets.providers.contract import TERMINAL_STATES, JobState
from batch_assets.spec.failure_classes import FAILURE_CLASSES
from batch_assets.storage.run_files import RunFiles

# Final outcomes and the states of items that are not final yet, in display order.
FINAL_OUTCOMES = ("applied", "revoked", "stale", "quarantined", "final_failed", "compliance_held", "operator_canceled")
OPEN_STATES = ("in_flight", "collecting", "retry_pending", "undecided", "unsharded", "unresolved_missing", "unapplied")
OUTCOME_LABELS = {
    "applied": "applied",
    "revoked": "revoked after applying",
    "stale": "stale (source changed)",
    "quarantined": "quarantined before sending",
    "compliance_held": "held for compliance review",
    "operator_canceled": "canceled by an operator",
    "in_flight": "in flight",
    "collecting": "batch finished, results being collected",
    "retry_pending": "retry pending",
    "undecided": "failed, not decided yet",
    "unsharded": "not sharded yet",
    "unresolved_missing": "no outcome from a finished batch",
    "unapplied": "answer not applied",
}
RUNNING_STATES = (JobState.RUNNING.value, JobState.FINALIZING.value)
# The state shown for an intent an operator gave up (`jobs abandon`): no batch, never one; it ends then.
ABANDONED = "ABANDONED"
# The per-job table: where each job went and the request options its lines were rendered with.
JOB_HEADERS = [
    "provider job",
    "attempt",
    "lines",
    "state",
    "queue",
    "run",
    "total",
    "reason",
    "endpoint",
    "request options",
]
STATE_ORDER = tuple(s.value for s in JobState)


@dataclass(frozen=True)
class Tokens:
    input: int
    output: int
    thinking: int | None  # part of output; None: the provider reported no separate count
    answered_attempts: int  # attempts whose provider reported usage
    cached_input: int | None = None  # part of input, from the provider's prompt cache; None: not reported


@dataclass(frozen=True)
class Cost:
    estimated: float | None  # at freeze, for the live items
    actual: float | None  # from the providers' usage, every attempt
    currency: str | None


@dataclass(frozen=True)
class JobTiming:
    job_key: str
    attempt: int
    lines: int
    state: str
    created_at: dt.datetime  # the intent, recorded before the create call (ledger clock)
    submitted_at: dt.datetime | None
    # Running since: the provider's in-progress time, else when the ledger first saw it running.
    started_at: dt.datetime | None
    terminal_at: dt.datetime | None  # when the ledger saw it end (an abandoned intent: given up)
    segments: tuple[tuple[str, dt.datetime, dt.datetime], ...]  # (state, from, to)
    requests_done: int  # requests the provider reports finished (lines, once terminal)
    endpoint: str | None = None  # where it went: `emulator` | `live` and the host (None: not recorded)
    request_options: str | None = None  # the options its lines were rendered with (JSON)
    # Queued at the provider since: its created time, else the submission the ledger recorded.
    queued_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None  # the provider's end time, else terminal_at (None: not ended)
    reason: str | None = None  # the provider's error for the whole batch, as the reconciliation check names it

    def queue_s(self, now: dt.datetime) -> float:
        """Queued at the provider until it ran (until its end when it never ran)."""
        return _seconds(self.queued_at or self.created_at, self.started_at or self.ended_at or now)

    def run_s(self, now: dt.datetime) -> float:
        return _seconds(self.started_at, self.ended_at or now) if self.started_at else 0.0

    def total_s(self, now: dt.datetime) -> float:
        return _seconds(self.created_at, self.ended_at or now)

    def queue_interval(self, now: dt.datetime) -> tuple[dt.datetime, dt.datetime] | None:
        """[queued, running) at the provider; None for an intent no batch was created for."""
        if self.queued_at is None:
            return None
        return self.queued_at, max(self.queued_at, self.started_at or self.ended_at or now)

    def run_interval(self, now: dt.datetime) -> tuple[dt.datetime, dt.datetime] | None:
        if self.started_at is None:
            return None
        return self.started_at, max(self.started_at, self.ended_at or now)


@dataclass(frozen=True)
class Durations:
    """A partition's times in seconds (None: not applicable yet), as every surface shows them."""

    queue_s: float | None  # wall-clock time a batch waited at the provider while none of them ran
    run_s: float | None  # wall-clock time at least one batch ran at the provider
    total_s: float | None  # from the first job's intent until done (or now)


def _merged(intervals: list[tuple[dt.datetime, dt.datetime]]) -> list[tuple[dt.datetime, dt.datetime]]:
    out: list[tuple[dt.datetime, dt.datetime]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _length_s(intervals: list[tuple[dt.datetime, dt.datetime]]) -> float:
    return sum(_seconds(start, end) for start, end in intervals)


def _overlap_s(a: list[tuple[dt.datetime, dt.datetime]], b: list[tuple[dt.datetime, dt.datetime]]) -> float:
    """Seconds two merged interval lists share."""
    return sum(_seconds(max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b)


def durations(jobs: tuple[JobTiming, ...], finished_at: dt.datetime | None, now: dt.datetime) -> Durations:
    """Queue and run over the union of the jobs' intervals: parallel batches count once, and the time
    between retry waves (nothing at the provider) counts as neither; total from the first intent."""
    queued = _merged([i for j in jobs if (i := j.queue_interval(now))])
    running = _merged([i for j in jobs if (i := j.run_interval(now))])
    first = min((j.created_at for j in jobs), default=None)
    return Durations(
        queue_s=_length_s(queued) - _overlap_s(queued, running) if queued else None,
        run_s=_length_s(running) if running else None,
        total_s=_seconds(first, finished_at or now) if first else None,
    )


@dataclass(frozen=True)
class PartitionReport:
    task_id: str
    task_name: str
    partition_date: str
    provider: str
    model: str
    generated_at: dt.datetime
    reconciliation: Reconciliation
    verdict: Verdict
    tokens: Tokens
    cost: Cost | None
    jobs: tuple[JobTiming, ...]
    frozen_at: dt.datetime | None
    finished_at: dt.datetime | None  # when the partition's last item became final (None: not done)
    waiting_lines: int  # lines in shards no provider batch holds yet (incl. retries cut)
    eta_s: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    # --- items -----------------------------------------------------------------------------------
    @property
    def items(self) -> int:
        return self.reconciliation.manifest_items

    @property
    def done(self) -> bool:
        return self.verdict.final_status is not None

    def outcomes(self) -> dict[str, int]:
        """Every item counted once: final outcomes (final failures by class) then open states."""
        r = self.reconciliation
        out = {"applied": r.applied, "revoked": r.revoked, "stale": r.stale, "quarantined": r.quarantined}
        out |= {f"final_failed:{c}": r.final_failed.get(c, 0) for c in FAILURE_CLASSES}
        out |= {"compliance_held": r.compliance_held, "operator_canceled": r.operator_canceled}
        out |= {s: getattr(r, s) for s in OPEN_STATES}
        return out

    @property
    def final_items(self) -> int:
        return self.items - self.reconciliation.unresolved

    @property
    def completion_rate(self) -> float | None:
        """Share of the manifest's items in a final outcome."""
        return self.final_items / self.items if self.items else None

    @property
    def applied_rate(self) -> float | None:
        return self.reconciliation.applied / self.items if self.items else None

    @property
    def failure_rate(self) -> float | None:
        return self.reconciliation.final_failed_total / self.items if self.items else None

    # --- time ------------------------------------------------------------------------------------
    @property
    def submitted_at(self) -> dt.datetime | None:
        return min((j.submitted_at for j in self.jobs if j.submitted_at), default=None)

    @property
    def started_at(self) -> dt.datetime | None:
        return min((j.started_at for j in self.jobs if j.started_at), default=None)

    @property
    def durations(self) -> Durations:
        return durations(self.jobs, self.finished_at, self.generated_at)

    @property
    def queue_time_s(self) -> float | None:
        """Time a batch of the partition waited at the provider while none of them ran."""
        return self.durations.queue_s

    @property
    def run_time_s(self) -> float | None:
        """Time at least one batch of the partition ran at the provider (retry waves' gaps left out)."""
        return self.durations.run_s

    @property
    def total_time_s(self) -> float | None:
        """From the first provider job (its intent, before the create call) until done (or now)."""
        return self.durations.total_s

    def time_in_state_s(self) -> dict[str, float]:
        """Job-seconds per provider state, summed over the partition's jobs."""
        total: dict[str, float] = {}
        for job in self.jobs:
            for state, start, end in job.segments:
                total[state] = total.get(state, 0.0) + _seconds(start, end)
        return {s: total[s] for s in STATE_ORDER if s in total}


def _seconds(start: dt.datetime | None, end: dt.datetime | None) -> float:
    if start is None or end is None:
        return 0.0
    return max(0.0, (end - start).total_seconds())


# ------------------------------------------------------------------------------------------------
# Reading the ledger
# ------------------------------------------------------------------------------------------------


def token_figures(conn: duckdb.DuckDBPyConnection, task_id: str) -> Tokens:
    """Tokens of every attempt (each was paid for); thinking and cached input tokens as the
    providers report them apart (NULL where none did)."""
    inp, out, thinking, cached, answered = conn.execute(
        """
        SELECT coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), sum(thinking_tokens),
               sum(cached_input_tokens), count(*) FILTER (input_tokens IS NOT NULL OR output_tokens IS NOT NULL)
        FROM ledger.parsed_result WHERE task_id = ?""",
        [task_id],
    ).fetchone()
    return Tokens(
        int(inp),
        int(out),
        None if thinking is None else int(thinking),
        int(answered),
        None if cached is None else int(cached),
    )


def cost_figures(conn: duckdb.DuckDBPyConnection, task_id: str) -> Cost | None:
    """Estimated and actual cost in `batch_task.currency`, the same figures the gate, the CLI and the
    asset metadata show (`govern.cost.partition_gates`: estimated over the live items that are sent,
    quarantined ones left out; actual over every attempt). None while nothing is priced."""
    gate = partition_gates(conn, [task_id]).get(task_id)
    if gate is None or (gate.cost_estimated is None and gate.cost_actual is None):
        return None  # nothing priced (yet): the report says so rather than showing zeros
    return Cost(
        None if gate.cost_estimated is None else float(gate.cost_estimated),
        None if gate.cost_actual is None else float(gate.cost_actual),
        gate.currency,
    )


def _job_timings(conn: duckdb.DuckDBPyConnection, task_id: str, now: dt.datetime) -> tuple[JobTiming, ...]:
    with partition_views(conn, task_id):
        return _timings_of_views(conn, task_id, now)


def _timings_of_views(conn: duckdb.DuckDBPyConnection, task_id: str, now: dt.datetime) -> tuple[JobTiming, ...]:
    jobs = conn.execute(
        f"""
        SELECT j.job_key, s.attempt, s.line_count,
               -- An abandoned intent ends when the operator gave it up (its operator_action).
               CASE WHEN j.create_outcome = ? THEN ? ELSE j.state END, j.created_at, j.submitted_at,
               CASE WHEN j.create_outcome = ? THEN coalesce(
                   (SELECT max(a.acted_at) FROM part_action a
                    WHERE a.job_key = j.job_key AND a.action = 'abandon'), j.state_changed_at)
                    ELSE j.terminal_at END,
               coalesce(j.request_completed, 0) + coalesce(j.request_failed, 0),
               j.endpoint_mode || coalesce(' ' || nullif(j.endpoint_url, ''), ''), j.request_options,
               j.provider_created_at, j.provider_started_at, j.provider_finalizing_at, j.provider_ended_at,
               -- The provider's reason, read as the reconciliation reads it (only where there is one).
               j.state = '{JobState.FAILED.value}' OR j.provider_errors IS NOT NULL,
               CASE WHEN j.provider_errors IS NOT NULL THEN j.provider_errors::JSON ->> '$[0].code' END,
               CASE WHEN j.provider_errors IS NOT NULL THEN j.provider_errors::JSON ->> '$[0].message' END
        FROM part_job j JOIN part_shard s USING (shard_id)
        WHERE j.task_id = ? ORDER BY j.created_at, j.job_key""",
        [CreateMark.ABANDONED.value, ABANDONED, CreateMark.ABANDONED.value, task_id],
    ).fetchall()
    events: dict[str, list[tuple[str, dt.datetime]]] = {}
    for job_key, to_state, observed_at in conn.execute(
        """
            SELECT e.job_key, e.to_state, e.observed_at FROM part_event e ORDER BY e.event_no""",
    ).fetchall():
        seen = events.setdefault(job_key, [])
        if not seen or seen[-1][0] != to_state:  # a raw-status change within one state is no new segment
            seen.append((to_state, observed_at))
    out = []
    for row in jobs:
        (job_key, attempt, lines, state, created, submitted, terminal, done, endpoint, options) = row[:10]
        p_created, p_started, p_finalizing, p_ended, has_reason, code, message = row[10:]
        seen = events.get(job_key) or [(JobState.CREATED.value, created)]
        ended = (p_ended or terminal) if state in TERMINAL_STATES or state == ABANDONED else None
        if p_created is not None:  # the provider's own times, observations only where it gave none
            segments, queued, started, ended = _provider_segments(
                seen, created, p_created, p_started, p_finalizing, ended, now
            )
        else:
            segments, queued = _observed_segments(seen, created, ended or now), submitted
            started = next((t for s, t in seen if s in RUNNING_STATES), None)
        if state in TERMINAL_STATES:
            done = int(lines)
        out.append(
            JobTiming(
                job_key,
                int(attempt),
                int(lines),
                state,
                created,
                submitted,
                started,
                terminal,
                tuple(segments),
                int(done),
                endpoint,
                options,
                queued_at=queued,
                ended_at=ended,
                reason=batch_failure_reason(code, message) if has_reason else None,
            )
        )
    return tuple(out)


def _observed_segments(
    seen: list[tuple[str, dt.datetime]], created: dt.datetime, stop: dt.datetime
) -> list[tuple[str, dt.datetime, dt.datetime]]:
    """(state, from, to) from the status events alone, kept within the job's life (events and the job
    row are written a moment apart)."""
    segments = []
    for (s, start), nxt in zip(seen, [*seen[1:], None]):
        if s in TERMINAL_STATES:
            break
        start, end = max(start, created), min(nxt[1] if nxt else stop, stop)
        if end > start:
            segments.append((s, start, end))
    return segments


def _provider_segments(
    seen: list[tuple[str, dt.datetime]],
    created: dt.datetime,
    p_created: dt.datetime,
    p_started: dt.datetime | None,
    p_finalizing: dt.datetime | None,
    ended: dt.datetime | None,
    now: dt.datetime,
) -> tuple[list[tuple[str, dt.datetime, dt.datetime]], dt.datetime, dt.datetime | None, dt.datetime | None]:
    """The job's states timed by the provider: CREATED (the intent, until the provider created the
    batch), its waiting state as observed (VALIDATING, SUBMITTED), RUNNING from its in-progress time
    (else first seen running), FINALIZING from its finalizing time (else first seen), until its end.
    Each boundary is kept at or after the one before (the provider's clock is not the ledger's, and
    OpenAI's times are whole seconds). Returns (segments, queued, started, ended), so kept."""
    first_seen = {}
    for state, t in seen:
        first_seen.setdefault(state, t)
    waiting = next((s for s, _ in seen if s not in (JobState.CREATED.value, *RUNNING_STATES, *TERMINAL_STATES)), None)
    started = p_started or next((t for s, t in seen if s in RUNNING_STATES), None)
    finalizing = p_finalizing or first_seen.get(JobState.FINALIZING.value)
    marks = [(JobState.CREATED.value, created), (waiting or JobState.SUBMITTED.value, p_created)]
    if started is not None:
        marks.append((JobState.RUNNING.value, started))
    if finalizing is not None:
        marks.append((JobState.FINALIZING.value, finalizing))
    kept: list[tuple[str, dt.datetime]] = []
    for state, t in marks:
        kept.append((state, max(t, kept[-1][1]) if kept else t))
    ended = max(ended, kept[-1][1]) if ended is not None else None
    stop = ended or max(now, kept[-1][1])
    segments = [(state, start, end) for (state, start), (_, end) in zip(kept, [*kept[1:], (None, stop)]) if end > start]
    by_state = {state: t for state, t in reversed(kept)}
    queued = by_state[waiting or JobState.SUBMITTED.value]
    return segments, queued, by_state.get(JobState.RUNNING.value), ended


def _eta_s(jobs: tuple[JobTiming, ...], waiting_lines: int, retry_items: int, now: dt.datetime) -> float | None:
    """Remaining requests over the rate the provider got through them so far (None: no rate yet)."""
    started = min((j.started_at or j.submitted_at for j in jobs if j.started_at or j.submitted_at), default=None)
    done = sum(min(j.requests_done, j.lines) for j in jobs if j.submitted_at)
    elapsed = _seconds(started, now)
    if not done or not elapsed:
        return None
    # An abandoned intent's lines are its shard's, counted in waiting_lines until a new job sends them.
    remaining = sum(
        max(0, j.lines - j.requests_done) for j in jobs if j.state not in TERMINAL_STATES and j.state != ABANDONED
    )
    remaining += waiting_lines + retry_items
    return remaining / (done / elapsed)


def _finished_at(recorded: dt.datetime | None, jobs: tuple[JobTiming, ...], done: bool) -> dt.datetime | None:
    """When the partition was done (None while it is not): as recorded, or when its last job ended
    when final but not settled by the applied asset yet."""
    if not done:
        return None
    return recorded or max((j.terminal_at for j in jobs if j.terminal_at), default=None)


def partition_durations(
    conn: duckdb.DuckDBPyConnection, task_id: str, done: bool, now: dt.datetime | None = None
) -> Durations:
    """The partition's queue, run and total times as its report shows them (`done`: its verdict
    has a final status), for the surfaces that need only these (the CLI's report)."""
    now = now or conn.execute("SELECT now()::TIMESTAMP").fetchone()[0]
    jobs = _job_timings(conn, task_id, now)
    row = task_row(conn, task_id)
    return durations(jobs, _finished_at(row["finished_at"] if row else None, jobs, done), now)


def build_report(
    conn: duckdb.DuckDBPyConnection,
    task_id: str,
    max_failed_fraction: float = DEFAULT_MAX_FAILED_FRACTION,
    now: dt.datetime | None = None,
    empty_source: str = "warn",
) -> PartitionReport:
    """Everything the report shows about one task partition, read from the ledger."""
    with partition_views(conn, task_id):
        return _build_report(conn, task_id, max_failed_fraction, now, empty_source)


def _build_report(
    conn: duckdb.DuckDBPyConnection,
    task_id: str,
    max_failed_fraction: float,
    now: dt.datetime | None,
    empty_source: str,
) -> PartitionReport:
    now = now or conn.execute("SELECT now()::TIMESTAMP").fetchall()[0][0]
    rec = reconcile_conn(conn, task_id, max_failed_fraction, empty_source)
    verdict = rec.verdict()
    row = task_row(conn, task_id)
    if row is None:
        raise KeyError(f"no task partition {task_id!r} in the ledger")
    task_name, day, provider, model, frozen_at, finished_at = (
        row[k] for k in ("task_name", "day", "provider", "model", "created_at", "finished_at")
    )
    jobs = _job_timings(conn, task_id, now)
    waiting_lines = int(
        conn.execute(
            """
        SELECT coalesce(sum(s.line_count), 0) FROM part_shard s WHERE s.task_id = ?
          AND NOT EXISTS (SELECT 1 FROM part_job j WHERE j.shard_id = s.shard_id
                          AND j.provider_batch_id IS NOT NULL)""",
            [task_id],
        ).fetchone()[0]
    )
    done = verdict.final_status is not None
    finished_at = _finished_at(finished_at, jobs, done)
    notes = []
    if not jobs:
        notes.append("no provider job yet: nothing was submitted")
    tokens = token_figures(conn, task_id)
    if tokens.thinking is None and tokens.answered_attempts:
        notes.append("the provider reports no separate thinking count: any thinking is in the output tokens")
    cost = cost_figures(conn, task_id)
    if cost is None:
        notes.append("cost: the ledger has no cost columns yet")
    eta = None if done else _eta_s(jobs, waiting_lines, rec.retry_pending + rec.unsharded, now)
    return PartitionReport(
        task_id=task_id,
        task_name=task_name,
        partition_date=day,
        provider=provider,
        model=model,
        generated_at=now,
        reconciliation=rec,
        verdict=verdict,
        tokens=tokens,
        cost=cost,
        jobs=jobs,
        frozen_at=frozen_at,
        finished_at=finished_at,
        waiting_lines=waiting_lines,
        eta_s=eta,
        notes=tuple(notes),
    )


# ------------------------------------------------------------------------------------------------
# Numbers and Markdown
# ------------------------------------------------------------------------------------------------


def report_numbers(r: PartitionReport) -> dict[str, int | float]:
    """Plain numbers (no None) for plots: item counts by outcome, rates, tokens, cost, seconds."""
    rec = r.reconciliation
    out: dict[str, int | float] = {
        "items": r.items,
        "final_items": r.final_items,
        "applied": rec.applied,
        "revoked": rec.revoked,
        "stale": rec.stale,
        "quarantined": rec.quarantined,
        "source_rejects": rec.source_rejects,
        "final_failed": rec.final_failed_total,
        "compliance_held": rec.compliance_held,
        "operator_canceled": rec.operator_canceled,
        "in_flight": rec.in_flight,
        "collecting": rec.collecting,
        "retry_pending": rec.retry_pending,
        "unresolved": rec.unresolved,
        "retried": rec.retried,
        "max_attempt": rec.max_attempt,
        "provider_jobs": len(r.jobs),
        "input_tokens": r.tokens.input,
        "output_tokens": r.tokens.output,
    }
    for cls in FAILURE_CLASSES:
        out[f"final_failed_{cls}"] = rec.final_failed.get(cls, 0)
    optional = {
        "completion_rate": r.completion_rate,
        "applied_rate": r.applied_rate,
        "failure_rate": r.failure_rate,
        "thinking_tokens": r.tokens.thinking,
        "cached_input_tokens": r.tokens.cached_input,
        "queue_time_s": r.queue_time_s,
        "run_time_s": r.run_time_s,
        "total_time_s": r.total_time_s,
        "eta_s": r.eta_s,
        "estimated_cost": r.cost.estimated if r.cost else None,
        "actual_cost": r.cost.actual if r.cost else None,
    }
    out |= {k: round(v, 6) if isinstance(v, float) else v for k, v in optional.items() if v is not None}
    out |= {f"time_in_{s.lower()}_s": round(v, 3) for s, v in r.time_in_state_s().items()}
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def outcome_rows(r: PartitionReport) -> list[tuple[str, str, int]]:
    """(group, label, items) for every outcome with items (applied always), final outcomes first."""
    rows = []
    for key, n in r.outcomes().items():
        if key.startswith("final_failed:"):
            group, label = "final", f"final failed: {key.split(':', 1)[1]}"
        else:
            group = "final" if key in FINAL_OUTCOMES else "open"
            label = OUTCOME_LABELS[key]
        if n or key == "applied":
            rows.append((group, label, n))
    return rows


def _md_table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def summary_line(r: PartitionReport) -> str:
    status = r.verdict.label or "IN PROGRESS"
    eta = f", ETA {format_duration(r.eta_s)}" if r.eta_s is not None else ""
    return (
        f"{r.task_id} ({r.provider} {r.model}): {status}; {r.final_items}/{r.items} items final "
        f"({_pct(r.completion_rate)}), {r.reconciliation.applied} applied{eta}"
    )


def timing_rows(r: PartitionReport) -> list[list[str]]:
    rows = [
        ["queue (a batch waiting at the provider, none running)", format_duration(r.queue_time_s)],
        ["run (a batch running at the provider)", format_duration(r.run_time_s) + ("" if r.done else " so far")],
        ["total (first job → done)", format_duration(r.total_time_s) + ("" if r.done else " so far")],
    ]
    rows += [[f"in {s} (job time)", format_duration(v)] for s, v in r.time_in_state_s().items()]
    if not r.done:
        rows.append(["ETA", format_duration(r.eta_s) if r.eta_s is not None else "unknown (no progress reported yet)"])
    return rows


def usage_rows(r: PartitionReport) -> list[list[str]]:
    t = r.tokens
    rows = [
        ["input tokens", f"{t.input:,}"],
        ["output tokens", f"{t.output:,}"],
        ["thinking tokens (in output)", f"{t.thinking:,}" if t.thinking is not None else "not reported apart"],
        ["cached input tokens (in input)", f"{t.cached_input:,}" if t.cached_input is not None else "not reported"],
        ["attempts with usage", str(t.answered_attempts)],
    ]
    if r.cost is None:
        rows.append(["cost", "not recorded in the ledger"])
    else:
        rows += [
            ["estimated cost", format_money(r.cost.estimated, r.cost.currency)],
            ["actual cost", format_money(r.cost.actual, r.cost.currency)],
        ]
    return rows


def report_markdown(r: PartitionReport, max_jobs: int = 20) -> str:
    rec = r.reconciliation
    parts = [
        f"**{summary_line(r)}**",
        "",
        _md_table(
            ["outcome", "items"],
            [[f"{label} ({group})", n] for group, label, n in outcome_rows(r)] + [["**total**", r.items]],
        ),
        "",
        _md_table(
            ["retries", ""],
            [
                ["items sent more than once", rec.retried],
                ["highest attempt", rec.max_attempt],
                ["source rows rejected (not items)", rec.source_rejects],
            ],
        ),
        "",
        _md_table(["time", ""], timing_rows(r)),
        "",
        _md_table(["usage", ""], usage_rows(r)),
    ]
    if r.jobs:
        now = r.generated_at
        rows = [
            [
                j.job_key,
                j.attempt,
                j.lines,
                j.state,
                format_duration(j.queue_s(now)),
                format_duration(j.run_s(now)),
                format_duration(j.total_s(now)),
                j.reason or "-",
                j.endpoint or "-",
                j.request_options or "-",
            ]
            for j in r.jobs[:max_jobs]
        ]
        parts += ["", _md_table(JOB_HEADERS, rows)]
        if len(r.jobs) > max_jobs:
            parts.append(f"\n… and {len(r.jobs) - max_jobs} more jobs")
    if r.verdict.status != "passed":
        parts += ["", "Not done: " + "; ".join(r.verdict.reasons)]
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------------
# Charts (inline SVG) and the HTML page
# ------------------------------------------------------------------------------------------------

OUTCOME_COLORS = {
    "applied": "#2e7d32",
    "revoked": "#795548",
    "stale": "#9e9d24",
    "quarantined": "#ef6c00",
    "final": "#c62828",
    "compliance_held": "#6a1b9a",
    "operator_canceled": "#546e7a",
    "open": "#1565c0",
    "unresolved_missing": "#b71c1c",
    "unapplied": "#b71c1c",
}
STATE_COLORS = {
    "CREATED": "#b0bec5",
    "VALIDATING": "#90caf9",
    "SUBMITTED": "#64b5f6",
    "RUNNING": "#1e88e5",
    "FINALIZING": "#3949ab",
}
FONT = "font-family='system-ui, sans-serif' font-size='12'"


def _outcome_color(key: str) -> str:
    if key.startswith("final_failed:"):
        return OUTCOME_COLORS["final"]
    return OUTCOME_COLORS.get(key, OUTCOME_COLORS["open"])


def outcome_chart_svg(r: PartitionReport, width: int = 640) -> str:
    """Horizontal bars: items by outcome (final outcomes, final failures by class, open states)."""
    bars = [(k, n) for k, n in r.outcomes().items() if n or k == "applied"]
    labels = {
        k: (f"final failed: {k.split(':', 1)[1]}" if k.startswith("final_failed:") else OUTCOME_LABELS[k])
        for k, _ in bars
    }
    row, left, right = 24, 220, 60
    height = row * len(bars) + 30
    top = max([n for _, n in bars] + [1])
    scale = (width - left - right) / top
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='chart outcomes' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='Items by outcome'>",
        f"<title>Items by outcome ({r.items} items)</title>",
    ]
    for i, (k, n) in enumerate(bars):
        y = 10 + i * row
        w = max(n * scale, 1 if n else 0)
        out.append(f"<text x='{left - 8}' y='{y + 15}' text-anchor='end' {FONT}>{html.escape(labels[k])}</text>")
        out.append(
            f"<rect x='{left}' y='{y + 3}' width='{w:.1f}' height='{row - 8}' fill='{_outcome_color(k)}'>"
            f"<title>{html.escape(labels[k])}: {n}</title></rect>"
        )
        out.append(f"<text x='{left + w + 6:.1f}' y='{y + 15}' {FONT}>{n}</text>")
    out.append("</svg>")
    return "\n".join(out)


def state_chart_svg(r: PartitionReport, width: int = 640, max_jobs: int = 30) -> str:
    """A timeline per provider job: time spent in each state, from the first job until done (or now)."""
    jobs = r.jobs[:max_jobs]
    row, left, right = 22, 130, 90
    per_line = max(1, (width - left) // 160)  # legend entries per line
    legend = 18 * -(-len(STATE_ORDER) // per_line) + 22
    height = row * max(len(jobs), 1) + legend + 30
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='chart states' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='Time in each state'>",
        "<title>Time each provider job spent in each state</title>",
    ]
    if not jobs:
        out.append(f"<text x='10' y='30' {FONT}>no provider job yet</text></svg>")
        return "\n".join(out)
    start = min(j.created_at for j in jobs)
    end = max([seg[2] for j in jobs for seg in j.segments] + [j.terminal_at or r.generated_at for j in jobs])
    span = max(_seconds(start, end), 1e-6)
    scale = (width - left - right) / span
    for i, job in enumerate(jobs):
        y = 10 + i * row
        out.append(
            f"<text x='{left - 8}' y='{y + 14}' text-anchor='end' {FONT}>"
            f"{html.escape(_short_job(job.job_key, r.task_id))}</text>"
        )
        for state, s, e in job.segments:
            x = left + _seconds(start, s) * scale
            w = max(_seconds(s, e) * scale, 0.5)
            out.append(
                f"<rect x='{x:.1f}' y='{y + 3}' width='{w:.1f}' height='{row - 7}' "
                f"fill='{STATE_COLORS.get(state, '#78909c')}'><title>{html.escape(job.job_key)} {state}: "
                f"{format_duration(_seconds(s, e))}</title></rect>"
            )
        if job.terminal_at:
            x = left + _seconds(start, job.terminal_at) * scale
            out.append(f"<text x='{x + 3:.1f}' y='{y + 14}' {FONT}>{html.escape(job.state)}</text>")
    y = 10 + len(jobs) * row + 8
    out.append(
        f"<text x='{left}' y='{y + 10}' {FONT}>0</text>"
        f"<text x='{width - right}' y='{y + 10}' text-anchor='end' {FONT}>{format_duration(span)}</text>"
    )
    for i, (state, seconds) in enumerate(r.time_in_state_s().items()):
        x, ly = left + 160 * (i % per_line), y + 18 + 18 * (i // per_line)
        out.append(
            f"<rect x='{x}' y='{ly}' width='12' height='12' fill='{STATE_COLORS.get(state, '#78909c')}'/>"
            f"<text x='{x + 16}' y='{ly + 10}' {FONT}>{state} {format_duration(seconds)}</text>"
        )
    if len(r.jobs) > max_jobs:
        out.append(f"<text x='10' y='{height - 2}' {FONT}>first {max_jobs} of {len(r.jobs)} jobs</text>")
    out.append("</svg>")
    return "\n".join(out)


def _short_job(job_key: str, task_id: str) -> str:
    """The job key without its task_id prefix (e.g. `a1_s0000:job1`)."""
    return job_key[len(task_id) + 1 :] if job_key.startswith(task_id + "_") else job_key[-18:]


def _html_table(headers: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(r: PartitionReport) -> str:
    rec = r.reconciliation
    status = r.verdict.label or "IN PROGRESS"
    now = r.generated_at
    jobs = (
        _html_table(
            JOB_HEADERS,
            [
                [
                    j.job_key,
                    j.attempt,
                    j.lines,
                    j.state,
                    format_duration(j.queue_s(now)),
                    format_duration(j.run_s(now)),
                    format_duration(j.total_s(now)),
                    j.reason or "-",
                    j.endpoint or "-",
                    j.request_options or "-",
                ]
                for j in r.jobs
            ],
        )
        if r.jobs
        else "<p>No provider job yet.</p>"
    )
    reasons = (
        "" if r.verdict.passed else ("<p class='warn'>Not done: " + html.escape("; ".join(r.verdict.reasons)) + "</p>")
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in r.notes)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(r.task_id)} report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; max-width: 960px; }}
table {{ border-collapse: collapse; margin: .5rem 0 1.5rem; }}
th, td {{ border: 1px solid #ccc; padding: .25rem .6rem; text-align: left; }}
td:not(:first-child) {{ text-align: right; }}
.status {{ font-weight: bold; }} .warn {{ color: #b71c1c; }} .muted {{ color: #666; }}
</style></head><body>
<h1>{html.escape(r.task_id)}</h1>
<p class="status">{html.escape(status)}: {r.final_items} of {r.items} items final ({_pct(r.completion_rate)}),
{rec.applied} applied, {rec.final_failed_total} final failures ({_pct(r.failure_rate)})</p>
<p class="muted">task {html.escape(r.task_name)}, partition {html.escape(r.partition_date)},
{html.escape(r.provider)} {html.escape(r.model)}; generated {now:%Y-%m-%d %H:%M:%S} (ledger time)</p>
{reasons}
<h2>Items by outcome</h2>
{outcome_chart_svg(r)}
{
        _html_table(
            ["outcome", "", "items"],
            [[label, group, n] for group, label, n in outcome_rows(r)] + [["total", "", r.items]],
        )
    }
{
        _html_table(
            ["retries", ""],
            [
                ["items sent more than once", rec.retried],
                ["highest attempt", rec.max_attempt],
                ["source rows rejected (not items)", rec.source_rejects],
            ],
        )
    }
<h2>Time in each state</h2>
{state_chart_svg(r)}
{_html_table(["time", ""], timing_rows(r))}
<h2>Usage</h2>
{_html_table(["usage", ""], usage_rows(r))}
<h2>Provider jobs</h2>
{jobs}
<ul class="muted">{notes}</ul>
</body></html>
"""


def report_path(data_dir: Path, task_id: str) -> Path:
    return Path(data_dir) / "reports" / f"{task_id}.html"


def publish_report(r: PartitionReport, files: RunFiles) -> str:
    """Write the page where this deployment keeps reports and return where it can be read: under the
    data directory (`local`), or in object storage as `reports/<task_id>.html` (replaced each time)."""
    path = write_report(r, files.own_root)
    return files.publish(path, f"reports/{path.name}")


def write_report(r: PartitionReport, data_dir: Path) -> Path:
    """Write the HTML page to `<data_dir>/reports/<task_id>.html` (replacing the previous one)."""
    path = report_path(data_dir, r.task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(render_html(r), encoding="utf-8")
    tmp.replace(path)
    return path
