"""The `shards` asset with the blocking pre-submission checks, and the `submissions` asset
(pipeline.send, pipeline.govern)."""

import dagster as dg

from batch_assets.components.asset_metadata import TAG_PRIORITY, table_name_metadata, tag_run
from batch_assets.components.partitions import partitioned_check_spec
from batch_assets.components.summary_metadata import totals, verdicts_result
from batch_assets.components.wiring import SHARDS_CHECK, TaskWiring
from batch_assets.pipeline.govern.budget import check_budget
from batch_assets.pipeline.govern.dry_run import render_sample
from batch_assets.pipeline.govern.send_gate import (
    ACCOUNT_CHECK,
    BUDGET_CHECK,
    DRY_RUN_CHECK,
    MODEL_CHECK,
    PROMPT_CHECK,
    SENSITIVE_CHECK,
    SendRefused,
    check_account,
    check_dry_run,
    check_model,
    check_no_blocked_lines,
    check_prompt,
    failed_gates,
)
from batch_assets.pipeline.report.table_stats import STAGE_TABLES
from batch_assets.pipeline.send.shards import cut_shards, verify_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.resources import ProvidersResource, WarehouseResource
from batch_assets.spec.model import PRIORITIES


class ShardsConfig(dg.Config):
    budget_override: str = ""
    """A reason to submit a partition although its estimate exceeds a budget cap; recorded in
    ledger.operator_action (budget_override) with the figures."""


class SubmissionsConfig(dg.Config):
    send_retries: bool = False
    """Also cut and send due retries when the task's retries are not automatic (retry.automatic: false)."""


def _gate_check_specs(w: TaskWiring) -> list[dg.AssetCheckSpec]:
    provider = w.task.spec.provider
    checks = {
        SHARDS_CHECK: "Every shard file within limits and intact; lines + quarantined = items.",
        BUDGET_CHECK: "The partition's estimated cost within the task's budget and the per-model / per-day caps "
        "of defs/budgets.yaml (or an operator override with a reason, recorded in the ledger).",
        MODEL_CHECK: f"The model is on {provider}'s allow-list (providers/{provider}/models.yaml) and on the "
        "task's gate.allowed_models when it narrows it.",
        PROMPT_CHECK: "Prompt and output-schema versions, and the hashes of the prompt template + system message "
        "and of the output schema, unchanged since the partition was frozen.",
        DRY_RUN_CHECK: "A partition above gate.dry_run_threshold items (default 10,000) has a recorded dry run "
        "(`batch-assets dry-run <task_id>`) of the task's prompt version.",
        SENSITIVE_CHECK: "No unsent line belongs to an item the sensitive-data policy blocked.",
        ACCOUNT_CHECK: f"The {provider} account is not paused after an account error (billing, access, key); "
        f"after fixing it, `batch-assets resume {provider}` lifts the pause.",
    }
    return [
        partitioned_check_spec(check, w.key("shards"), blocking=True, description=text)
        for check, text in checks.items()
    ]


def build_shards(w: TaskWiring) -> dg.AssetsDefinition:
    task, name, spec = w.task, w.name, w.task.spec

    @dg.asset(
        key=w.key("shards"),
        deps=[w.key("manifest")],
        kinds={"duckdb", "json"},
        metadata=table_name_metadata(STAGE_TABLES["shards"]),
        description=f"Provider-ready JSONL request files of {name}, one line per item, cut to stay within "
        f"{spec.provider}'s limits (requests, bytes, tokens per batch); a line that cannot be sent "
        "(too long, blank required input) is quarantined with its reason instead. Each shard "
        "file is recorded with its checksum; nothing is submitted unless every shard passes.",
        check_specs=_gate_check_specs(w),
        **w.common(),
    )
    def shards(context: dg.AssetExecutionContext, config: ShardsConfig, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        keys = context.partition_keys
        models = [check_model(task, pk) for pk in keys]
        prompts = [check_prompt(wh, task, pk) for pk in keys]
        # A disallowed model or a changed prompt/schema would be written into the request lines:
        # such partitions are not cut at all.
        cut = [pk for pk, m, p in zip(keys, models, prompts) if m.passed and p.passed]
        out = [cut_shards(wh, task, pk, retries=spec.retry.automatic) for pk in cut]
        verified = [verify_shards(wh, task, pk) for pk in cut]
        w.record_table(context, wh, "shards")
        budgets = [check_budget(wh, task, pk, override_reason=config.budget_override) for pk in keys]
        problems = [f"{pk}: {p}" for pk, (found, _) in zip(cut, verified) for p in found]
        counts = {k: sum(c[k] for _, c in verified) for k in verified[0][1]} if verified else {}
        dry_runs = [check_dry_run(wh, task, pk) for pk in keys]
        unblocked = [check_no_blocked_lines(wh, task, pk) for pk in keys]
        accounts = [check_account(wh, task, pk) for pk in keys]
        # The lines as they will be sent (what `batch-assets dry-run` shows), for the UI.
        samples = [render_sample(wh, task, pk) for pk in cut]
        sample_metadata = (
            {
                "sample_lines": dg.MetadataValue.md(samples[0].markdown()),
                "sample_estimate": dg.MetadataValue.json(samples[0].estimate()),
            }
            if len(samples) == 1
            else {f"sample_{s.task_id}": dg.MetadataValue.md(s.markdown()) for s in samples}
        )
        return dg.MaterializeResult(
            metadata={
                "task_ids": ", ".join(task.task_id(pk) for pk in keys),
                "new_shards": sum(len(s.new_shards) for s in out),
                "new_lines": sum(s.lines for s in out),
                "newly_quarantined": sum(s.quarantined for s in out),
                "not_cut": ", ".join(task.task_id(pk) for pk in keys if pk not in cut) or "none",
                **counts,
                **sample_metadata,
            },
            check_results=[
                dg.AssetCheckResult(
                    check_name=SHARDS_CHECK,
                    passed=not problems,
                    metadata={"problems": "\n".join(problems) or "none", **counts},
                ),
                dg.AssetCheckResult(
                    check_name=BUDGET_CHECK,
                    passed=all(b.passed for b in budgets),
                    metadata=budgets[0].as_metadata()
                    if len(budgets) == 1
                    else {b.task_id: dg.MetadataValue.json(b.as_metadata()) for b in budgets},
                ),
                verdicts_result(MODEL_CHECK, models),
                verdicts_result(PROMPT_CHECK, prompts),
                verdicts_result(DRY_RUN_CHECK, dry_runs),
                verdicts_result(SENSITIVE_CHECK, unblocked),
                verdicts_result(ACCOUNT_CHECK, accounts),
            ],
        )

    return shards


def _cut_due_retries(wh, task, partition_keys) -> int:
    """Due retries (the retry ledger's decisions) become new, smaller shards of attempt n+1, checked
    like first-attempt shards before anything is sent; the lines cut."""
    lines = 0
    for pk in partition_keys:
        lines += cut_shards(wh, task, pk).lines
        problems, _ = verify_shards(wh, task, pk)
        if problems:
            raise dg.Failure(
                f"{task.task_id(pk)}: shards failed their checks; nothing submitted",
                metadata={"problems": "\n".join(problems)},
            )
    return lines


def _refusal_failure(refused: SendRefused) -> dg.Failure:
    first = refused.refusals[0]
    return dg.Failure(str(refused), metadata={k: str(v) for k, v in first.as_metadata().items()})


def _refuse_failed_gates(wh, task, partition_keys) -> None:
    """Before due retries are cut: no line is written for a partition the gate refuses anyway."""
    for pk in partition_keys:
        refusals = failed_gates(wh, task, pk)
        if refusals:
            raise _refusal_failure(SendRefused(refusals))


def _run_priority(tags) -> str | None:
    """`batch_assets/priority` on the run (an urgent rerun from the UI) overrides the task's priority."""
    value = tags.get(TAG_PRIORITY)
    if value is not None and value not in PRIORITIES:
        raise dg.Failure(f"run tag {TAG_PRIORITY}={value!r} is not a priority: use one of {', '.join(PRIORITIES)}")
    return value


def _submit_all(wh, task, partition_keys, adapter, run_id, priority=None):
    """The gate itself (`may_send`) is inside submit_pending, for every sender."""
    try:
        return [submit_pending(wh, task, pk, adapter, run_id=run_id, priority=priority) for pk in partition_keys]
    except SendRefused as refused:
        raise _refusal_failure(refused) from None


def build_submissions(w: TaskWiring) -> dg.AssetsDefinition:
    task, name, spec = w.task, w.name, w.task.spec

    @dg.asset(
        key=w.key("submissions"),
        deps=[w.key("shards")],
        kinds={spec.provider},
        pool=f"{spec.provider}_create",  # the run queue's cap on concurrent create steps per provider
        description=f"One {spec.provider} batch per shard. The intent is recorded in the ledger before every "
        "create call, so a crash or a lost answer is found again instead of creating a second "
        "batch; shards beyond the provider's concurrent-job cap wait for room; due retries are cut "
        "into new shards and checked like the first ones before anything is sent.",
        **w.common(),
    )
    def submissions(
        context: dg.AssetExecutionContext,
        config: SubmissionsConfig,
        warehouse: WarehouseResource,
        providers: ProvidersResource,
    ):
        tag_run(context, name)
        wh = warehouse.warehouse()
        adapter = providers.adapter(spec.provider)
        keys = context.partition_keys
        _refuse_failed_gates(wh, task, keys)
        retry_lines = _cut_due_retries(wh, task, keys) if spec.retry.automatic or config.send_retries else 0
        out = _submit_all(wh, task, keys, adapter, context.run.run_id, _run_priority(context.run.tags))
        waiting = {shard: why for s in out for shard, why in s.waiting_for_quota.items()}
        elsewhere = [k for s in out for k in s.claimed_elsewhere]
        undecided = {k: why for s in out for k, why in s.undecided.items()}
        return dg.MaterializeResult(
            metadata={
                "task_ids": ", ".join(s.task_id for s in out),
                "retry_lines_cut": retry_lines,
                "submitted": sum(len(s.submitted) for s in out),
                "recovered_after_crash": sum(len(s.recovered) for s in out),
                **totals(out, "waiting_for_capacity", "already_submitted"),
                # Shards waiting for provider quota, and why (the limit, or who is ahead in the queue).
                "waiting_for_quota": "\n".join(f"{k}: {why}" for k, why in waiting.items()) or "none",
                # Shards another submit run holds: skipped here (that run submits them).
                "claimed_elsewhere": len(elsewhere),
                "claimed_elsewhere_jobs": ", ".join(elsewhere) or "none",
                # Creates that may or may not have happened: nothing was created; the next run looks again.
                "undecided": len(undecided),
                "undecided_jobs": "\n".join(f"{k}: {why}" for k, why in undecided.items()) or "none",
            }
        )

    return submissions
