"""The pieces of `batch-assets dev --distributed` (`make dev-distributed`), also used by its test: the
deploy/ settings that apply without a cluster, the servers' environment, runs submitted to the
Dagster run queue as the UI submits them, and the ledger's view of how far the partitions are.

Runs go through the webserver's GraphQL API (`launchRun`, as the UI's launchpad): the webserver hands them to
the QueuedRunCoordinator, and the daemon launches them within deploy/dagster.local.yaml's limits —
the same path a click in the UI takes, not an in-process execution.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from batch_assets.components.asset_metadata import TAG_PARTITION, TAG_TASK, task_partition_tag
from batch_assets.deployment.instance_config import DEPLOY_DIR

LOCAL_INSTANCE = DEPLOY_DIR / "dagster.local.yaml"
INSTANCE_PG_VARIABLE = "DAGSTER_PG_URL"  # what deploy/dagster*.yaml read their storage URL from
LOCATION = "batch_assets"


def exported(lines: Iterable[str]) -> dict[str, str]:
    """`export NAME=value` lines (as `make services` prints them) as a mapping."""
    env = {}
    for line in lines:
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = value
    return env


def prepare_instance(home: Path) -> Path:
    """DAGSTER_HOME with deploy/dagster.local.yaml as its dagster.yaml."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(LOCAL_INSTANCE, home / "dagster.yaml")
    return home


@dataclass(frozen=True)
class Launch:
    job_name: str
    task_name: str
    day: str


_LAUNCH_MUTATION = """
mutation Launch($executionParams: ExecutionParams!) {
  launchRun(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on Error { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""


def _graphql(ui_port: int, host: str, query: str, variables: dict | None = None) -> dict:
    """One request to the webserver's GraphQL endpoint; its `data`."""
    request = urllib.request.Request(
        f"http://{host}:{ui_port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.load(response)
    if answer.get("errors"):
        raise RuntimeError(f"the Dagster webserver refused the request: {answer['errors'][0].get('message')}")
    return answer["data"]


def submit_runs(ui_port: int, launches: Iterable[Launch], host: str = "127.0.0.1") -> list[str]:
    """Submit each run to the webserver at `host:ui_port` (queued, then launched by the daemon),
    with the tags a status sensor gives its runs; returns the run ids."""
    run_ids = []
    for launch in launches:
        tags = {
            "dagster/partition": launch.day,
            TAG_TASK: launch.task_name,
            TAG_PARTITION: launch.day,
            **task_partition_tag(launch.task_name, launch.day),
        }
        params = {
            "selector": {
                "repositoryLocationName": LOCATION,
                "repositoryName": "__repository__",
                "jobName": launch.job_name,
            },
            "runConfigData": {},
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
        }
        result = _graphql(ui_port, host, _LAUNCH_MUTATION, {"executionParams": params})["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            detail = result.get("message") or "; ".join(e["message"] for e in result.get("errors", []))
            raise RuntimeError(f"{launch.job_name} {launch.day} was not launched: {result['__typename']}: {detail}")
        run_ids.append(result["run"]["runId"])
    return run_ids


_LOCATIONS_QUERY = (
    "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
    "locationOrLoadError { __typename } } } } }"
)


def _location_loaded(ui_port: int, host: str) -> bool:
    entries = _graphql(ui_port, host, _LOCATIONS_QUERY)["workspaceOrError"]["locationEntries"]
    return any(
        e["name"] == LOCATION
        and e["loadStatus"] == "LOADED"
        and e["locationOrLoadError"]["__typename"] == "RepositoryLocation"
        for e in entries
    )


def wait_for_location(ui_port: int, timeout_s: float, alive=lambda: True, host: str = "127.0.0.1") -> None:
    """Wait until the webserver answers and has loaded the code location (its jobs can be launched)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the Dagster webserver stopped before it answered on port {ui_port}")
        try:
            if _location_loaded(ui_port, host):
                return
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):  # not listening yet, or still loading
            pass
        time.sleep(1.0)
    raise RuntimeError(f"the Dagster webserver on port {ui_port} did not load {LOCATION} within {timeout_s:.0f} s")


def final_partitions(wh, task_ids: list[str]) -> dict[str, str]:
    """task_id -> final status, for the partitions of `task_ids` the ledger records as final."""
    from batch_assets.ledger.tasks import final_statuses

    with wh.control(read_only=True) as db:
        return {task_id: status for task_id, status in final_statuses(db, task_ids).items() if status is not None}
