"""The stack the UI test drives: `batch-assets dev` (emulator + `dg dev`) on free loopback ports over a
seeded temporary data dir, plus small clients for Dagster's GraphQL, the emulator's admin endpoint
and `batch-assets report`. Stopped as a process group, also when the test fails."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, TypeVar

HOST = "127.0.0.1"
BIN = Path(sys.executable).parent
T = TypeVar("T")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float, interval_s: float = 1.0) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` (and the last value) on timeout."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        try:
            result = probe()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:  # server still starting
            last = exc
        else:
            if result:
                return result
            last = result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")
        time.sleep(interval_s)


def _post_json(url: str, payload: dict, timeout_s: float = 30.0) -> Any:
    req = urllib.request.Request(
        url, data=json.dumps(payload).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return json.loads(resp.read().decode())


@dataclass
class Stack:
    data_dir: Path
    ui_port: int
    emulator_port: int
    proc: subprocess.Popen
    log_path: Path

    @property
    def ui_url(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    @property
    def emulator_url(self) -> str:
        return f"http://{HOST}:{self.emulator_port}"

    @property
    def database(self) -> Path:
        return self.data_dir / "warehouse.duckdb"

    # -- Dagster GraphQL ------------------------------------------------------------------------
    def graphql(self, query: str, **variables: Any) -> dict:
        out = _post_json(f"{self.ui_url}/graphql", {"query": query, "variables": variables})
        if out.get("errors"):
            raise AssertionError(f"GraphQL errors: {out['errors']}")
        return out["data"]

    def check_executions(self, asset: str, check: str, partition: str | None = None, limit: int = 50) -> list[dict]:
        data = self.graphql(
            """query($key: AssetKeyInput!, $check: String!, $partition: String, $limit: Int!) {
                 assetCheckExecutions(assetKey: $key, checkName: $check, partition: $partition, limit: $limit) {
                   runId status partition timestamp
                   evaluation { success severity description partition
                     metadataEntries { label ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue }
                                       ... on JsonMetadataEntry { jsonString } } } } }""",
            key={"path": asset.split("/")},
            check=check,
            partition=partition,
            limit=limit,
        )
        return data["assetCheckExecutions"]

    def runs(self, limit: int = 100) -> list[dict]:
        data = self.graphql(
            """query($limit: Int!) { runsOrError(limit: $limit) { ... on Runs { results {
                 runId jobName status tags { key value } } } } }""",
            limit=limit,
        )
        return data["runsOrError"]["results"]

    def sensor_log(self, sensor: str = "provider_status_sensor", limit: int = 300) -> list[str]:
        """The messages the sensor logged on its recent ticks (the UI: Automation -> sensor -> a tick's logs)."""
        data = self.graphql(
            """query($name: String!, $limit: Int!) { sensorOrError(sensorSelector: {
                 repositoryLocationName: "batch_assets",
                 repositoryName: "__repository__", sensorName: $name}) { ... on Sensor { sensorState {
                 ticks(limit: $limit) { logEvents { events { message } } } } } } }""",
            name=sensor,
            limit=limit,
        )
        ticks = data["sensorOrError"]["sensorState"]["ticks"]
        return [e["message"] for t in ticks for e in t["logEvents"]["events"]]

    def reload_location(self, timeout_s: float = 300.0) -> None:
        """ "Reload definitions" (the UI's button on the code location), then wait until it is loaded."""
        self.graphql("""mutation { reloadRepositoryLocation(repositoryLocationName: "batch_assets") { __typename } }""")
        wait_for("the reloaded code location", self.location_loaded, timeout_s, interval_s=2.0)

    def location_loaded(self) -> bool:
        """Whether every code location is loaded; one that failed to load raises with its error."""
        data = self.graphql("""{ workspaceOrError { ... on Workspace { locationEntries {
            name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }""")
        entries = data["workspaceOrError"]["locationEntries"]
        for e in entries:
            if e["locationOrLoadError"] and e["locationOrLoadError"]["__typename"] == "PythonError":
                raise AssertionError(f"code location failed to load: {e['locationOrLoadError']['message']}")
        return bool(entries) and all(e["loadStatus"] == "LOADED" and e["locationOrLoadError"] for e in entries)

    def asset_keys(self) -> set[str]:
        data = self.graphql("{ assetNodes { assetKey { path } } }")
        return {"/".join(n["assetKey"]["path"]) for n in data["assetNodes"]}

    def asset_node(self, asset: str) -> dict[str, Any]:
        """An asset's description and its definition metadata (labels to text)."""
        data = self.graphql(
            """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
                 description metadataEntries { label ... on TextMetadataEntry { text }
                                               ... on PathMetadataEntry { path } } } } }""",
            key={"path": asset.split("/")},
        )
        node = data["assetNodeOrError"]
        return {
            "description": node["description"],
            "metadata": {m["label"]: m.get("text", m.get("path")) for m in node["metadataEntries"]},
        }

    def sensor_status(self, sensor: str = "provider_status_sensor") -> str | None:
        data = self.graphql(
            """query($name: String!) { sensorOrError(sensorSelector: {repositoryLocationName: "batch_assets",
                 repositoryName: "__repository__", sensorName: $name}) {
                 __typename ... on Sensor { sensorState { status } } } }""",
            name=sensor,
        )
        found = data["sensorOrError"]
        return found["sensorState"]["status"] if found["__typename"] == "Sensor" else None

    def partition_statuses(self, asset: str) -> dict[str, str]:
        """Each day's status in the asset's partition bar (MATERIALIZED green, FAILED red, MATERIALIZING);
        a day missing here is empty."""
        data = self.graphql(
            """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
                 assetPartitionStatuses { ... on TimePartitionStatuses { ranges { status startKey endKey } } } } } }""",
            key={"path": asset.split("/")},
        )
        out: dict[str, str] = {}
        for r in data["assetNodeOrError"]["assetPartitionStatuses"]["ranges"]:
            day, end = date.fromisoformat(r["startKey"]), date.fromisoformat(r["endKey"])
            while day <= end:
                out[day.isoformat()] = r["status"]
                day += timedelta(days=1)
        return out

    def latest_observation(self, asset: str) -> dict[str, Any]:
        """The metadata of the asset's newest observation (labels to values)."""
        data = self.graphql(
            """query($key: AssetKeyInput!) { assetOrError(assetKey: $key) { ... on Asset {
                 assetObservations(limit: 1) { metadataEntries { label ... on IntMetadataEntry { intValue }
                                                                 ... on TextMetadataEntry { text } } } } } }""",
            key={"path": asset.split("/")},
        )
        events = data["assetOrError"]["assetObservations"]
        return {m["label"]: m.get("intValue", m.get("text")) for m in events[0]["metadataEntries"]} if events else {}

    # -- emulator and ledger --------------------------------------------------------------------
    def cli(self, *args: str) -> subprocess.CompletedProcess:
        """`batch-assets <args>` over the stack's warehouse, as an operator would run it."""
        return subprocess.run(
            [str(BIN / "batch-assets"), "--database", str(self.database), "--lock-timeout", "60", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )

    def emulator_settings(self, **knobs: Any) -> dict:
        return _post_json(f"{self.emulator_url}/_emulator/settings", knobs)

    def report(self, task: str) -> list[dict]:
        """`batch-assets report --format json` over the stack's warehouse (the ledger's view)."""
        out = subprocess.run(
            [
                str(BIN / "batch-assets"),
                "--database",
                str(self.database),
                "--lock-timeout",
                "60",
                "report",
                "--task",
                task,
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )
        if out.returncode != 0:
            raise AssertionError(f"batch-assets report failed ({out.returncode}): {out.stderr}")
        return json.loads(out.stdout)

    # -- lifecycle ------------------------------------------------------------------------------
    def stop(self) -> None:
        """SIGINT the stack's process group (dev stops the emulator, dg stops UI and daemon); then SIGKILL."""
        if self.proc.poll() is None:
            for sig, wait_s in ((signal.SIGINT, 30), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # dg's children share the group; make sure none outlives the test.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("BATCH_ASSETS_PROVIDER_MODE", None)  # always the local emulator
    return env


def start_stack(
    data_dir: Path, emulator_knobs: dict[str, Any], log_path: Path, ready_timeout_s: float = 300.0
) -> Stack:
    """Seed `data_dir`, start `batch-assets dev` on free ports and wait until the code location is loaded."""
    data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [str(BIN / "batch-assets"), "seed", "--database", str(data_dir / "warehouse.duckdb")],
        check=True,
        env=_env(),
        timeout=300,
    )
    (data_dir / "emulator").mkdir(exist_ok=True)
    (data_dir / "emulator" / "settings.json").write_text(json.dumps(emulator_knobs))
    log = log_path.open("w")
    ui_port, emulator_port = free_port(), free_port()
    while emulator_port == ui_port:
        emulator_port = free_port()
    proc = subprocess.Popen(
        [
            str(BIN / "batch-assets"),
            "dev",
            "--ui-port",
            str(ui_port),
            "--emulator-port",
            str(emulator_port),
            "--data-dir",
            str(data_dir),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=_env(),
        start_new_session=True,
        # SIGINT stops the stack cleanly; a shell's background job would ignore it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    stack = Stack(data_dir, ui_port, emulator_port, proc, log_path)
    try:

        def loaded():
            if proc.poll() is not None:
                raise AssertionError(f"`batch-assets dev` exited ({proc.returncode}); see {log_path}")
            return stack.location_loaded()

        wait_for("the Dagster UI and its code location", loaded, ready_timeout_s, interval_s=2.0)
    except BaseException:
        stack.stop()
        raise
    return stack
