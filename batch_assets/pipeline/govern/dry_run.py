"""Dry run: N request lines of a frozen partition rendered exactly as the shards would send them
(the same SQL, `pipeline.send.shards.rendered_lines_sql`, over the redacted prompt text of the manifest),
with the partition's estimate. Nothing is written to a shard and no provider is called; `record`
keeps the dry run in `ledger.dry_run`, which lets partitions above `gate.dry_run_threshold` through.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from batch_assets.ledger.dry_runs import record_dry_run
from batch_assets.ledger.tasks import task_row
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.govern.cost import expected_output_tokens, partition_gates
from batch_assets.pipeline.send.shards import FIRST_ATTEMPT, rendered_lines_sql
from batch_assets.spec.resolve import ResolvedTask
from batch_assets.sqltext import sql_literal

DEFAULT_LINES = 5
SCAN_WINDOW = 1000  # items rendered beyond N, so N sendable lines are found past held-back ones


class NotFrozenError(ValueError):
    """The partition has no frozen manifest: nothing to render."""


@dataclass(frozen=True)
class DrySample:
    task_id: str
    prompt_version: str
    lines: tuple[dict, ...]  # {custom_id, request_id, line}: the first sendable items by custom_id
    items: int  # live items of the partition
    est_input_tokens: int
    est_output_tokens: int
    cost_estimated: float | None
    currency: str | None

    @property
    def sample_hash(self) -> str:
        """sha256 of the sample's lines, newline-joined as in a shard file."""
        return hashlib.sha256("".join(r["line"] + "\n" for r in self.lines).encode("utf-8")).hexdigest()

    def estimate(self) -> dict:
        return {
            "task_id": self.task_id,
            "prompt_version": self.prompt_version,
            "items": self.items,
            "est_input_tokens": self.est_input_tokens,
            "est_output_tokens": self.est_output_tokens,
            "cost_estimated": None if self.cost_estimated is None else round(self.cost_estimated, 6),
            "currency": self.currency or "unknown",
            "lines_shown": len(self.lines),
            "sample_hash": self.sample_hash,
        }

    def markdown(self) -> str:
        """The sample as the asset metadata shows it: one JSON request line per block."""
        blocks = [f"**{r['custom_id']}**\n\n```json\n{_pretty(r['line'])}\n```" for r in self.lines]
        return "\n\n".join(blocks) or "_no sendable line_"


def _pretty(line: str) -> str:
    return json.dumps(json.loads(line), ensure_ascii=False, indent=2)


def render_sample(wh: Warehouse, task: ResolvedTask, partition_date: str, n: int = DEFAULT_LINES) -> DrySample:
    """The first `n` sendable lines (by custom_id) of the partition's live items, and its estimate."""
    task_id = task.task_id(partition_date)
    wh = wh.of(task_id)  # its partition's store
    tid = sql_literal(task_id)
    with wh.connect() as conn:
        row = task_row(conn, task_id, frozen=True)
        if row is None:
            raise NotFrozenError(
                f"{task_id} is not frozen: materialize {task.name}/manifest for {partition_date} "
                "first (e.g. in `batch-assets dev`)"
            )
        uri, prompt_version = str(wh.files.local(row["manifest_uri"])), row["prompt_version"]
        conn.execute(f"""
            CREATE OR REPLACE TEMP TABLE _dry_todo AS
            SELECT custom_id, {FIRST_ATTEMPT} AS attempt FROM ledger.manifest_item
            WHERE task_id = {tid} AND superseded_at IS NULL
              AND custom_id NOT IN (SELECT custom_id FROM ledger.quarantine WHERE task_id = {tid})
            -- a window, not the partition: a million-item partition renders a few lines, not all
            ORDER BY custom_id LIMIT {int(n) + SCAN_WINDOW}
        """)
        conn.execute(f"CREATE OR REPLACE TEMP TABLE _dry AS {rendered_lines_sql(conn, task, uri, '_dry_todo')}")
        lines = conn.execute(
            "SELECT custom_id, request_id, line FROM _dry WHERE reason_code IS NULL ORDER BY custom_id LIMIT ?",
            [int(n)],
        ).fetchall()
        items, tokens_in = conn.execute(
            "SELECT count(*), coalesce(sum(est_input_tokens), 0) FROM ledger.manifest_item "
            "WHERE task_id = ? AND superseded_at IS NULL",
            [task_id],
        ).fetchone()
        conn.execute("DROP TABLE _dry; DROP TABLE _dry_todo;")
        gate = partition_gates(conn, [task_id])[task_id]
    return DrySample(
        task_id=task_id,
        prompt_version=prompt_version,
        lines=tuple({"custom_id": c, "request_id": r, "line": line} for c, r, line in lines),
        items=items,
        est_input_tokens=int(tokens_in),
        est_output_tokens=items * expected_output_tokens(task),
        cost_estimated=gate.cost_estimated,
        currency=gate.currency,
    )


def record(wh: Warehouse, task: ResolvedTask, sample: DrySample) -> None:
    with wh.control() as conn:  # a control row
        record_dry_run(
            conn,
            task_name=task.name,
            prompt_version=sample.prompt_version,
            prompt_hash=task.prompt_hash,
            task_id=sample.task_id,
            n=len(sample.lines),
            sample_hash=sample.sample_hash,
            items=sample.items,
            cost_estimated=sample.cost_estimated,
            currency=sample.currency,
        )
