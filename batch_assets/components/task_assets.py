"""A task's assets, checks, jobs and schedule: thin Dagster wiring over batch_assets.pipeline."""


import warnings
from dataclasses import replace
from datetime import timedelta

import dagster as dg

from batch_assets.components.asset_metadata import (
    TAG_PARTITION,
    TAG_TASK,
    business_table_key,
    partition_tag_value,
    per_partition,
    source_table_keys,
    table_metadata,
    table_name_metadata,
    table_key,
    tag_run,
    task_owners,
    task_tags,
)
from batch_assets.components.partitions import daily_partitions
from batch_assets.pipeline.apply import apply_results
from batch_assets.pipeline.budget import check_budget
from batch_assets.pipeline.cost import partition_gates
from batch_assets.pipeline.dry_run import render_sample
from batch_assets.pipeline.presubmit import (DRY_RUN_CHECK, MODEL_CHECK, PROMPT_CHECK, Verdict, check_dry_run,
                                             check_model, check_prompt, failed_gates)
from batch_assets.pipeline.ingest import collect_raw_results
from batch_assets.pipeline.manifest import freeze_manifest
from batch_assets.pipeline.parse import parse_results
from batch_assets.pipeline.reconcile import Reconciliation, settle
from batch_assets.pipeline.report import build_report, report_markdown, report_numbers, summary_line, write_report
from batch_assets.pipeline.retry import plan_retries
from batch_assets.pipeline.shards import cut_shards, verify_shards
from batch_assets.pipeline.stuck import stuck_jobs
from batch_assets.pipeline.submit import submit_pending
from batch_assets.pipeline.tables import STAGE_TABLES, business_table_stats, ledger_table_stats, source_tables
from batch_assets.resources import ProvidersResource, WarehouseResource
from batch_assets.spec.resolve import ResolvedTask

SUBMIT_STAGES = ("manifest", "shards", "submissions")
COLLECT_STAGES = ("raw_results", "parsed_results", "applied")
REPORT_STAGE = "report"   # run by the collect job after `applied`
SHARDS_CHECK = "shards_within_limits"
BUDGET_CHECK = "within_budget"
RECONCILIATION_CHECK = "reconciliation"
STUCK_CHECK = "no_stuck_jobs"


class ManifestConfig(dg.Config):
    refreeze: bool = False
    """Re-query the source; unchanged items keep their custom_id, new or changed ones get new ones."""


class ShardsConfig(dg.Config):
    budget_override: str = ""
    """A reason to submit a partition although its estimate exceeds a budget cap; recorded in
    ledger.operator_action (budget_override) with the figures."""


class SubmissionsConfig(dg.Config):
    send_retries: bool = False
    """Also cut and send due retries when the task's retries are not automatic (retry.automatic: false)."""


def collect_asset_keys(task_name: str) -> list[dg.AssetKey]:
    """The assets of a task's collect job: collection stages, then the report."""
    return [dg.AssetKey([task_name, stage]) for stage in (*COLLECT_STAGES, REPORT_STAGE)]


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds:.0f} s"


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


def _health(rec: Reconciliation) -> dict:
    """A partition's health as plain numbers (they feed the asset's plots) plus its final status."""
    items = rec.manifest_items
    rates = {"applied_rate": rec.applied / items, "failure_rate": rec.final_failed_total / items} if items else {}
    return {"task_id": rec.task_id, "items": items, "applied": rec.applied, "revoked": rec.revoked, **rates,
            "final_failed": rec.final_failed_total, "in_flight": rec.in_flight, "retry_pending": rec.retry_pending,
            "unresolved": rec.unresolved, "final_status": rec.final_status or "pending"}


def _hours(window: str) -> float:
    """'24h' / '2d' / '90m' -> hours (a provider's completion window; 24 when unreadable)."""
    units = {"h": 1, "d": 24, "m": 1 / 60}
    try:
        return float(window[:-1]) * units[window[-1]]
    except (KeyError, ValueError, IndexError):
        return 24.0


def applied_freshness(task: ResolvedTask) -> dg.FreshnessPolicy:
    """A new partition applied at least every day: warn after 26 h without one; fail after a day
    plus the provider's completion window plus 6 h (54 h for a 24-hour window)."""
    fail = 24 + _hours(task.limits.completion_window) + 6
    return dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=fail), warn_window=timedelta(hours=26))


def _verdicts_result(check: str, verdicts: list[Verdict]) -> dg.AssetCheckResult:
    """One check result over a run's partitions: passed when every partition passed."""
    failed = [v for v in verdicts if not v.passed]
    return dg.AssetCheckResult(
        check_name=check, passed=not failed, description="; ".join(v.reason for v in failed)[:1000] or None,
        metadata=verdicts[0].as_metadata() if len(verdicts) == 1 else {
            "reason": "\n".join(f"{v.task_id}: {v.reason}" for v in verdicts),
            **{v.task_id: dg.MetadataValue.json(v.as_metadata()) for v in verdicts}})


def _money(v: float | None) -> float | str:
    return round(v, 6) if v is not None else "unknown (model not in the provider's prices.yaml)"


def build_task_defs(task: ResolvedTask) -> dg.Definitions:
    """Every asset handles all partition keys of its run, so a single-run date-range backfill works."""
    spec = task.spec
    name = spec.name
    key = lambda stage: dg.AssetKey([name, stage])  # noqa: E731
    # single_run: a date range (UI backfill or `dg launch --partition-range`) runs as one run; every
    # asset loops over context.partition_keys.
    common = dict(group_name=name, partitions_def=daily_partitions, backfill_policy=dg.BackfillPolicy.single_run(),
                  owners=task_owners(task), tags=task_tags(task))

    def record_table(context: dg.AssetExecutionContext, wh, stage: str) -> None:
        """Table name, columns and rows (the task's, and each partition's) of the stage's ledger table."""
        with wh.connect() as conn:
            per_partition(context, {pk: table_metadata(ledger_table_stats(conn, STAGE_TABLES[stage], name,
                                                                          [task.task_id(pk)]))
                                    for pk in context.partition_keys})

    @dg.asset(key=key("manifest"), kinds={"duckdb", "parquet"}, deps=source_table_keys(task),
              metadata=table_name_metadata(STAGE_TABLES["manifest"]),
              description=f"The partition's input items of {name}, frozen once: one per source row of the day "
                          "(rows without a business id or seen twice are rejected), each with a custom_id and an "
                          "input hash. Re-running reuses the frozen items unless `refreeze` is set; then unchanged "
                          "items keep their custom_id and changed ones are superseded.", **common)
    def manifest(context: dg.AssetExecutionContext, config: ManifestConfig, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        out = [freeze_manifest(wh, task, pk, refreeze=config.refreeze) for pk in context.partition_keys]
        record_table(context, wh, "manifest")
        with wh.connect() as conn:  # what the manifest read: the source tables' columns and rows
            for table in source_tables(spec):
                context.log_event(dg.AssetObservation(asset_key=table_key(table),
                                                      metadata=table_metadata(business_table_stats(conn, table))))
        with wh.connect() as conn:
            gates = partition_gates(conn, [s.task_id for s in out])
        return dg.MaterializeResult(metadata={
            **_per_partition(out, lambda s: {"manifest_version": s.manifest_version, "reused": s.reused,
                                             **({"source_read": s.source_read} if s.source_read else {}),
                                             **(s.pii.as_metadata() if s.pii else {}),
                                             "cost_estimated": _money(gates[s.task_id].cost_estimated),
                                             "currency": gates[s.task_id].currency or "unknown"}),
            "manifest_uri": dg.MetadataValue.path(out[-1].manifest_uri),
            **_totals(out, "items", "new_items", "superseded_items", "rejected_business_ids"),
            "pii_redacted": sum(g.pii_redacted for g in gates.values()),
            "pii_blocked": sum(s.pii.blocked_items for s in out if s.pii),
        })

    @dg.asset(key=key("shards"), deps=[key("manifest")], kinds={"duckdb", "json"},
              metadata=table_name_metadata(STAGE_TABLES["shards"]),
              description=f"Provider-ready JSONL request files of {name}, one line per item, cut to stay within "
                          f"{spec.provider}'s limits (requests, bytes, tokens per batch); a line that cannot be sent "
                          "(too long, blank required input) is quarantined with its reason instead. Each shard "
                          "file is recorded with its checksum; nothing is submitted unless every shard passes.",
              check_specs=[dg.AssetCheckSpec(SHARDS_CHECK, asset=key("shards"), blocking=True,
                                             description="Every shard file within limits and intact; lines + quarantined = items."),
                           dg.AssetCheckSpec(BUDGET_CHECK, asset=key("shards"), blocking=True,
                                             description="The partition's estimated cost within the task's budget and the "
                                                         "per-model / per-day caps of defs/budgets.yaml (or an operator "
                                                         "override with a reason, recorded in the ledger)."),
                           dg.AssetCheckSpec(MODEL_CHECK, asset=key("shards"), blocking=True,
                                             description=f"The model is on {spec.provider}'s allow-list "
                                                         f"(providers/{spec.provider}/models.yaml) and on the task's "
                                                         "gate.allowed_models when it narrows it."),
                           dg.AssetCheckSpec(PROMPT_CHECK, asset=key("shards"), blocking=True,
                                             description="Prompt and output-schema versions, and the hashes of the "
                                                         "prompt template + system message and of the output schema, "
                                                         "unchanged since the partition was frozen."),
                           dg.AssetCheckSpec(DRY_RUN_CHECK, asset=key("shards"), blocking=True,
                                             description="A partition above gate.dry_run_threshold items (default "
                                                         "10,000) has a recorded dry run (`batch-assets dry-run "
                                                         "<task_id>`) of the task's prompt version.")],
              **common)
    def shards(context: dg.AssetExecutionContext, config: ShardsConfig, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        models = [check_model(task, pk) for pk in context.partition_keys]
        prompts = [check_prompt(wh, task, pk) for pk in context.partition_keys]
        # A disallowed model or a changed prompt/schema would be written into the request lines:
        # such partitions are not cut at all.
        cut = [pk for pk, m, p in zip(context.partition_keys, models, prompts) if m.passed and p.passed]
        out = [cut_shards(wh, task, pk, retries=spec.retry.automatic) for pk in cut]
        verified = [verify_shards(wh, task, pk) for pk in cut]
        record_table(context, wh, "shards")
        budgets = [check_budget(wh, task, pk, override_reason=config.budget_override) for pk in context.partition_keys]
        problems = [f"{pk}: {p}" for pk, (found, _) in zip(cut, verified) for p in found]
        counts = {k: sum(c[k] for _, c in verified) for k in verified[0][1]} if verified else {}
        dry_runs = [check_dry_run(wh, task, pk) for pk in context.partition_keys]
        # The lines as they will be sent (what `batch-assets dry-run` shows), for the UI.
        samples = [render_sample(wh, task, pk) for pk in cut]
        return dg.MaterializeResult(
            metadata={"task_ids": ", ".join(task.task_id(pk) for pk in context.partition_keys),
                      "new_shards": sum(len(s.new_shards) for s in out),
                      "new_lines": sum(s.lines for s in out), "newly_quarantined": sum(s.quarantined for s in out),
                      "not_cut": ", ".join(task.task_id(pk) for pk in context.partition_keys if pk not in cut) or "none",
                      **counts,
                      **({"sample_lines": dg.MetadataValue.md(samples[0].markdown()),
                          "sample_estimate": dg.MetadataValue.json(samples[0].estimate())} if len(samples) == 1 else
                         {f"sample_{s.task_id}": dg.MetadataValue.md(s.markdown()) for s in samples})},
            check_results=[dg.AssetCheckResult(check_name=SHARDS_CHECK, passed=not problems,
                                               metadata={"problems": "\n".join(problems) or "none", **counts}),
                           dg.AssetCheckResult(check_name=BUDGET_CHECK, passed=all(b.passed for b in budgets),
                                               metadata=budgets[0].as_metadata() if len(budgets) == 1 else {
                                                   b.task_id: dg.MetadataValue.json(b.as_metadata()) for b in budgets}),
                           _verdicts_result(MODEL_CHECK, models), _verdicts_result(PROMPT_CHECK, prompts),
                           _verdicts_result(DRY_RUN_CHECK, dry_runs)],
        )

    @dg.asset(key=key("submissions"), deps=[key("shards")], kinds={spec.provider},
              description=f"One {spec.provider} batch per shard. The intent is recorded in the ledger before every "
                          "create call, so a crash or a lost answer is found again instead of creating a second "
                          "batch; shards beyond the provider's concurrent-job cap wait for room; due retries are cut "
                          "into new shards and checked like the first ones before anything is sent.", **common)
    def submissions(context: dg.AssetExecutionContext, config: SubmissionsConfig, warehouse: WarehouseResource,
                    providers: ProvidersResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        adapter = providers.adapter(spec.provider)
        for pk in context.partition_keys:  # the gate also holds when this asset runs on its own
            for verdict in failed_gates(wh, task, pk):
                raise dg.Failure(f"{verdict.task_id}: {verdict.check} failed; nothing submitted. {verdict.reason}",
                                 metadata={k: str(v) for k, v in verdict.as_metadata().items()})
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
        for pk in context.partition_keys:  # the budget gate also holds when this asset runs on its own
            verdict = check_budget(wh, task, pk)
            if not verdict.passed:
                raise dg.Failure(f"{verdict.task_id}: over budget; nothing submitted. Override with run config "
                                 f"budget_override on the shards asset (a reason).",
                                 metadata={k: str(v) for k, v in verdict.as_metadata().items()})
        out = [submit_pending(wh, task, pk, adapter, run_id=context.run.run_id) for pk in context.partition_keys]
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
              metadata=table_name_metadata(STAGE_TABLES["raw_results"]),
              description="The output and error files of every provider batch that has ended, downloaded once, "
                          "kept on disk verbatim and loaded line by line; each line is matched to its item through "
                          "the request id that was sent, never by position (orphan, duplicate and malformed lines "
                          "are kept and counted).", **common)
    def raw_results(context: dg.AssetExecutionContext, warehouse: WarehouseResource, providers: ProvidersResource):
        tag_run(context, name)
        adapter = providers.adapter(spec.provider)
        out = [collect_raw_results(warehouse.warehouse(), task, pk, adapter) for pk in context.partition_keys]
        record_table(context, warehouse.warehouse(), "raw_results")
        return dg.MaterializeResult(metadata={
            "task_ids": ", ".join(s.task_id for s in out),
            **_totals(out, "downloaded_files", "ingested_files", "lines", "remote_files_deleted",
                      "remote_deletions_failed"),
            **_summed_dicts((s.by_status for s in out), "lines_"),
        })

    @dg.asset(key=key("parsed_results"), deps=[key("raw_results")], kinds={"duckdb"},
              metadata=table_name_metadata(STAGE_TABLES["parsed_results"]),
              description="One outcome per item and attempt: an answer checked against the output schema, or a "
                          "failure classified as validation, rate/capacity, content policy, internal, parse, expired "
                          "or canceled. Every failed attempt then gets its class's action in the retry ledger "
                          "(retry with backoff, re-queue, re-ask, hold for an operator or for compliance, final).",
              **common)
    def parsed_results(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        out = [parse_results(wh, task, pk) for pk in context.partition_keys]
        # The retry ledger: every failed attempt gets its class's action (retry, re-queue, final, hold).
        plans = [plan_retries(wh, task, pk) for pk in context.partition_keys]
        record_table(context, wh, "parsed_results")
        return dg.MaterializeResult(metadata={
            "task_ids": ", ".join(s.task_id for s in out),
            "new_parsed": sum(s.parsed for s in out), "job_outcomes_applied_to_items": sum(s.synthesized for s in out),
            # results of items frozen under another output version than the task's now (restore or refreeze)
            "refused_output_version": sum(s.refused_version for s in out),
            **_summed_dicts((s.by_class for s in out), "outcome_"),
            **_summed_dicts((p.by_action for p in plans), "retry_decision_"),
        })

    with warnings.catch_warnings():
        # Partitioned asset checks are a preview API in Dagster 1.13, used on purpose: each day's
        # reconciliation result is recorded against that day's partition.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        reconciliation_spec = dg.AssetCheckSpec(
            RECONCILIATION_CHECK, asset=key("applied"), partitions_def=daily_partitions,
            description="Passes only when every item of the partition is final (applied, stale, quarantined, "
                        "final-failed within the task's tolerance, held for compliance, canceled) and the "
                        "reconciliation equations hold; warns while work is pending (in flight, retries); fails "
                        "when nothing is pending and an item is unresolved or final failures exceed the tolerance. "
                        "A run for one day records its result against that day. A run over a range of days "
                        "records one result for the range: `partition` in its metadata names the days and "
                        "every day's reconciliation is listed by task_id (collect runs are one day each).")

    @dg.asset(key=key("applied"), deps=[key("parsed_results")], kinds={"duckdb", "table"},
              metadata=table_name_metadata(STAGE_TABLES["applied"]),
              description=f"Usable answers written into the business table {spec.apply.table}, each exactly once "
                          "(keyed by business key and output version); an answer whose source row changed since "
                          "the manifest froze it is marked stale and not written. Every decision is recorded in the "
                          "ledger in the same transaction as the write. Each partition's materialization carries "
                          "its health: items, applied, applied and failure rates, in flight, unresolved, final status.",
              check_specs=[reconciliation_spec], freshness_policy=applied_freshness(task), **common)
    def applied(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        out = [apply_results(wh, task, pk) for pk in context.partition_keys]
        settled = [settle(wh, s.task_id, spec.retry.max_failed_fraction) for s in out]
        record_table(context, wh, "applied")
        per_partition(context, {pk: _health(r) for pk, (r, _) in zip(context.partition_keys, settled)})
        with wh.connect() as conn:  # the business table as the write left it
            stats = business_table_stats(conn, spec.apply.table, [s.task_id for s in out])
        context.log_event(dg.AssetObservation(asset_key=business_table_key(task), metadata={
            **table_metadata(replace(stats, partition_rows=None)), "written_by": ", ".join(s.task_id for s in out),
            "rows_of_these_partitions": stats.partition_rows or 0}))
        verdicts = [v for _, v in settled]
        # passed only when every item of every partition is final; WARN while work is pending
        # (in flight, retries); ERROR when nothing is pending and anything is unresolved or unbalanced.
        passed = all(v.passed for v in verdicts)
        severity = (dg.AssetCheckSeverity.WARN if not passed and all(v.status != "failed" for v in verdicts)
                    else dg.AssetCheckSeverity.ERROR)
        reasons = [f"{r.task_id}: {v.status}: {reason}" for r, v in settled for reason in v.reasons]
        with wh.connect() as conn:
            gates = partition_gates(conn, [s.task_id for s in out])
        recon_meta = settled[0][0].as_metadata() if len(settled) == 1 else {
            r.task_id: dg.MetadataValue.json(r.as_metadata()) for r, _ in settled}
        return dg.MaterializeResult(
            metadata={"task_ids": ", ".join(s.task_id for s in out), "target_table": spec.apply.table,
                      "newly_applied": sum(s.applied for s in out), "newly_stale": sum(s.stale for s in out),
                      "refused_output_version": sum(s.refused_version for s in out),
                      "unresolved": sum(r.unresolved for r, _ in settled),
                      "final_status": ", ".join(f"{r.task_id}={r.final_status or 'pending'}" for r, _ in settled),
                      "cost_estimated": _money(sum(g.cost_estimated or 0 for g in gates.values())),
                      "cost_actual": _money(sum(g.cost_actual or 0 for g in gates.values())),
                      "currency": ", ".join(sorted({g.currency or "unknown" for g in gates.values()})),
                      "pii_redacted": sum(g.pii_redacted for g in gates.values()),
                      "pii_blocked": sum(g.pii_blocked for g in gates.values())},
            check_results=[dg.AssetCheckResult(
                check_name=RECONCILIATION_CHECK, passed=passed, severity=severity,
                description="; ".join(reasons)[:1000] or None,
                metadata={"verdict": "\n".join(reasons), "partitions": ", ".join(r.task_id for r, _ in settled),
                          "partition": partition_tag_value(context.partition_keys),
                          "task_id": ", ".join(r.task_id for r, _ in settled), **recon_meta},
            )],
        )

    @dg.asset_check(asset=key("submissions"), name=STUCK_CHECK,
                    description="No provider job of the task stayed in one state past its SLA (warns with the "
                                "stuck jobs, their state and time in it; the provider status sensor marks them).")
    def no_stuck_jobs(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        stuck = stuck_jobs(warehouse.warehouse(), name)
        lines = [f"{j['job_key']}: {j['state']} for {_duration(j['seconds_in_state'])}"
                 + (f" ({j['stuck_action']})" if j["stuck_action"] else "") for j in stuck]
        return dg.AssetCheckResult(passed=not stuck, severity=dg.AssetCheckSeverity.WARN, metadata={
            "stuck_jobs": "\n".join(lines) or "none", "stuck_count": len(stuck),
            "job_keys": ", ".join(j["job_key"] for j in stuck) or "none"})


    @dg.asset(key=key(REPORT_STAGE), deps=[key("applied")], kinds={"html"},
              description=f"A report per partition of {name}: items by final outcome (final failures by class), "
                          "open items, retries, tokens in and out, estimated and actual cost, queue, run and total "
                          "time, time in each provider state, completion rate and, while work is under way, an "
                          "ETA. Shown as tables and plottable numbers on each partition's materialization and "
                          "written as an HTML page with charts to <data dir>/reports/<task_id>.html.", **common)
    def report(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        tag_run(context, name)
        wh = warehouse.warehouse()
        with wh.connect() as conn:
            known = {r[0] for r in conn.execute("SELECT task_id FROM ledger.batch_task").fetchall()}
            reports = {pk: build_report(conn, task.task_id(pk), spec.retry.max_failed_fraction)
                       for pk in context.partition_keys if task.task_id(pk) in known}
        per_partition(context, {pk: {"task_id": task.task_id(pk), "status": "no manifest frozen yet"}
                                for pk in context.partition_keys if pk not in reports})
        paths = {pk: write_report(r, wh.data_dir) for pk, r in reports.items()}
        per_partition(context, {pk: {
            "task_id": r.task_id, "status": r.verdict.final_status or "in progress", "summary": summary_line(r),
            **report_numbers(r), "report": dg.MetadataValue.md(report_markdown(r)),
            "report_path": dg.MetadataValue.path(str(paths[pk]))} for pk, r in reports.items()})
        return dg.MaterializeResult(metadata={"task_ids": ", ".join(task.task_id(pk) for pk in context.partition_keys)})

    # The provider status sensor launches its runs under these two jobs (see defs/sensors.py).
    job_tags = {TAG_TASK: name}
    submit_job = dg.define_asset_job(
        f"{name}__submit", selection=dg.AssetSelection.assets(*[key(s) for s in SUBMIT_STAGES]),
        description=f"Freeze, shard and submit one partition of {name}.", tags=job_tags,
    )
    collect_job = dg.define_asset_job(
        f"{name}__collect", selection=dg.AssetSelection.assets(*[key(s) for s in (*COLLECT_STAGES, REPORT_STAGE)]),
        description=f"Download, parse and apply the results of {name}'s terminal provider jobs, then report.",
        tags=job_tags,
    )
    # Yesterday's partition (the last complete day) at 01:00 UTC; the target is the partitioned
    # submit job. Stopped until someone starts it (UI, or `dagster schedule start`). Not
    # dg.build_schedule_from_partitioned_job: in Dagster 1.13 its ticks call the deprecated
    # JobDefinition.run_request_for_partition (a DeprecationWarning on every tick), and the UI shows
    # the same for both (1.13 names no partition set on a schedule; the job's page lists the partitions).
    @dg.schedule(name=f"{name}__daily", cron_schedule="0 1 * * *", target=submit_job, execution_timezone="UTC",
                 default_status=dg.DefaultScheduleStatus.STOPPED,
                 description=f"Freezes and submits yesterday's partition of {name} every day at 01:00 UTC. Stopped "
                             "by default: start it to run the task daily.")
    def schedule(context: dg.ScheduleEvaluationContext):
        day = (context.scheduled_execution_time - timedelta(days=1)).strftime("%Y-%m-%d")
        return dg.RunRequest(run_key=f"{name}:{day}", partition_key=day, tags={TAG_PARTITION: day})

    return dg.Definitions(
        assets=[manifest, shards, submissions, raw_results, parsed_results, applied, report], asset_checks=[no_stuck_jobs],
        jobs=[submit_job, collect_job], schedules=[schedule],
    )
