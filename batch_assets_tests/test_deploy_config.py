"""The deploy/ folder's Dagster instance files, checked by Dagster's own config system: each is valid,
a broken copy is refused by the field's name, the local variant builds a real instance on PostgreSQL,
and the run tags and pools the files limit are the ones the project's runs carry."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml

from batch_assets.cli import main as cli_main
from batch_assets.components.asset_metadata import TAG_PROVIDER, TAG_TASK_PARTITION
from batch_assets.deployment.instance_config import DEPLOY_DIR, check_instance_file, instance_files

from .postgres_fixture import postgres_url  # noqa: F401  (fixture)

CLUSTER = DEPLOY_DIR / "dagster.yaml"
LOCAL = DEPLOY_DIR / "dagster.local.yaml"


def test_every_instance_file_in_deploy_is_valid():
    assert instance_files() == [LOCAL, CLUSTER]
    for path in instance_files():
        assert check_instance_file(path) == [], path


# (text replaced, its broken form, what the one problem must name)
BREAKAGES = [
    ("    job_image:", "    job_imag:", ["run_launcher (K8sRunLauncher)", '"job_imag"']),
    ("free_slots_after_run_end_seconds", "free_slot_after_run_end_seconds", ['"free_slot_after_run_end_seconds"']),
    ("    postgres_url:", "    postgres_uri:", ['"postgres_uri"', "root:storage:postgres"]),
    ("upload_interval: 30", "upload_intervall: 30", ["compute_logs (S3ComputeLogManager)", '"upload_intervall"']),
    ("dequeue_num_workers: 4", "dequeue_num_workers: four", ["run_coordinator (QueuedRunCoordinator)", "four"]),
    ("limit: 8", "limit: eight", ["tag_concurrency_limits[1]:limit", "eight"]),
    ("class: K8sRunLauncher", "class: K8sRunLaunch", ["cannot load dagster_k8s.K8sRunLaunch"]),
]


@pytest.mark.parametrize(("good", "bad", "named"), BREAKAGES, ids=[b[1].strip() for b in BREAKAGES])
def test_a_broken_copy_is_refused_by_field_name(tmp_path, capsys, good, bad, named):
    text = CLUSTER.read_text(encoding="utf-8")
    assert text.count(good) == 1
    broken = tmp_path / "dagster.yaml"
    broken.write_text(text.replace(good, bad), encoding="utf-8")
    [problem] = check_instance_file(broken)
    assert problem.startswith(f"{broken}: ") and all(n in problem for n in named), problem
    assert "Expected" not in problem and "\n" not in problem  # one line, not Dagster's schema dump
    assert cli_main(["check-deploy", str(broken)]) == 1
    assert capsys.readouterr().out.strip() == problem


def test_check_deploy_passes_the_deploy_folder(capsys):
    assert cli_main(["check-deploy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[0] for line in out] == [str(LOCAL), str(CLUSTER)]
    assert all(line.endswith(f"valid for Dagster {dg.__version__}") for line in out)


@pytest.mark.slow
def test_the_local_variant_builds_a_real_instance_on_postgresql(tmp_path, postgres_url, monkeypatch):  # noqa: F811
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(LOCAL, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_PG_URL", postgres_url.replace("postgresql://", "postgresql+psycopg2://", 1))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert type(instance.run_launcher).__name__ == "DefaultRunLauncher"
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        queue = instance.get_concurrency_config().run_queue_config
        assert queue.max_concurrent_runs == 4
        limits = {limit["key"]: limit["limit"] for limit in queue.tag_concurrency_limits}
        assert limits == {TAG_TASK_PARTITION: 1, TAG_PROVIDER: 2}
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] == 60


@pytest.mark.slow
def test_the_tags_and_pools_the_files_limit_are_the_ones_runs_carry():
    from batch_assets.definitions import defs as load

    for path in instance_files():
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        keys = {limit["key"] for limit in config["concurrency"]["runs"]["tag_concurrency_limits"]}
        assert keys == {TAG_TASK_PARTITION, TAG_PROVIDER}, path
    definitions = load()
    job = definitions.resolve_job_def("ticket_triage__submit")
    assert job.tags[TAG_PROVIDER] == "openai"
    submissions = definitions.resolve_assets_def(dg.AssetKey(["ticket_triage", "submissions"]))
    assert submissions.node_def.pool == "openai_create"
    schedule = definitions.resolve_schedule_def("ticket_triage__daily")
    context = dg.build_schedule_context(
        scheduled_execution_time=datetime(2026, 11, 21, 1), repository_def=definitions.get_repository_def()
    )
    [request] = schedule.evaluate_tick(context).run_requests
    assert request.tags[TAG_TASK_PARTITION] == "ticket_triage:2026-11-20"


def test_the_helm_values_name_the_instance_settings_of_the_cluster_file():
    values = yaml.safe_load((DEPLOY_DIR / "helm-values.yaml").read_text(encoding="utf-8"))
    cluster = yaml.safe_load(CLUSTER.read_text(encoding="utf-8"))
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert launcher["envSecrets"] == [{"name": n} for n in cluster["run_launcher"]["config"]["env_secrets"]]
    assert values["dagsterDaemon"]["runCoordinator"]["type"] == "QueuedRunCoordinator"
    assert Path(DEPLOY_DIR / "Dockerfile").is_file()
