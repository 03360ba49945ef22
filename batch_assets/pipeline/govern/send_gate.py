"""The pre-submission gate: one function, `may_send`, decides whether a partition's lines may go
to the provider, and every sender calls it (`pipeline.send.submit.submit_pending` does, first, so
the submissions asset, `batch-assets retry`, the sensor's runs and any later escalation cannot
skip it). Its verdicts, each saying why it passed or what to do:

* `model_allowed`: the task's model is on its provider's allow-list (`providers/<name>/models.yaml`)
  and, when the task narrows it (`gate.allowed_models`), on the task's list too;
* `prompt_unchanged`: the prompt version, output-schema version and the hashes of the prompt
  (template + system message) and output schema recorded when the partition was frozen still
  match the task file;
* `dry_run_recorded`: a partition above `gate.dry_run_threshold` items needs a recorded dry run
  (`batch-assets dry-run`) of the task's prompt version;
* `within_budget`: the caps of `pipeline.govern.budget`;
* `no_blocked_items`: no unsent line belongs to an item the sensitive-data policy blocked;
* `account_active`: the provider account is not paused (`ledger.account_pause`): a result that said
  the account cannot be used (billing, access, key) stops every send to that provider until an
  operator fixes it and runs `batch-assets resume <provider>`.

The shards asset reports the same verdicts as blocking checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from batch_assets.ledger.accounts import active_pause
from batch_assets.ledger.dry_runs import latest_dry_run
from batch_assets.ledger.jobs import CreateMark
from batch_assets.ledger.partition_control import partition_views
from batch_assets.ledger.tasks import task_row
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.freeze.frozen import frozen_columns, frozen_manifest
from batch_assets.pipeline.govern.budget import BudgetVerdict, check_budget
from batch_assets.pipeline.govern.sensitive import BLOCKED_CODE
from batch_assets.providers.models import allowed_models, matches, models_file
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import sql_literal

MODEL_CHECK = "model_allowed"
PROMPT_CHECK = "prompt_unchanged"
DRY_RUN_CHECK = "dry_run_recorded"
BUDGET_CHECK = "within_budget"
SENSITIVE_CHECK = "no_blocked_items"
ACCOUNT_CHECK = "account_active"


@dataclass(frozen=True)
class Verdict:
    check: str
    task_id: str
    passed: bool
    reason: str
    figures: dict = field(default_factory=dict)

    def as_metadata(self) -> dict:
        return {"task_id": self.task_id, "reason": self.reason, **self.figures}


def check_model(task: ResolvedTask, partition_date: str) -> Verdict:
    spec = task.spec
    task_id = task.task_id(partition_date)
    provider_list = allowed_models(spec.provider)
    task_list = spec.gate.allowed_models
    figures = {
        "model": spec.model,
        "provider": spec.provider,
        "provider_allowed": ", ".join(provider_list) or "none",
        "task_allowed": ", ".join(task_list) if task_list is not None else "not narrowed",
    }
    # A task entry the provider list does not cover is ignored (a task only narrows), and said so.
    widening = [e for e in task_list or [] if not matches(e, provider_list)]
    note = (
        f" (gate.allowed_models entries {widening} are not on the provider's list and allow nothing)"
        if widening
        else ""
    )
    where = f"batch_assets/providers/{spec.provider}/{models_file(spec.provider).name}"
    if not matches(spec.model, provider_list):
        return Verdict(
            MODEL_CHECK,
            task_id,
            False,
            f"model {spec.model!r} is not on {spec.provider}'s allow-list "
            f"[{figures['provider_allowed']}]{note}. Fix: use an allowed model in {task.yaml_path}, or add "
            f"{spec.model!r} to allowed_models in {where}",
            figures,
        )
    if task_list is not None and not matches(spec.model, task_list):
        return Verdict(
            MODEL_CHECK,
            task_id,
            False,
            f"model {spec.model!r} is on {spec.provider}'s allow-list but not on the task's "
            f"gate.allowed_models [{figures['task_allowed']}]{note}. Fix: use one of those models, or add "
            f"it to gate.allowed_models in {task.yaml_path}",
            figures,
        )
    return Verdict(
        MODEL_CHECK,
        task_id,
        True,
        f"model {spec.model!r} is on {spec.provider}'s allow-list"
        + (" and the task's gate.allowed_models" if task_list is not None else "")
        + note,
        figures,
    )


def frozen_row(conn: duckdb.DuckDBPyConnection, task_id: str) -> dict | None:
    row = task_row(conn, task_id, frozen=True)
    keys = ("prompt_version", "output_schema_version", "prompt_hash", "output_schema_hash", "total_items")
    return {k: row[k] for k in keys} if row else None


def check_prompt(wh: Warehouse, task: ResolvedTask, partition_date: str) -> Verdict:
    spec = task.spec
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    with wh.connect() as conn:
        frozen = frozen_row(conn, task_id)
    if frozen is None:
        return Verdict(
            PROMPT_CHECK,
            task_id,
            False,
            f"{task_id} has no frozen manifest. Fix: materialize {spec.name}/manifest for {partition_date}",
        )
    now = {
        "prompt_version": spec.prompt.version,
        "output_schema_version": spec.output.version,
        "prompt_hash": task.prompt_hash,
        "output_schema_hash": task.output_schema_hash,
    }
    figures = {f"frozen_{k}": (frozen[k] or "not recorded") for k in now} | {f"task_{k}": v for k, v in now.items()}
    missing = [k for k in ("prompt_version", "output_schema_version") if not frozen[k] or not now[k]]
    if missing:
        return Verdict(
            PROMPT_CHECK,
            task_id,
            False,
            f"{', '.join(missing)} missing. Fix: set prompt.version and "
            f"output.version in {task.yaml_path} and refreeze",
            figures,
        )
    changed = []
    for what, version_key, hash_key in (
        ("prompt", "prompt_version", "prompt_hash"),
        ("output schema", "output_schema_version", "output_schema_hash"),
    ):
        if frozen[version_key] != now[version_key]:
            changed.append(
                f"{what} version is {now[version_key]!r}, the partition was frozen with {frozen[version_key]!r}"
            )
        elif frozen[hash_key] is not None and frozen[hash_key] != now[hash_key]:
            changed.append(f"{what} content changed since freezing under the same version {now[version_key]!r}")
    if changed:
        return Verdict(
            PROMPT_CHECK,
            task_id,
            False,
            f"{task_id}: {'; '.join(changed)}. Fix: restore the task file as it was frozen, or refreeze "
            f"the partition (run config refreeze: true on {spec.name}/manifest; bump the version when "
            "the meaning changed)",
            figures,
        )
    unhashed = [k for k in ("prompt_hash", "output_schema_hash") if frozen[k] is None]
    return Verdict(
        PROMPT_CHECK,
        task_id,
        True,
        f"prompt {spec.prompt.version!r} and output schema {spec.output.version!r} as frozen"
        + (" (versions only: frozen before hashes were recorded; refreeze to record them)" if unhashed else ""),
        figures,
    )


def check_dry_run(wh: Warehouse, task: ResolvedTask, partition_date: str) -> Verdict:
    spec = task.spec
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    threshold = spec.gate.dry_run_threshold
    with wh.connect() as conn:
        items = conn.execute(
            "SELECT count(*) FROM ledger.manifest_item WHERE task_id = ? AND superseded_at IS NULL", [task_id]
        ).fetchone()[0]
        done = latest_dry_run(conn, spec.name, spec.prompt.version)
    figures = {
        "items": items,
        "dry_run_threshold": threshold,
        "prompt_version": spec.prompt.version,
        "dry_run": f"{done['task_id']} ({done['n']} lines, {done['dry_run_at']:%Y-%m-%d %H:%M} UTC)"
        if done
        else "none",
    }
    if done:
        return Verdict(
            DRY_RUN_CHECK,
            task_id,
            True,
            f"dry run of {spec.name} prompt {spec.prompt.version!r} recorded ({figures['dry_run']})",
            figures,
        )
    if items <= threshold:
        return Verdict(
            DRY_RUN_CHECK,
            task_id,
            True,
            f"{items} items <= gate.dry_run_threshold {threshold}: no dry run needed",
            figures,
        )
    return Verdict(
        DRY_RUN_CHECK,
        task_id,
        False,
        f"{items} items > gate.dry_run_threshold {threshold} and no dry run of {spec.name} prompt "
        f"{spec.prompt.version!r} is recorded. Fix: run `batch-assets dry-run {task_id}`, read the "
        "lines, then materialize again",
        figures,
    )


def _blocked_unsent_lines(conn: duckdb.DuckDBPyConnection, task_id: str, frozen_blocked: str) -> tuple:
    """(count, an example custom_id) of the partition's unsent lines of blocked items (inside its partition views)."""
    return conn.execute(
        f"""
        WITH unsent AS (
            SELECT shard_id FROM part_shard WHERE task_id = $t AND shard_id NOT IN (
                SELECT shard_id FROM part_job
                WHERE create_outcome IS DISTINCT FROM '{CreateMark.ABANDONED.value}')
        ),
        blocked AS (
            SELECT custom_id FROM ledger.quarantine WHERE task_id = $t AND reason_code = '{BLOCKED_CODE}'
            {frozen_blocked}
        )
        SELECT count(*), min(custom_id) FROM ledger.shard_line
        WHERE task_id = $t AND shard_id IN (SELECT shard_id FROM unsent)
          AND custom_id IN (SELECT custom_id FROM blocked)
        """,
        {"t": task_id},
    ).fetchall()[0]


def check_no_blocked_lines(wh: Warehouse, task: ResolvedTask, partition_date: str) -> Verdict:
    """No line of an unsent shard (no job, or only abandoned ones) belongs to an item the policy
    blocked: quarantined as blocked, or blocked in the partition's current frozen manifest (a
    refreeze under a stricter policy after the shards were cut). Counts and ids only, never a value."""
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    with wh.connect() as conn:
        uri = frozen_manifest(conn, wh.files, task_id)
        frozen_blocked = (
            f"UNION ALL SELECT custom_id FROM read_parquet({sql_literal(uri)}) WHERE blocked_reason IS NOT NULL"
            if uri and "blocked_reason" in frozen_columns(conn, uri)
            else ""
        )
        with partition_views(conn, task_id):
            blocked, example = _blocked_unsent_lines(conn, task_id, frozen_blocked)
    if blocked:
        return Verdict(
            SENSITIVE_CHECK,
            task_id,
            False,
            f"{blocked} unsent line(s) belong to items the sensitive-data policy blocked (e.g. {example}). "
            f"Fix: refreeze and recut the partition (run config refreeze: true on {task.spec.name}/manifest)",
            {"blocked_lines": blocked},
        )
    return Verdict(SENSITIVE_CHECK, task_id, True, "no unsent line belongs to a blocked item", {"blocked_lines": 0})


def check_account(wh: Warehouse, task: ResolvedTask, partition_date: str) -> Verdict:
    """The task's provider account is not paused after an account-level error."""
    provider = task.spec.provider
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    with wh.connect() as conn:
        pause = active_pause(conn, provider)
    if pause is None:
        return Verdict(ACCOUNT_CHECK, task_id, True, f"the {provider} account is not paused", {"provider": provider})
    figures = {
        "provider": provider,
        "paused_at": f"{pause['paused_at']:%Y-%m-%d %H:%M:%S} UTC",
        "error_code": pause["error_code"],
        "paused_by_task": pause["task_id"],
        "items": pause["items"],
    }
    return Verdict(
        ACCOUNT_CHECK,
        task_id,
        False,
        f"the {provider} account is paused since {figures['paused_at']}: {pause['task_id']} got "
        f"{pause['error_code']} ({pause['error_message'] or 'no message'}) on {pause['items']} item(s); "
        f"nothing is sent to {provider} until it is resumed. Fix: {pause['fix']}, then run "
        f"`batch-assets resume {provider}`",
        figures,
    )


def budget_verdict(verdict: BudgetVerdict) -> Verdict:
    """The budget's verdict in the gate's shape."""
    reason = (
        "; ".join(verdict.refusals) + " (an operator may override: run config budget_override, a reason, "
        "on the shards asset)"
        if not verdict.passed
        else "within every budget cap" + (f" (override: {verdict.overridden})" if verdict.overridden else "")
    )
    return Verdict(BUDGET_CHECK, verdict.task_id, verdict.passed, reason, verdict.as_metadata())


class SendRefused(Exception):
    """`may_send` refused: nothing was sent. The message is the first refusal's check and reason."""

    def __init__(self, refusals: list[Verdict]):
        self.refusals = refusals
        first = refusals[0]
        super().__init__(f"{first.task_id}: {first.check} failed; nothing submitted. {first.reason}")


def may_send(wh: Warehouse, task: ResolvedTask, partition_date: str) -> list[Verdict]:
    """The refusals of the gate (see the module docstring); empty when the partition's lines may be
    sent. Every path that sends calls this (through `require_may_send`)."""
    verdicts = (
        check_model(task, partition_date),
        check_prompt(wh, task, partition_date),
        check_dry_run(wh, task, partition_date),
        budget_verdict(check_budget(wh, task, partition_date)),
        check_no_blocked_lines(wh, task, partition_date),
        check_account(wh, task, partition_date),
    )
    return [v for v in verdicts if not v.passed]


def require_may_send(wh: Warehouse, task: ResolvedTask, partition_date: str) -> None:
    """Raise SendRefused unless `may_send` lets the partition through."""
    refusals = may_send(wh, task, partition_date)
    if refusals:
        raise SendRefused(refusals)


def failed_gates(wh: Warehouse, task: ResolvedTask, partition_date: str) -> list[Verdict]:
    """The failing verdicts of the checks that shape the lines themselves (model, prompt, dry run),
    and of a paused account (which retries nothing until it is resumed): a sender refuses these
    before it cuts retries, so no line is written for a partition the gate would refuse anyway.
    The decision to send is `may_send`'s."""
    verdicts = (
        check_model(task, partition_date),
        check_prompt(wh, task, partition_date),
        check_dry_run(wh, task, partition_date),
        check_account(wh, task, partition_date),
    )
    return [v for v in verdicts if not v.passed]
