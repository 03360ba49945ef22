"""The rest of the pre-submission gate: the model allow-list, prompt and output schema unchanged
since freezing, and the dry run (`batch-assets dry-run`) required above a size threshold. Each is
a blocking check on the shards asset: a failing one submits nothing."""

from __future__ import annotations

import dataclasses
import json

import dagster as dg
import pytest

from batch_assets.cli import main
from batch_assets.components.task_defs import build_task_defs
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.govern.dry_run import NotFrozenError, render_sample
from batch_assets.pipeline.govern.send_gate import check_dry_run, check_model, check_prompt
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.providers.models import allowed_models, matches
from batch_assets.providers.registry import known_providers
from batch_assets.resources import default_resources
from batch_assets.spec.model import GateSpec
from batch_assets.spec.resolve import load_all_tasks

from .conftest import DAY1

TASK_ID1 = "ticket_triage_20261120"


def with_spec(task, **changes):
    return dataclasses.replace(task, spec=task.spec.model_copy(update=changes))


def q(wh, sql: str, params=None) -> list[dict]:
    with wh.connect() as conn:
        cur = conn.execute(sql, params or [])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def submit(task, instance, **kwargs):
    """The task's submit job (manifest -> shards -> submissions) over this test's env, one partition."""
    d = dg.Definitions.merge(build_task_defs(task), dg.Definitions(resources=default_resources()))
    return d.resolve_job_def(f"{task.name}__submit").execute_in_process(
        instance=instance, partition_key=DAY1, raise_on_error=False, **kwargs
    )


def evaluations(run) -> dict:
    return {e.check_name: e for e in run.get_asset_check_evaluations()}


def meta(evaluation) -> dict:
    return {k: v.value for k, v in evaluation.metadata.items()}


def jobs(wh) -> int:
    return q(wh, "SELECT count(*) AS n FROM ledger.provider_job")[0]["n"]


# --- model allow-list ------------------------------------------------------------------------------


def test_every_task_model_is_on_its_providers_allow_list():
    assert all(allowed_models(p) for p in known_providers())
    for task in load_all_tasks().values():
        assert check_model(task, DAY1).passed, task.name


def test_allow_list_patterns_and_a_task_narrows_it_never_widens_it(ticket_task):
    assert matches("gpt-4o-mini-2024-07-18", allowed_models("openai"))  # gpt-4o-mini*
    assert not matches("gpt-4o-2024-08-06", allowed_models("openai"))  # gpt-4o is exact
    v = check_model(with_spec(ticket_task, model="gpt-5-preview"), DAY1)
    assert not v.passed
    assert "model 'gpt-5-preview' is not on openai's allow-list [gpt-4o-mini*, gpt-4o" in v.reason
    assert "add 'gpt-5-preview' to allowed_models in batch_assets/providers/openai/models.yaml" in v.reason
    narrowed = check_model(with_spec(ticket_task, gate=GateSpec(allowed_models=["gpt-4.1"])), DAY1)
    assert not narrowed.passed and "not on the task's gate.allowed_models [gpt-4.1]" in narrowed.reason
    widened = check_model(with_spec(ticket_task, model="o3", gate=GateSpec(allowed_models=["o3", "gpt-4o-mini"])), DAY1)
    assert not widened.passed and "entries ['o3'] are not on the provider's list and allow nothing" in widened.reason
    ok = check_model(with_spec(ticket_task, gate=GateSpec(allowed_models=["gpt-4o-mini*"])), DAY1)
    assert ok.passed and ok.figures["task_allowed"] == "gpt-4o-mini*"


@pytest.mark.slow
def test_a_model_off_the_allow_list_submits_nothing_in_dagster(dagster_env, emulator, ticket_task, instance):
    task = with_spec(ticket_task, model="gpt-4o-2099-01-01")
    run = submit(task, instance)
    check = evaluations(run)["model_allowed"]
    assert not check.passed and "not on openai's allow-list" in meta(check)["reason"]
    assert meta(check)["model"] == "gpt-4o-2099-01-01" and meta(check)["provider"] == "openai"
    assert q(dagster_env, "SELECT count(*) AS n FROM ledger.shard")[0]["n"] == 0  # not even cut
    assert jobs(dagster_env) == 0
    again = submit(ticket_task, instance)  # the allowed model: through
    assert again.success and evaluations(again)["model_allowed"].passed and jobs(dagster_env) > 0


# --- prompt and output schema unchanged since freezing ---------------------------------------------


def test_hashes_are_recorded_at_freeze_and_a_change_fails_with_the_fix(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    (row,) = q(
        wh, "SELECT prompt_version, output_schema_version, prompt_hash, output_schema_hash FROM ledger.batch_task"
    )
    assert row == {
        "prompt_version": ticket_task.spec.prompt.version,
        "output_schema_version": ticket_task.spec.output.version,
        "prompt_hash": ticket_task.prompt_hash,
        "output_schema_hash": ticket_task.output_schema_hash,
    }
    assert check_prompt(wh, ticket_task, DAY1).passed

    edited = dataclasses.replace(ticket_task, template=ticket_task.template + "\nAnswer in French.")
    v = check_prompt(wh, edited, DAY1)
    assert (
        not v.passed
        and f"prompt content changed since freezing under the same version {ticket_task.spec.prompt.version!r}"
        in v.reason
    )
    assert "refreeze" in v.reason and "restore the task file" in v.reason
    system = with_spec(ticket_task, prompt=ticket_task.spec.prompt.model_copy(update={"system": "Be terse."}))
    assert not check_prompt(wh, system, DAY1).passed  # the system message is part of the prompt
    schema = {**ticket_task.output_schema, "description": "tightened"}
    v = check_prompt(wh, dataclasses.replace(ticket_task, output_schema=schema), DAY1)
    assert not v.passed and "output schema content changed" in v.reason
    bumped = with_spec(ticket_task, output=ticket_task.spec.output.model_copy(update={"version": "v99"}))
    v = check_prompt(wh, bumped, DAY1)
    assert not v.passed and "output schema version is 'v99', the partition was frozen with" in v.reason

    freeze_manifest(wh, edited, DAY1, refreeze=True)  # the refreeze records what is sent now
    assert check_prompt(wh, edited, DAY1).passed
    assert not check_prompt(wh, ticket_task, DAY1).passed


@pytest.mark.slow
def test_a_changed_prompt_submits_nothing_until_refrozen_in_dagster(dagster_env, emulator, ticket_task, instance):
    freeze_manifest(dagster_env, ticket_task, DAY1)
    edited = dataclasses.replace(ticket_task, template=ticket_task.template + "\nAnswer in French.")
    run = submit(edited, instance)
    check = evaluations(run)["prompt_unchanged"]
    assert not check.passed and "prompt content changed since freezing" in meta(check)["reason"]
    assert meta(check)["frozen_prompt_hash"] == ticket_task.prompt_hash != meta(check)["task_prompt_hash"]
    assert jobs(dagster_env) == 0
    refreeze = {"ops": {"ticket_triage__manifest": {"config": {"refreeze": True}}}}
    again = submit(edited, instance, run_config=refreeze)
    assert again.success and evaluations(again)["prompt_unchanged"].passed and jobs(dagster_env) > 0


# --- dry run -----------------------------------------------------------------------------------------


def test_dry_run_renders_the_lines_as_the_shards_send_them(seeded_copy, ticket_task):
    wh = seeded_copy
    with pytest.raises(NotFrozenError, match="materialize ticket_triage/manifest for 2026-11-20 first"):
        render_sample(wh, ticket_task, DAY1)
    freeze_manifest(wh, ticket_task, DAY1)
    sample = render_sample(wh, ticket_task, DAY1, n=3)
    assert len(sample.lines) == 3 and sample.items == 58 and sample.currency == "USD" and sample.cost_estimated > 0
    cut_shards(wh, ticket_task, DAY1)
    shard_lines = {}
    for (path,) in [(r["path"],) for r in q(wh, "SELECT path FROM ledger.shard")]:
        for line in open(path, encoding="utf-8").read().splitlines():
            shard_lines[json.loads(line)["custom_id"]] = line
    for r in sample.lines:  # byte for byte what the shard file holds (redacted: no e-mail address)
        assert shard_lines[r["request_id"]] == r["line"]
        assert "@" not in r["line"] or "[EMAIL_" in r["line"]
    assert render_sample(wh, ticket_task, DAY1, n=3).sample_hash == sample.sample_hash  # stable


def test_threshold_gate(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    v = check_dry_run(wh, ticket_task, DAY1)
    assert v.passed and v.reason == "58 items <= gate.dry_run_threshold 10000: no dry run needed"
    strict = with_spec(ticket_task, gate=GateSpec(dry_run_threshold=57))
    v = check_dry_run(wh, strict, DAY1)
    assert not v.passed
    assert v.reason.startswith("58 items > gate.dry_run_threshold 57 and no dry run of ticket_triage prompt")
    assert f"run `batch-assets dry-run {TASK_ID1}`" in v.reason
    assert check_dry_run(wh, with_spec(ticket_task, gate=GateSpec(dry_run_threshold=58)), DAY1).passed


def test_the_demo_e2e_and_soak_partitions_stay_under_the_threshold():
    """`make demo` and the e2e stack seed with the defaults (`batch-assets seed`), the soak with its
    config: every partition stays below the default threshold, so none of them needs a dry run."""
    import inspect

    from batch_assets.demo import seed_kb_articles, seed_product_reviews, seed_support_tickets
    from batch_assets.soak import SoakConfig

    per_day = [
        inspect.signature(f).parameters["per_day"].default
        for f in (seed_support_tickets, seed_kb_articles, seed_product_reviews)
    ]
    soak = SoakConfig()
    per_day += [soak.tickets_per_day, soak.articles_per_day, soak.reviews_per_day]
    threshold = GateSpec().dry_run_threshold
    assert threshold == 10_000 and max(per_day) <= threshold, per_day
    assert all(t.spec.gate.dry_run_threshold == threshold for t in load_all_tasks().values())


@pytest.mark.slow
def test_dry_run_is_required_above_the_threshold_in_dagster(dagster_env, emulator, ticket_task, instance, capsys):
    task = with_spec(ticket_task, gate=GateSpec(dry_run_threshold=10))
    run = submit(task, instance)
    check = evaluations(run)["dry_run_recorded"]
    assert not check.passed and meta(check)["items"] == 58 and meta(check)["dry_run"] == "none"
    assert f"run `batch-assets dry-run {TASK_ID1}`" in meta(check)["reason"]
    assert jobs(dagster_env) == 0
    (shards,) = [
        m for m in run.get_asset_materialization_events() if m.asset_key == dg.AssetKey(["ticket_triage", "shards"])
    ]
    shown = shards.materialization.metadata
    assert shown["sample_lines"].value.count("```json") == 5  # the UI shows the same sample as the CLI
    sample_hash = shown["sample_estimate"].value["sample_hash"]

    assert main(["dry-run", TASK_ID1, "--database", str(dagster_env.database)]) == 0
    out, err = capsys.readouterr()
    assert "nothing was sent" in err and jobs(dagster_env) == 0
    (row,) = q(dagster_env, "SELECT task_name, prompt_version, task_id, n, sample_hash FROM ledger.dry_run")
    assert row == {
        "task_name": "ticket_triage",
        "prompt_version": ticket_task.spec.prompt.version,
        "task_id": TASK_ID1,
        "n": 5,
        "sample_hash": sample_hash,
    }
    again = submit(task, instance)
    assert again.success and evaluations(again)["dry_run_recorded"].passed and jobs(dagster_env) > 0
    assert "dry run of ticket_triage prompt" in meta(evaluations(again)["dry_run_recorded"])["reason"]


# --- the dry-run command ---------------------------------------------------------------------------


@pytest.fixture
def frozen_db(seeded_copy, ticket_task, monkeypatch):
    for name in ("BATCH_ASSETS_DATABASE", "BATCH_ASSETS_DATA_DIR", "BATCH_ASSETS_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    freeze_manifest(seeded_copy, ticket_task, DAY1)
    return seeded_copy


def test_dry_run_command_prints_the_lines_and_the_estimate(capsys, frozen_db, ticket_task):
    code = main(["dry-run", TASK_ID1, "-n", "2", "--database", str(frozen_db.database)])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    sample = render_sample(frozen_db, ticket_task, DAY1, n=2)
    assert lines[:2] == [r["line"] for r in sample.lines] and lines[2] == ""
    table = "\n".join(lines[3:])
    for text in ("task_id", "est. cost", "currency", TASK_ID1, "USD", " 58 "):
        assert text in table
    assert f"recorded dry run of ticket_triage prompt {ticket_task.spec.prompt.version!r} (2 lines" in err
    code = main(["dry-run", TASK_ID1, "--format", "json", "--database", str(frozen_db.database)])
    (doc,) = json.loads(capsys.readouterr().out)
    assert doc["items"] == 58 and doc["currency"] == "USD" and len(doc["lines"]) == 5 and doc["cost_estimated"] > 0
    assert q(frozen_db, "SELECT count(*) AS n FROM ledger.dry_run")[0]["n"] == 2
    assert q(frozen_db, "SELECT count(*) AS n FROM ledger.provider_job")[0]["n"] == 0


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (
            ["ticket_triage"],
            2,
            "'ticket_triage' is not a task_id: write <task>_<YYYYMMDD>, e.g. ticket_triage_20261120",
        ),
        (["ticket_triage_2026-11-20"], 2, "is not a task_id"),
        (["ticket_triage_20261131"], 2, "20261131 is not a date (YYYYMMDD)"),
        (["no_such_task_20261120"], 1, "no task 'no_such_task' in batch_assets/defs/tasks (known: "),
        (
            ["ticket_triage_20261121"],
            1,
            "ticket_triage_20261121 is not frozen: materialize ticket_triage/manifest for 2026-11-21 first",
        ),
        ([TASK_ID1, "-n", "0"], 2, "-n 0: show at least 1 line"),
    ],
)
def test_dry_run_bad_input_is_one_line_naming_the_fix(capsys, frozen_db, argv, code, expected):
    assert main(["dry-run", *argv, "--database", str(frozen_db.database)]) == code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in err, err
    assert q(frozen_db, "SELECT count(*) AS n FROM ledger.dry_run")[0]["n"] == 0


def test_dry_run_of_a_changed_prompt_is_refused(capsys, frozen_db, ticket_task, monkeypatch):
    import batch_assets.spec.resolve as resolve

    edited = dataclasses.replace(ticket_task, template=ticket_task.template + "\nAnswer in French.")
    monkeypatch.setattr(resolve, "load_tasks", lambda root=None: resolve.TaskLoad({"ticket_triage": edited}))
    assert main(["dry-run", TASK_ID1, "--database", str(frozen_db.database)]) == 1
    err = capsys.readouterr().err
    assert "not recorded: ticket_triage_20261120: prompt content changed since freezing" in err


# --- parse and apply under each item's output version recorded at freeze ---------------------------


@pytest.mark.slow
def test_answers_are_parsed_and_applied_under_the_frozen_output_version_only(
    seeded_copy, ticket_task, adapter, wait_for_jobs
):
    from batch_assets.pipeline.collect.ingest import collect_raw_results
    from batch_assets.pipeline.collect.parse import parse_results
    from batch_assets.pipeline.send.submit import submit_pending
    from batch_assets.pipeline.settle.apply import apply_results

    wh = seeded_copy
    v1 = ticket_task.spec.output.version
    v2 = with_spec(ticket_task, output=ticket_task.spec.output.model_copy(update={"version": "v2"}))
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    submit_pending(wh, ticket_task, DAY1, adapter)
    wait_for_jobs(wh, adapter)
    collect_raw_results(wh, ticket_task, DAY1, adapter)
    answers = q(wh, "SELECT count(*) AS n FROM ledger.raw_result WHERE status = 'ok'")[0]["n"]
    assert answers > 0

    refused = parse_results(wh, v2, DAY1)  # the task file now says v2: the v1 answers are not parsed as v2
    assert refused.parsed == 0 and refused.refused_version == answers
    assert q(wh, "SELECT count(*) AS n FROM ledger.parsed_result")[0]["n"] == 0

    parsed = parse_results(wh, ticket_task, DAY1)  # restored: parsed under the version each item was frozen with
    assert parsed.parsed == answers and parsed.refused_version == 0
    assert {r["v"] for r in q(wh, "SELECT DISTINCT output_schema_version AS v FROM ledger.parsed_result")} == {v1}

    not_written = apply_results(wh, v2, DAY1)  # an answer to v1 is never written as v2
    assert not_written.applied == 0 and not_written.refused_version > 0
    with wh.connect() as conn:
        assert conn.execute("SELECT count(*) FROM ledger.applied_result").fetchone()[0] == 0
        assert (
            conn.execute(f"SELECT count(*) FROM {ticket_task.spec.apply.table} WHERE output_version = 'v2'").fetchone()[
                0
            ]
            == 0
        )
    written = apply_results(wh, ticket_task, DAY1)
    assert written.applied > 0 and written.refused_version == 0
    assert {r["v"] for r in q(wh, f"SELECT DISTINCT output_version AS v FROM {ticket_task.spec.apply.table}")} == {v1}


def test_retry_command_is_held_by_the_same_gate(capsys, frozen_db, ticket_task, monkeypatch):
    import batch_assets.spec.resolve as resolve

    off_list = with_spec(ticket_task, model="gpt-4o-2099-01-01")
    monkeypatch.setattr(resolve, "load_tasks", lambda root=None: resolve.TaskLoad({"ticket_triage": off_list}))
    assert main(["retry", TASK_ID1, "--database", str(frozen_db.database)]) == 1
    err = capsys.readouterr().err
    assert f"{TASK_ID1}: model_allowed failed, nothing reopened or sent: model 'gpt-4o-2099-01-01'" in err
    assert q(frozen_db, "SELECT count(*) AS n FROM ledger.shard")[0]["n"] == 0


@pytest.mark.slow
def test_a_partition_frozen_under_two_output_versions_parses_each_item_under_its_own(
    seeded_copy, ticket_task, adapter, wait_for_jobs
):
    """Items of one partition can carry different output versions (frozen before and after a version
    change): each answer is parsed only when its own item's version is the task's now."""
    from batch_assets.pipeline.collect.ingest import collect_raw_results
    from batch_assets.pipeline.collect.parse import parse_results
    from batch_assets.pipeline.send.submit import submit_pending

    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    submit_pending(wh, ticket_task, DAY1, adapter)
    wait_for_jobs(wh, adapter)
    collect_raw_results(wh, ticket_task, DAY1, adapter)
    with wh.connect() as conn:  # a third of the answered items as if frozen under an older version
        conn.execute("""UPDATE ledger.manifest_item SET output_schema_version = 'v0' WHERE custom_id IN
                        (SELECT custom_id FROM ledger.raw_result WHERE status = 'ok' AND hash(custom_id) % 3 = 0)""")
    older = q(
        wh,
        "SELECT count(*) AS n FROM ledger.raw_result r JOIN ledger.manifest_item m USING (custom_id) "
        "WHERE r.status = 'ok' AND m.output_schema_version = 'v0'",
    )[0]["n"]
    answers = q(wh, "SELECT count(*) AS n FROM ledger.raw_result WHERE status = 'ok'")[0]["n"]
    assert 0 < older < answers

    parsed = parse_results(wh, ticket_task, DAY1)
    assert parsed.parsed == answers - older and parsed.refused_version == older
    assert (
        q(
            wh,
            "SELECT count(*) AS n FROM ledger.parsed_result p JOIN ledger.manifest_item m USING (custom_id) "
            "WHERE m.output_schema_version = 'v0'",
        )[0]["n"]
        == 0
    )
