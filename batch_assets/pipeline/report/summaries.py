"""A partition's report figures — reconciliation, sensitive-data and cost figures, times, re-parse
figures — computed from its store, or read back from ledger.partition_summary (ledger/summaries.py).

With object storage, a report across partitions would otherwise download and attach every
partition's store: a final partition's figures are recorded once it is settled, and read back as
long as its final status and its store's version are the ones they were computed with. The rest
(partitions still at work, or changed since) are computed from their stores.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from batch_assets.ledger.summaries import current_summaries, record_summaries, store_shas
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.reparse import reparse_figures
from batch_assets.pipeline.govern.cost import PartitionGate, partition_gates
from batch_assets.pipeline.report.partition_report import Durations, partition_durations
from batch_assets.pipeline.settle.reconcile import Reconciliation, reconcile_conn

Tolerance = Callable[[str], tuple]  # task_id -> (max_failed_fraction, empty_source), or () for defaults


@dataclass
class PartitionFigures:
    rec: Reconciliation
    gate: PartitionGate | None
    times: Durations
    reparse: dict | None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PartitionFigures:
        d = json.loads(text)
        return cls(
            rec=Reconciliation(**d["rec"]),
            gate=PartitionGate(**d["gate"]) if d["gate"] is not None else None,
            times=Durations(**d["times"]),
            reparse=d["reparse"],
        )


def computed_figures(conn, task_ids: Sequence[str], tolerance: Tolerance, now: dt.datetime) -> dict:
    """task_id -> PartitionFigures, each read from the partitions' rows on `conn`, at `now`."""
    ids = list(task_ids)
    gates, reparsed = partition_gates(conn, ids), reparse_figures(conn, ids)
    out = {}
    for task_id in ids:
        rec = reconcile_conn(conn, task_id, *tolerance(task_id))
        times = partition_durations(conn, task_id, rec.verdict().final_status is not None, now)
        out[task_id] = PartitionFigures(rec, gates.get(task_id), times, reparsed.get(task_id))
    return out


def partition_figures(wh: Warehouse, task_ids: Sequence[str], tolerance: Tolerance, now: dt.datetime) -> dict:
    """task_id -> PartitionFigures of every partition of `task_ids`: with object storage, each final
    partition's recorded summary while it still holds, the others computed from their stores only
    (and none opened when every summary holds); elsewhere all computed from the warehouse."""
    ids = list(task_ids)
    if wh.storage is None:
        with wh.across(ids) as conn:
            return computed_figures(conn, ids, tolerance, now)
    with wh.control() as db:
        recorded = {t: PartitionFigures.from_json(s) for t, s in current_summaries(db, ids).items()}
    rest = [t for t in ids if t not in recorded]
    computed = {}
    if rest:
        with wh.across(rest) as conn:
            computed = computed_figures(conn, rest, tolerance, now)
    return {t: recorded.get(t) or computed[t] for t in ids}


def record_final_figures(wh: Warehouse, task_ids: Sequence[str], tolerance: Tolerance) -> int:
    """Record the figures of those of `task_ids` that are final — callers pass the partitions they
    just settled final; one that is not is skipped — with object storage (elsewhere a report reads
    one file or local stores, and nothing is recorded). Returns how many."""
    if wh.storage is None or not task_ids:
        return 0
    with wh.control() as db:
        shas = store_shas(db, task_ids)  # read first: a write after it only makes the summary stale
        now = db.execute("SELECT now()::TIMESTAMP").scalar()
    final = [t for t in task_ids if t in shas]
    if not final:
        return 0
    with wh.across(final) as conn:
        figures = computed_figures(conn, final, tolerance, now)
    rows = [(t, shas[t], f.rec.final_status, f.to_json()) for t, f in figures.items() if f.rec.final_status is not None]
    with wh.control() as db:
        record_summaries(db, rows)
    return len(rows)
