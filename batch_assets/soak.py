"""`batch-assets soak`: many partitions on every provider, under random faults of every kind, driven to final.

The demo tasks (one per provider) run over several days of seeded demo data against the local
emulator, which injects, at `--fault-rate` (default 5 %):

* per item: error lines (HTTP 429 / 500 / 400), truncated answers (finish_reason length), content
  filter refusals, duplicated output lines, requests a completed batch gives no line at all
  (OpenAI, DashScope), shuffled output (every batch), drawn per (request, occurrence) so a resent
  request gets a fresh draw;
* per API call: bursts of 429 / 500 / 503 answers (`fail_next_requests`) before a stage runs;
* per submission: an enqueued-token limit that refuses the batches of that submit whole
  (re-queued without charging an attempt); a lost or 5xx answer to a create call after the batch
  was created (`after_processing_faults`, with `--lost-responses`);
* Gemini: results that appear a moment after the batch reads SUCCEEDED; shuffled inline responses.

No process is killed (the kill-and-restart tests do that). Rounds of cut → submit → poll →
collect → parse → plan retries → apply → settle run (retry backoff 0) until every item is final
or `--max-rounds` is reached; a stage that raises (a burst outlasting the SDK's retries) is
counted and runs again next round, as a Dagster retry would. Then one row per partition and the
totals are printed, with the faults injected, and the exit status is 0 only when every item is
final with balanced equations, no business row was written twice, and every provider batch is
tracked by exactly one ledger job (none created twice, none untracked).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from batch_assets.demo import demo_partition_dates, seed_kb_articles, seed_product_reviews, seed_support_tickets
from batch_assets.emulator.testing import EmulatorHandle, running_emulator
from batch_assets.formatting import format_table
from batch_assets.ledger.job_reads import (
    failed_job_errors,
    provider_batches,
    shards_without_batch,
    submitted_jobs_not_terminal,
)
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.collect.poll import poll_jobs
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import account_limits, submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import Reconciliation, settle
from batch_assets.pipeline.settle.retry_ledger import plan_retries
from batch_assets.providers.registry import provider_limits
from batch_assets.resources import ProviderConnection, ProvidersResource
from batch_assets.spec.model import LimitsSpec
from batch_assets.spec.resolve import ResolvedTask, load_tasks
from batch_assets.sqltext import quote_ident

# One demo task per provider.
SOAK_TASKS = {
    "openai": "ticket_triage",
    "anthropic": "ticket_summary",
    "gemini": "kb_embeddings",
    "dashscope": "review_sentiment",
}
# The create call of each provider (regex searched in the URL path), for lost-response faults.
CREATE_PATHS = {
    "openai": r"^/v1/batches$",
    "dashscope": r"^/compatible-mode/v1/batches$",
    "anthropic": r"^/v1/messages/batches$",
    "gemini": r":(batchGenerateContent|asyncBatchEmbedContent)$",
}
# Fast emulator clock: a batch of a few hundred requests ends in well under a second.
CLOCK = {"queue_delay_s": 0.05, "seconds_per_request": 0.0005, "finalize_delay_s": 0.05, "cancel_delay_s": 0.05}
BURST_STATUSES = (429, 500, 503)
JOB_WAIT_S = 60.0


@dataclass(frozen=True)
class SoakConfig:
    days: int = 5
    providers: tuple[str, ...] = tuple(SOAK_TASKS)
    fault_rate: float = 0.05
    lost_responses: bool = True
    seed: int = 7
    max_rounds: int = 25
    tickets_per_day: int = 100
    articles_per_day: int = 20
    reviews_per_day: int = 40
    max_requests_per_shard: int = 40  # several batches per partition and attempt
    # Each provider account's concurrent-batch limit for the soak: small, so that admission binds and
    # partitions wait for one another (the report shows the peak held against it).
    account_max_jobs: int = 6


@dataclass
class Partition:
    task: ResolvedTask
    day: str
    rec: Reconciliation | None = None
    stage_errors: int = 0

    @property
    def task_id(self) -> str:
        return self.task.task_id(self.day)

    @property
    def provider(self) -> str:
        return self.task.spec.provider

    @property
    def final(self) -> bool:
        return self.rec is not None and self.rec.unresolved == 0


@dataclass
class QuotaPeaks:
    """The most each provider account held at once as admission counts it (`ledger.quotas`),
    sampled after every submit, against the account's limits."""

    limits: dict  # provider -> QuotaLimits
    batches: Counter = field(default_factory=Counter)
    tokens: Counter = field(default_factory=Counter)  # of the model holding the most

    def sample(self, wh: Warehouse) -> None:
        from batch_assets.ledger.quotas import account_holdings

        with wh.connect() as conn:
            rows = account_holdings(conn)
        jobs: Counter = Counter()
        for r in rows:
            jobs[r["provider"]] += r["jobs"]
            self.tokens[r["provider"]] = max(self.tokens[r["provider"]], r["tokens"])
        for provider, n in jobs.items():
            self.batches[provider] = max(self.batches[provider], n)

    def rows(self) -> list[dict]:
        return [
            {
                "provider": p,
                "peak_batches": self.batches[p],
                "max_batches": limits.max_jobs,
                "peak_enqueued_tokens": self.tokens[p],
                "max_enqueued_tokens": limits.max_tokens,
                "within": self.batches[p] <= limits.max_jobs and self.tokens[p] <= limits.max_tokens,
            }
            for p, limits in sorted(self.limits.items())
        ]

    def over_limit(self) -> list[str]:
        return [r["provider"] for r in self.rows() if not r["within"]]


@dataclass
class SoakResult:
    partitions: list[Partition]
    faults: Counter
    rounds: int
    seconds: float
    rows: list[dict] = field(default_factory=list)
    provider_rows: list[dict] = field(default_factory=list)
    stage_errors: Counter = field(default_factory=Counter)
    peaks: QuotaPeaks | None = None

    @property
    def unresolved(self) -> int:
        return sum(r["unresolved"] for r in self.rows)

    @property
    def written_twice(self) -> int:
        return sum(r["written_twice"] for r in self.rows)

    @property
    def unbalanced(self) -> int:
        return sum(1 for r in self.rows if not r["balanced"])

    @property
    def created_twice(self) -> int:
        return sum(p["created_twice"] + p["untracked"] for p in self.provider_rows)

    @property
    def ok(self) -> bool:
        return (
            bool(self.rows)
            and self.unresolved == 0
            and self.unbalanced == 0
            and self.written_twice == 0
            and self.created_twice == 0
            and (self.peaks is None or not self.peaks.over_limit())
        )


def soak_task(task: ResolvedTask, max_requests_per_shard: int) -> ResolvedTask:
    """The demo task with retries due at once, a tolerance that lets a 5 % fault rate pass, and
    small shards (several batches per partition)."""
    retry = task.spec.retry.model_copy(update={"backoff_s": 0.0, "max_failed_fraction": 0.25})
    spec = task.spec.model_copy(update={"retry": retry})
    limits = dataclasses.replace(task.limits, max_requests_per_shard=max_requests_per_shard)
    return dataclasses.replace(task, spec=spec, limits=limits)


def gemini_inline_triage(triage: ResolvedTask) -> ResolvedTask:
    """ticket_triage on Gemini generateContent, opted in to inline requests (the demo's Gemini task
    embeds, and embeddings are file-only), writing its own table: inline answers without their keys."""
    spec = triage.spec.model_copy(
        update={
            "name": "triage_gemini_inline",
            "provider": "gemini",
            "endpoint": "generateContent",
            "model": "gemini-2.5-flash",
            "apply": triage.spec.apply.model_copy(update={"table": "ticket_labels_gemini"}),
        }
    )
    limits = provider_limits("gemini")
    limits = dataclasses.replace(
        limits.with_overrides(LimitsSpec(max_inline_bytes=limits.inline_service_max_bytes)),
        max_requests_per_shard=triage.limits.max_requests_per_shard,
    )
    return dataclasses.replace(triage, spec=spec, limits=limits)


def emulator_knobs(rate: float) -> dict:
    return {
        **CLOCK,
        "log_requests": False,
        "item_faults_by_occurrence": True,
        "shuffle_output": True,
        "item_error_rate": rate,
        "truncate_rate": rate,
        "content_filter_rate": rate,
        "duplicate_output_lines": rate,
        "missing_output_lines": rate,
        "inline_responses_shuffled": True,
        # Gemini: SUCCEEDED this long (real seconds at speed 1) before its results exist.
        "succeeded_before_results_s": 0.2,
        # Behaviours seen on the real services (docs/providers.md), each at the fault rate.
        "openai_refusal_rate": rate,
        "openai_invalid_prompt_rate": rate,
        "openai_empty_error_file_id": True,
        "expired_counts_unfinished_as_failed": False,
        "inline_responses_drop_keys_rate": rate,
        "gemini_item_cancelled_rate": rate,
        "gemini_prompt_blocked_rate": rate,
        "gemini_thinking_max_tokens_rate": rate,
        "gemini_item_error_status_names": True,
        "anthropic_timeout_error_rate": rate,
        "anthropic_refusal_rate": rate,
        "anthropic_refusal_category": "cyber",
        "anthropic_pause_turn_rate": rate,
        "anthropic_context_window_exceeded_rate": rate,
        # Model Studio's codes for the item-error draws (not Arrearage: it pauses the account for an operator).
        "dashscope_item_error_codes": [
            "Throttling.RateQuota",
            "InternalError",
            "InvalidParameter",
            "DataInspectionFailed",
        ],
    }


class FaultInjector:
    """Round-level faults, drawn from one seeded generator and counted."""

    def __init__(self, emulator: EmulatorHandle, config: SoakConfig) -> None:
        self.emulator, self.config = emulator, config
        self.rng = random.Random(config.seed)
        self.counts: Counter = Counter()
        # Each round-level kind once for sure, in the first round (partition ordinal -> kinds), so a
        # run always shows every kind whatever the draws; random draws at the fault rate come on top.
        n = max(len(config.providers) * config.days, 1)
        self.forced: dict[int, set[str]] = {}
        for i, kind in enumerate(("token_limit", "lose", "error", "burst")):
            self.forced.setdefault(i % n, set()).add(kind)
        if not config.lost_responses or config.fault_rate == 0:
            self.forced = (
                {i: kinds - {"lose", "error"} for i, kinds in self.forced.items()} if config.fault_rate else {}
            )

    def _hit(self) -> bool:
        return self.rng.random() < self.config.fault_rate

    def before_stage(self, stage: str, force: bool = False) -> None:
        """Maybe a burst of failing API calls (whichever calls come next). A stage makes several
        calls (upload, create, polls, downloads): a burst before about one stage in seven fails
        about the fault rate of all calls."""
        if force or self.rng.random() < min(1.0, 3 * self.config.fault_rate):
            n, status = self.rng.randint(1, 3), self.rng.choice(BURST_STATUSES)
            self.emulator.configure(fail_next_requests=n, fail_status=status)
            self.counts[f"burst of HTTP {status} before {stage} (calls)"] += n

    def before_submit(self, part: Partition, creates: int, ordinal: int | None = None) -> bool:
        """Maybe a token limit for this submit's model; each of the `creates` coming create calls
        may lose its answer. Returns whether a token limit was set (lift it with `after_submit`).
        `ordinal`: the partition's place in the first round (kinds forced there), else None."""
        forced = self.forced.pop(ordinal, set()) if ordinal is not None else set()
        self.before_stage("submit", force="burst" in forced)
        lost = [self.rng.choice(("lose", "error")) for _ in range(creates) if self._hit()]
        lost += sorted(forced & {"lose", "error"})
        if self.config.lost_responses and lost:
            rules = [
                *self.emulator.settings.after_processing_faults,
                *(
                    {
                        "method": "POST",
                        "path": CREATE_PATHS[part.provider],
                        "count": 1,
                        "mode": mode,
                        "status": self.rng.choice((500, 502, 503)),
                    }
                    for mode in lost
                ),
            ]
            self.emulator.configure(after_processing_faults=rules)
            for mode in lost:
                self.counts[
                    f"create answer {'lost' if mode == 'lose' else 'a 5xx'} after the batch was created "
                    f"({part.provider}, armed)"
                ] += 1
        if "token_limit" in forced or self._hit():
            self.emulator.configure(enqueued_token_limit={part.task.spec.model: 1})
            self.counts[f"enqueued-token limit of 1 set for one submit ({part.provider})"] += 1
            return True
        return False

    def after_submit(self, limited: bool) -> None:
        if limited:
            self.emulator.configure(enqueued_token_limit=None)

    def settle_counts(self) -> None:
        """Lost-response rules never consumed (no create came after them) were not injected."""
        left = self.emulator.settings.after_processing_faults
        if left:
            self.counts["(of the create answers armed: left unused at the end)"] += sum(r.get("count", 1) for r in left)
            self.emulator.configure(after_processing_faults=[])
        self.emulator.configure(fail_next_requests=0)


def _guard(part: Partition, stage: str, errors: Counter, fn: Callable[[], object], say: Callable[[str], None]) -> None:
    """Run one stage; an exception is counted and the stage runs again next round."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - a stage failure is retried next round, like a Dagster retry
        part.stage_errors += 1
        errors[f"{stage}: {type(exc).__name__}"] += 1
        say(f"{part.task_id} {stage}: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")


def _creates_pending(wh: Warehouse, task_id: str) -> int:
    """Shards of the partition without a provider batch yet (each is a create call to come)."""
    with wh.control(read_only=True) as db:
        return shards_without_batch(db, task_id)


def _wait_for_jobs(wh: Warehouse, adapters: dict, timeout_s: float = JOB_WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        poll_jobs(wh, adapters.__getitem__)
        with wh.control(read_only=True) as db:
            left = submitted_jobs_not_terminal(db)
        if left == 0 or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def seed(wh: Warehouse, config: SoakConfig) -> list[str]:
    wanted = set(config.providers)
    with wh.connect() as conn:  # only the tables the chosen providers' tasks read
        if wanted & {"openai", "anthropic", "gemini"}:  # gemini: the inline triage variant
            seed_support_tickets(conn, days=config.days, per_day=config.tickets_per_day)
        if "gemini" in wanted:
            seed_kb_articles(conn, days=config.days, per_day=config.articles_per_day)
        if "dashscope" in wanted:
            seed_product_reviews(conn, days=config.days, per_day=config.reviews_per_day)
    return demo_partition_dates(days=config.days)


def run_rounds(
    wh: Warehouse,
    parts: list[Partition],
    adapters: dict,
    faults: FaultInjector,
    config: SoakConfig,
    say: Callable[[str], None],
    peaks: QuotaPeaks | None = None,
) -> tuple[int, Counter]:
    errors: Counter = Counter()
    rounds = 0
    for part in parts:
        freeze_manifest(wh, part.task, part.day)
    for rounds in range(1, config.max_rounds + 1):
        open_parts = [p for p in parts if not p.final]
        if not open_parts:
            return rounds - 1, errors
        for ordinal, part in enumerate(open_parts):
            _guard(part, "cut", errors, lambda p=part: cut_shards(wh, p.task, p.day), say)
            limited = faults.before_submit(part, _creates_pending(wh, part.task_id), ordinal if rounds == 1 else None)
            try:
                _guard(
                    part, "submit", errors, lambda p=part: submit_pending(wh, p.task, p.day, adapters[p.provider]), say
                )
            finally:
                faults.after_submit(limited)
            if peaks is not None:
                peaks.sample(wh)
        _wait_for_jobs(wh, adapters)
        for part in open_parts:
            faults.before_stage("collect")
            _guard(
                part,
                "collect",
                errors,
                lambda p=part: collect_raw_results(wh, p.task, p.day, adapters[p.provider]),
                say,
            )
            _guard(part, "parse", errors, lambda p=part: parse_results(wh, p.task, p.day), say)
            _guard(part, "plan", errors, lambda p=part: plan_retries(wh, p.task, p.day), say)
            _guard(part, "apply", errors, lambda p=part: apply_results(wh, p.task, p.day), say)
            part.rec, _ = settle(wh, part.task_id, part.task.spec.retry.max_failed_fraction)
        pending = sum(p.rec.unresolved for p in parts if p.rec is not None)
        say(f"round {rounds}: {sum(p.final for p in parts)}/{len(parts)} partitions final, {pending} item(s) open")
    return rounds, errors


def provider_batch_ids(emulator: EmulatorHandle, provider: str) -> list[str]:
    """Every batch the provider holds, listed through its official SDK (ids as the ledger stores them)."""
    if provider in ("openai", "dashscope"):
        import openai

        base = emulator.openai_base_url if provider == "openai" else emulator.dashscope_base_url
        with openai.OpenAI(api_key="k", base_url=base) as client:
            return [b.id for b in client.batches.list(limit=100)]
    if provider == "anthropic":
        import anthropic

        with anthropic.Anthropic(api_key="k", base_url=emulator.base_url) as client:
            return [b.id for b in client.messages.batches.list(limit=100)]
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=emulator.base_url))
    return [b.name for b in client.batches.list()]


def written_twice(wh: Warehouse, part: Partition) -> tuple[int, int]:
    """(business rows written twice, business rows of the partition): applied_result rows beyond one
    per item, plus business rows of the partition beyond one per key."""
    apply = part.task.spec.apply
    with wh.connect() as conn:
        extra_applied = conn.execute(
            "SELECT count(*) - count(DISTINCT custom_id) FROM ledger.applied_result WHERE task_id = ?", [part.task_id]
        ).fetchone()[0]
        rows, keys = conn.execute(
            f"SELECT count(*), count(DISTINCT {quote_ident(apply.key)}) FROM main.{quote_ident(apply.table)} "
            "WHERE task_id = ?",
            [part.task_id],
        ).fetchone()
    return int(extra_applied) + int(rows - keys), int(rows)


def summarize(wh: Warehouse, emulator: EmulatorHandle, result: SoakResult) -> None:
    with wh.control(read_only=True) as db:
        jobs = provider_batches(db)
    jobs_by_batch = Counter((j["provider"], j["provider_batch_id"]) for j in jobs)
    task_of_batch = {(j["provider"], j["provider_batch_id"]): j["task_id"] for j in jobs}
    at_provider: Counter = Counter()
    for provider in sorted({p.provider for p in result.partitions}):
        ids = provider_batch_ids(emulator, provider)
        listed = Counter(ids)
        untracked = [i for i in ids if (provider, i) not in jobs_by_batch]
        for i in ids:
            if (provider, i) in task_of_batch:
                at_provider[task_of_batch[(provider, i)]] += 1
        ledger_jobs = sum(n for (p, _), n in jobs_by_batch.items() if p == provider)
        result.provider_rows.append(
            {
                "provider": provider,
                "batches_at_provider": len(ids),
                "ledger_jobs": ledger_jobs,
                "untracked": len(untracked),
                "untracked_ids": untracked,
                "created_twice": sum(n - 1 for (p, _), n in jobs_by_batch.items() if p == provider and n > 1)
                + sum(n - 1 for n in listed.values() if n > 1),
                "missing_at_provider": sum(1 for (p, i) in jobs_by_batch if p == provider and i not in listed),
            }
        )
    for part in result.partitions:
        rec = part.rec
        twice, rows = written_twice(wh, part)
        result.rows.append(
            {
                "task_id": part.task_id,
                "provider": part.provider,
                "items": rec.manifest_items,
                "applied": rec.applied,
                "stale": rec.stale,
                "quarantined": rec.quarantined,
                "retried": rec.retried,
                "attempts": rec.max_attempt,
                "final_failed": rec.final_failed_total,
                "held": rec.compliance_held,
                "unresolved": rec.unresolved,
                "batches_at_provider": at_provider[part.task_id],
                "ledger_jobs": rec.jobs,
                "business_rows": rows,
                "written_twice": twice,
                "balanced": not rec.problems(),
                "problems": rec.problems(),
                "check": rec.verdict().status,
                "stage_errors": part.stage_errors,
            }
        )


def observed_item_faults(wh: Warehouse) -> Counter:
    """Item-level faults as the ledger saw them (the emulator draws them at the configured rate)."""
    out: Counter = Counter()
    with wh.connect() as conn:
        for code, n in conn.execute("""
                SELECT CASE WHEN error_code = 'finish_reason_length' THEN 'truncated answer (finish_reason length)'
                            WHEN error_code = 'content_filter' THEN 'content filter refusal'
                            WHEN from_line AND NOT provider_succeeded
                                 THEN 'item error line, HTTP ' || coalesce(CAST(http_status AS VARCHAR), '?')
                                      || ' ' || coalesce(error_code, '')
                            WHEN NOT from_line THEN 'item without a line, batch ' || coalesce(error_code, '?')
                            ELSE 'other: ' || coalesce(error_code, '?') END, count(*)
                FROM ledger.parsed_result WHERE error_class IS NOT NULL GROUP BY 1""").fetchall():
            out[code] += n
        for status, n in conn.execute(
            "SELECT status, count(*) FROM ledger.raw_result WHERE status <> 'ok' GROUP BY 1"
        ).fetchall():
            out[f"result line {status}"] += n
        for errors in failed_job_errors(conn):
            out[f"batch refused whole: {_first_error_code(errors)}"] += 1
    return out


def _first_error_code(errors: str | None) -> str:
    """The code of a refused batch's first provider error (its provider_errors JSON), or 'no code'."""
    try:
        first = (json.loads(errors) or [None])[0] if errors else None
    except ValueError:
        return "no code"
    return str(first["code"]) if isinstance(first, dict) and first.get("code") is not None else "no code"


def format_report(result: SoakResult, item_faults: Counter) -> str:
    cols = [
        "task_id",
        "items",
        "applied",
        "stale",
        "quarantined",
        "retried",
        "attempts",
        "final_failed",
        "held",
        "unresolved",
        "batches_at_provider",
        "ledger_jobs",
        "written_twice",
        "balanced",
        "check",
        "stage_errors",
    ]
    heads = [
        "task_id",
        "items",
        "applied",
        "stale",
        "quarant",
        "retried",
        "attempts",
        "final_failed",
        "held",
        "unresolved",
        "batches@provider",
        "ledger_jobs",
        "written_twice",
        "balanced",
        "check",
        "stage_err",
    ]
    rows = [[("yes" if r[c] else "NO") if c == "balanced" else r[c] for c in cols] for r in result.rows]
    totals = [
        "TOTAL",
        *(sum(r[c] for r in result.rows) if c not in ("balanced", "check", "attempts") else "" for c in cols[1:]),
    ]
    totals[cols.index("attempts")] = max((r["attempts"] for r in result.rows), default=0)
    totals[cols.index("balanced")] = "yes" if not result.unbalanced else f"NO ({result.unbalanced})"
    out = [format_table(heads, [*rows, totals]), ""]
    out.append(
        format_table(
            ["provider", "batches@provider", "ledger_jobs", "untracked", "created_twice", "missing_at_provider"],
            [
                [
                    p["provider"],
                    p["batches_at_provider"],
                    p["ledger_jobs"],
                    p["untracked"],
                    p["created_twice"],
                    p["missing_at_provider"],
                ]
                for p in result.provider_rows
            ],
        )
    )
    if result.peaks is not None:
        out += ["", "peak held per provider account (reservations after every submit) against its limits:"]
        out.append(
            format_table(
                ["provider", "peak batches", "limit", "peak enqueued tokens (one model)", "limit", "within"],
                [
                    [
                        r["provider"],
                        r["peak_batches"],
                        r["max_batches"],
                        f"{r['peak_enqueued_tokens']:,}",
                        f"{r['max_enqueued_tokens']:,}",
                        "yes" if r["within"] else "NO",
                    ]
                    for r in result.peaks.rows()
                ],
            )
        )
    out += ["", "faults injected by the soak:"]
    out += [f"  {n:6d}  {name}" for name, n in sorted(result.faults.items())] or ["  none"]
    out += ["", "item and batch faults seen in the ledger (emulator draws at the fault rate; all attempts):"]
    out += [f"  {n:6d}  {name}" for name, n in sorted(item_faults.items())] or ["  none"]
    if result.stage_errors:
        out += ["", "stage runs that raised (run again next round):"]
        out += [f"  {n:6d}  {name}" for name, n in sorted(result.stage_errors.items())]
    for r in result.rows:
        for problem in r["problems"]:
            out.append(f"UNBALANCED {r['task_id']}: {problem}")
    for p in result.provider_rows:
        if p["untracked_ids"]:
            out.append(f"UNTRACKED {p['provider']} batches: {', '.join(p['untracked_ids'][:10])}")
    verdict = "PASS" if result.ok else "FAIL"
    out += [
        "",
        f"{verdict}: {len(result.rows)} partitions, {sum(r['items'] for r in result.rows)} items in "
        f"{result.rounds} round(s), {result.seconds:.0f} s; unresolved {result.unresolved}, unbalanced "
        f"partitions {result.unbalanced}, business rows written twice {result.written_twice}, provider "
        f"batches created twice or untracked {result.created_twice}"
        + (f", over an account's limit: {', '.join(result.peaks.over_limit()) or 'none'}" if result.peaks else ""),
    ]
    return "\n".join(out)


def run_soak(data_dir: Path, config: SoakConfig = SoakConfig(), say: Callable[[str], None] = print) -> SoakResult:
    started = time.monotonic()
    wh = Warehouse.at(data_dir / "warehouse.duckdb", data_dir)
    days = seed(wh, config)
    tasks = load_tasks()  # the soak's tasks; a broken other task folder does not stop it
    chosen = [tasks[SOAK_TASKS[p]] for p in config.providers]
    if "gemini" in config.providers:
        chosen.append(gemini_inline_triage(tasks["ticket_triage"]))
    parts = [Partition(soak_task(task, config.max_requests_per_shard), day) for day in days for task in chosen]
    say(f"{len(parts)} partitions ({', '.join(config.providers)} x {len(days)} days) in {wh.database}")
    with running_emulator(data_dir / "emulator", **emulator_knobs(config.fault_rate)) as emulator:
        account = ProviderConnection(max_concurrent_jobs=config.account_max_jobs)
        resource = ProvidersResource(
            emulator_url=emulator.base_url, max_retries=2, connections={p: account for p in config.providers}
        )
        adapters = {p: resource.adapter(p) for p in config.providers}
        peaks = QuotaPeaks({p: account_limits(p, adapters[p].settings) for p in config.providers})
        faults = FaultInjector(emulator, config)
        rounds, errors = run_rounds(wh, parts, adapters, faults, config, say, peaks)
        faults.settle_counts()
        result = SoakResult(parts, faults.counts, rounds, 0.0, stage_errors=errors, peaks=peaks)
        summarize(wh, emulator, result)
    result.seconds = time.monotonic() - started
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="batch-assets soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--days", type=int, default=SoakConfig.days, help="partitions per provider (default 5)")
    p.add_argument(
        "--providers",
        default=",".join(SOAK_TASKS),
        help="comma-separated providers (default all four: " + ",".join(SOAK_TASKS) + ")",
    )
    p.add_argument("--fault-rate", type=float, default=SoakConfig.fault_rate, help="default 0.05")
    p.add_argument(
        "--no-lost-responses",
        dest="lost_responses",
        action="store_false",
        help="do not lose / fail create answers after the batch was created",
    )
    p.add_argument("--seed", type=int, default=SoakConfig.seed, help="seed of the round-level fault draws")
    p.add_argument("--max-rounds", type=int, default=SoakConfig.max_rounds)
    p.add_argument("--tickets-per-day", type=int, default=SoakConfig.tickets_per_day)
    p.add_argument(
        "--account-max-jobs",
        type=int,
        default=SoakConfig.account_max_jobs,
        help=f"each provider account's concurrent-batch limit (default {SoakConfig.account_max_jobs})",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        help="keep the warehouse and emulator state here (default: a temporary folder, removed after)",
    )
    args = p.parse_args(argv)
    providers = tuple(x.strip() for x in args.providers.split(",") if x.strip())
    unknown = sorted(set(providers) - set(SOAK_TASKS))
    if unknown or not providers:
        p.error(f"unknown provider(s) {unknown}; known: {', '.join(SOAK_TASKS)}")
    if not 0.0 <= args.fault_rate <= 1.0:
        p.error("--fault-rate must be between 0 and 1")
    if args.account_max_jobs < 1:
        p.error("--account-max-jobs must be at least 1")
    config = SoakConfig(
        days=args.days,
        providers=providers,
        fault_rate=args.fault_rate,
        lost_responses=args.lost_responses,
        seed=args.seed,
        max_rounds=args.max_rounds,
        tickets_per_day=args.tickets_per_day,
        account_max_jobs=args.account_max_jobs,
    )

    def say(msg: str) -> None:
        print(f"[soak] {msg}", flush=True)

    temp = None if args.data_dir else Path(tempfile.mkdtemp(prefix="batch_assets_soak_"))
    data_dir = args.data_dir or temp
    if args.data_dir and (data_dir / "warehouse.duckdb").exists():
        p.error(f"{data_dir} already holds a warehouse: give an empty --data-dir")
    try:
        result = run_soak(data_dir, config, say)
        print(format_report(result, observed_item_faults(Warehouse.at(data_dir / "warehouse.duckdb", data_dir))))
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
