"""One submit run in its own process (for the tests of concurrent submit runs):

    python -m batch_assets_tests.submit_process DATABASE DATA_DIR EMULATOR_URL TASK PARTITION MAX_PER_SHARD [RUN_ID]

Prints the run's SubmitSummary as one JSON object.
"""

from __future__ import annotations

import dataclasses
import json
import sys

from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.resources import ProvidersResource
from batch_assets.spec.resolve import load_all_tasks


def main(argv: list[str]) -> int:
    database, data_dir, emulator_url, task_name, partition, max_per_shard, *rest = argv
    task = load_all_tasks()[task_name]
    task = dataclasses.replace(task, limits=dataclasses.replace(task.limits, max_requests_per_shard=int(max_per_shard)))
    adapter = ProvidersResource(emulator_url=emulator_url, max_retries=2).adapter(task.spec.provider)
    summary = submit_pending(
        Warehouse.at(database, data_dir), task, partition, adapter, run_id=rest[0] if rest else None
    )
    print(json.dumps(dataclasses.asdict(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
