"""One pipeline stage in its own process, for the kill-and-restart tests:

    python -m batch_assets_tests.stage_process STAGE DATABASE DATA_DIR TASK_YAML DAY EMULATOR_URL

STAGE is submit, download, ingest, parse or apply. With BATCH_ASSETS_FAULTPOINT set (see
batch_assets.pipeline.faultpoints) the process blocks at that point until the test SIGKILLs it.

The submit stage's point `submit.created` (the batch exists at the provider, the ledger does not
know its id yet) is placed here, not in pipeline/submit.py: the first ledger write after the
create call is wrapped to reach the point first. Where submissions are claimed with a lease, the
run's lease is KILL_TEST_CLAIM_LEASE_S seconds when set, so that a restart can take over the shard
of the killed run once that lease has run out (as it would after the default lease).
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline import faultpoints
from batch_assets.providers.contract import ClientSettings
from batch_assets.providers.registry import build_adapter, provider_definition
from batch_assets.spec.resolve import load_task_file

LEASE_ENV = "KILL_TEST_CLAIM_LEASE_S"
EMULATOR_API_KEY = "emulator-no-key"  # as batch_assets.resources (not imported: it pulls in Dagster)


def _arm_submit_point() -> None:
    import batch_assets.pipeline.send.submit as submit_mod

    # The writer that records a created batch: record_created once submissions are claimed, else record_snapshot.
    name = next(n for n in ("record_created", "record_snapshot") if hasattr(submit_mod, n))
    real = getattr(submit_mod, name)

    def record_after_point(*args, **kwargs):
        faultpoints.reached("submit.created")
        return real(*args, **kwargs)

    setattr(submit_mod, name, record_after_point)


def _arm_between_commits(stage: str) -> None:
    """`<stage>.between_commits`: the stage's first transaction that commits the file's rows stops
    before the PostgreSQL ledger's commit (`distributed` only)."""
    from batch_assets.ledger import transaction

    transaction.BETWEEN_COMMITS.append(lambda: faultpoints.reached(f"{stage}.between_commits"))


def main(argv: list[str]) -> int:
    stage, database, data_dir, task_yaml, day, emulator_url = argv
    wh = Warehouse.at(database, data_dir)
    task = load_task_file(Path(task_yaml))  # this task only: loading all would import every provider's SDK
    task_id = task.task_id(day)
    provider = task.spec.provider
    adapter = build_adapter(
        provider,
        ClientSettings(
            EMULATOR_API_KEY, emulator_url.rstrip("/") + provider_definition(provider).emulator_path, max_retries=2
        ),
    )
    _arm_between_commits(stage)
    if stage == "freeze":
        from batch_assets.pipeline.freeze.manifest import freeze_manifest

        freeze_manifest(wh, task, day)
    elif stage == "cut":
        from batch_assets.pipeline.send.shards import cut_shards

        cut_shards(wh, task, day)
    elif stage == "submit":
        from batch_assets.pipeline.send.submit import submit_pending

        _arm_submit_point()
        kwargs = {}
        lease = os.environ.get(LEASE_ENV)
        if lease and "lease_s" in inspect.signature(submit_pending).parameters:
            kwargs["lease_s"] = float(lease)  # a killed run's claim on its shard runs out this soon
        submit_pending(wh, task, day, adapter, **kwargs)
    elif stage == "download":
        from batch_assets.pipeline.collect.ingest import download_results

        download_results(wh, task_id, adapter)
    elif stage == "ingest":
        from batch_assets.pipeline.collect.ingest import ingest_files

        ingest_files(wh, task_id)
    elif stage == "parse":
        from batch_assets.pipeline.collect.parse import parse_results

        parse_results(wh, task, day)
    elif stage == "apply":
        from batch_assets.pipeline.settle.apply import apply_results

        apply_results(wh, task, day)
    else:
        raise SystemExit(f"unknown stage {stage!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
