"""A task's assets, checks, jobs and schedule: thin Dagster wiring over batch_assets.pipeline."""


from datetime import timedelta

import dagster as dg

from batch_assets.components.partitions import daily_partitions
from batch_assets.ledger.jobs import record_job_endpoints
from batch_assets.pipeline.apply import apply_results
from batch_assets.pipeline.ingest import collect_raw_results
from batch_assets.pipeline.manifest import freeze_manifest
from batch_assets.pipeline.parse import parse_results
from batch_assets.pipeline.reconcile import settle
from batch_assets.pipeline.retry import plan_retries
from batch_assets.pipeline.shards import cut_shards, verify_shards
from batch_assets.pipeline.submit import submit_pending
from batch_assets.resources import ProvidersResource, WarehouseResource
from batch_assets.spec.resolve import ResolvedTask

SUBMIT_STAGES = ("manifest", "shards", "submissions")
COLLECT_STAGES = ("raw_results", "parsed_results", "applied")
SHARDS_CHECK = "shards_within_limits"
RECONCILIATION_CHECK = "reconciliation"


class ManifestConfig(dg.Config):
    refreeze: bool = False
    """Re-query the source; unchanged items keep their custom_id, new or changed ones get new ones."""


class SubmissionsConfig(dg.Config):
    send_retries: bool = False
    """Also cut and send due retries when the task's retries are not automatic (retry.automatic: false)."""


def collect_asset_keys(task_name: str) -> list[dg.AssetKey]:
    return [dg.AssetKey([task_name, stage]) for stage in COLLECT_STAGES]


def _totals(summaries: list, *fields: str) -> dict:
    return {f: sum(getattr(s, f) for s in summaries) for f in fields}


def _summed_dicts(dicts, prefix: str) -> dict:
    total: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            total[prefix + k] = total.get(prefix + k, 0) + v
    return total


def _per_partition(summaries: list, fields) -> dict:
    if len(summaries) == 1:
        return {"task_id": summaries[0].task_id, **fields(summaries[0])}
    return {s.task_id: dg.MetadataValue.json(fields(s)) for s in summaries}


def build_task_defs(task: ResolvedTask) -> dg.Definitions:
    """Every asset handles all partition keys of its run, so a single-run date-range backfill works."""
    spec = task.spec
    name = spec.name
    key = lambda stage: dg.AssetKey([name, stage])  # noqa: E731
    # single_run: a date range (UI backfill or `dg launch --partition-range`) runs as one run; every
    # asset loops over context.partition_keys.
    common = dict(group_name=name, partitions_def=daily_partitions, backfill_policy=dg.BackfillPolicy.single_run())

    @dg.asset(key=key("manifest"), kinds={"duckdb", "parquet"},
              description=f"Frozen input manifest of {name} for the partition (reused unless refreeze).", **common)
    def manifest(context: dg.AssetExecutionContext, config: ManifestConfig, warehouse: WarehouseResource):
        wh = warehouse.warehouse()
        out = [freeze_manifest(wh, task, pk, refreeze=config.refreeze) for pk in context.partition_keys]
        return dg.MaterializeResult(metadata={
            **_per_partition(out, lambda s: {"manifest_version": s.manifest_version, "reused": s.reused}),
            "manifest_uri": dg.MetadataValue.path(out[-1].manifest_uri),
            **_totals(out, "items", "new_items", "superseded_items", "rejected_business_ids"),
            "dagster/row_count": sum(s.items for s in out),
        })

    @dg.asset(key=key("shards"), deps=[key("manifest")], kinds={"duckdb", "json"},
              description=f"Provider-ready JSONL shards of {name}, cut by {spec.provider} limits; bad lines quarantined.",
              check_specs=[dg.AssetCheckSpec(SHARDS_CHECK, asset=key("shards"), blocking=True,
                                             description="Every shard file within limits and intact; lines + quarantined = items.")],
              **common)
    def shards(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        wh = warehouse.warehouse()
        out = [cut_shards(wh, task, pk, retries=spec.retry.automatic) for pk in context.partition_keys]
        verified = [verify_shards(wh, task, pk) for pk in context.partition_keys]
        problems = [f"{pk}: {p}" for pk, (found, _) in zip(context.partition_keys, verified) for p in found]
        counts = {k: sum(c[k] for _, c in verified) for k in verified[0][1]}
        return dg.MaterializeResult(
            metadata={"task_ids": ", ".join(s.task_id for s in out), "new_shards": sum(len(s.new_shards) for s in out),
                      "new_lines": sum(s.lines for s in out), "newly_quarantined": sum(s.quarantined for s in out),
                      **counts},
            check_results=[dg.AssetCheckResult(check_name=SHARDS_CHECK, passed=not problems,
                                               metadata={"problems": "\n".join(problems) or "none", **counts})],
        )

    @dg.asset(key=key("submissions"), deps=[key("shards")], kinds={spec.provider},
              description=f"One {spec.provider} batch per shard; intent recorded before every create call.", **common)
    def submissions(context: dg.AssetExecutionContext, config: SubmissionsConfig, warehouse: WarehouseResource,
                    providers: ProvidersResource):
        wh = warehouse.warehouse()
        adapter = providers.adapter(spec.provider)
        retry_lines = 0
        if spec.retry.automatic or config.send_retries:
            # Due retries (the retry ledger's decisions) become new, smaller shards of attempt n+1;
            # they are checked like first-attempt shards before anything is sent.
            for pk in context.partition_keys:
                retry_lines += cut_shards(wh, task, pk).lines
                problems, _ = verify_shards(wh, task, pk)
                if problems:
                    raise dg.Failure(f"{task.task_id(pk)}: shards failed their checks; nothing submitted",
                                     metadata={"problems": "\n".join(problems)})
        out = [submit_pending(wh, task, pk, adapter, run_id=context.run.run_id) for pk in context.partition_keys]
        mode, url = providers.endpoint_of(spec.provider)
        with wh.connect() as conn:  # where this run's jobs went (submit_pending records no endpoint)
            for summary in out:
                record_job_endpoints(conn, summary.task_id, spec.provider, mode, url)
        elsewhere = [k for s in out for k in s.claimed_elsewhere]
        undecided = {k: why for s in out for k, why in s.undecided.items()}
        return dg.MaterializeResult(metadata={
            "task_ids": ", ".join(s.task_id for s in out), "retry_lines_cut": retry_lines,
            "submitted": sum(len(s.submitted) for s in out), "recovered_after_crash": sum(len(s.recovered) for s in out),
            **_totals(out, "waiting_for_capacity", "already_submitted"),
            # Shards another submit run holds: skipped here (that run submits them).
            "claimed_elsewhere": len(elsewhere), "claimed_elsewhere_jobs": ", ".join(elsewhere) or "none",
            # Creates that may or may not have happened: nothing was created; the next run looks again.
            "undecided": len(undecided),
            "undecided_jobs": "\n".join(f"{k}: {why}" for k, why in undecided.items()) or "none",
        })

    @dg.asset(key=key("raw_results"), deps=[key("submissions")], kinds={spec.provider, "duckdb"},
              description="Output and error files of terminal jobs, downloaded, kept and loaded by custom_id.", **common)
    def raw_results(context: dg.AssetExecutionContext, warehouse: WarehouseResource, providers: ProvidersResource):
        adapter = providers.adapter(spec.provider)
        out = [collect_raw_results(warehouse.warehouse(), task, pk, adapter) for pk in context.partition_keys]
        return dg.MaterializeResult(metadata={
            "task_ids": ", ".join(s.task_id for s in out),
            **_totals(out, "downloaded_files", "ingested_files", "lines"),
            **_summed_dicts((s.by_status for s in out), "lines_"),
        })

    @dg.asset(key=key("parsed_results"), deps=[key("raw_results")], kinds={"duckdb"},
              description="Answers checked against the output schema; every failure classified (validation, rate/capacity, content policy, internal, parse, expired, canceled).", **common)
    def parsed_results(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        wh = warehouse.warehouse()
        out = [parse_results(wh, task, pk) for pk in context.partition_keys]
        # The retry ledger: every failed attempt gets its class's action (retry, re-queue, final, hold).
        plans = [plan_retries(wh, task, pk) for pk in context.partition_keys]
        return dg.MaterializeResult(metadata={
            "task_ids": ", ".join(s.task_id for s in out),
            "new_parsed": sum(s.parsed for s in out), "job_outcomes_applied_to_items": sum(s.synthesized for s in out),
            **_summed_dicts((s.by_class for s in out), "outcome_"),
            **_summed_dicts((p.by_action for p in plans), "retry_decision_"),
        })

    @dg.asset(key=key("applied"), deps=[key("parsed_results")], kinds={"duckdb", "table"},
              description=f"Usable answers written once into {spec.apply.table}; stale inputs held back.",
              check_specs=[dg.AssetCheckSpec(RECONCILIATION_CHECK, asset=key("applied"),
                                             description="Passes only when every item of the partition is final (applied, stale, quarantined, "
                                                         "final-failed within tolerance, held, canceled) and the reconciliation "
                                                         "equations hold; warns while work is pending; fails when anything is unresolved.")],
              **common)
    def applied(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        wh = warehouse.warehouse()
        out = [apply_results(wh, task, pk) for pk in context.partition_keys]
        settled = [settle(wh, s.task_id, spec.retry.max_failed_fraction) for s in out]
        verdicts = [v for _, v in settled]
        # passed only when every item of every partition is final; WARN while work is pending
        # (in flight, retries); ERROR when nothing is pending and anything is unresolved or unbalanced.
        passed = all(v.passed for v in verdicts)
        severity = (dg.AssetCheckSeverity.WARN if not passed and all(v.status != "failed" for v in verdicts)
                    else dg.AssetCheckSeverity.ERROR)
        reasons = [f"{r.task_id}: {v.status}: {reason}" for r, v in settled for reason in v.reasons]
        recon_meta = settled[0][0].as_metadata() if len(settled) == 1 else {
            r.task_id: dg.MetadataValue.json(r.as_metadata()) for r, _ in settled}
        return dg.MaterializeResult(
            metadata={"task_ids": ", ".join(s.task_id for s in out), "target_table": spec.apply.table,
                      "newly_applied": sum(s.applied for s in out), "newly_stale": sum(s.stale for s in out),
                      "unresolved": sum(r.unresolved for r, _ in settled),
                      "final_status": ", ".join(f"{r.task_id}={r.final_status or 'pending'}" for r, _ in settled)},
            check_results=[dg.AssetCheckResult(
                check_name=RECONCILIATION_CHECK, passed=passed, severity=severity,
                metadata={"verdict": "\n".join(reasons), "partitions": ", ".join(r.task_id for r, _ in settled),
                          **recon_meta},
            )],
        )

    submit_job = dg.define_asset_job(
        f"{name}__submit", selection=dg.AssetSelection.assets(*[key(s) for s in SUBMIT_STAGES]),
        description=f"Freeze, shard and submit one partition of {name}.",
    )
    collect_job = dg.define_asset_job(
        f"{name}__collect", selection=dg.AssetSelection.assets(*[key(s) for s in COLLECT_STAGES]),
        description=f"Download, parse and apply the results of {name}'s terminal provider jobs.",
    )
    @dg.schedule(name=f"{name}__daily", cron_schedule="0 1 * * *", target=submit_job,
                 description=f"Freezes and submits yesterday's partition of {name} every day at 01:00.")
    def schedule(context: dg.ScheduleEvaluationContext):
        day = (context.scheduled_execution_time - timedelta(days=1)).strftime("%Y-%m-%d")
        return dg.RunRequest(run_key=f"{name}:{day}", partition_key=day)
    return dg.Definitions(
        assets=[manifest, shards, submissions, raw_results, parsed_results, applied],
        jobs=[submit_job, collect_job], schedules=[schedule],
    )
