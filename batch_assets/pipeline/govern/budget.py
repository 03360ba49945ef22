"""Budget caps, checked before anything is submitted.

Three caps, every one optional:

* per task partition: `budget.max_cost_per_partition` in the task's defs.yaml;
* per model per day and per day (all tasks): `batch_assets/defs/budgets.yaml`
  (`per_model_per_day: {model: cap}`, `per_day: cap`, `currency:`). A day is the UTC day a job
  was created.

Figures are estimates (`manifest_item.est_cost`, see `providers.prices`, summed per shard at cut
into `shard.est_cost`): the partition's figure is every shard line cut for it (all attempts, sent or
not); "spent today" is every line of the jobs created today (abandoned ones too: the provider may
hold and bill their batch); "pending" is what this submission would add (lines of shards without a
job, or whose jobs were all abandoned: the next submit run sends those again under a new job key). A
partition is refused when spent + pending would exceed a daily cap, or its own figure exceeds its
cap. Nothing pending: nothing to refuse. A model without a price cannot be checked against a cap and
is refused while a cap applies (add it to the provider's prices.yaml).

An operator may override a refusal for one partition (run config `budget_override: <reason>` on the
shards asset): the override, with the figures, is recorded in `ledger.operator_action`
(action `budget_override`) and lets that partition's submissions through from then on.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import yaml
from pydantic import BaseModel, ConfigDict, Field

from batch_assets.ledger.control_db import as_control
from batch_assets.ledger.job_reads import shard_send_states, tasks_with_jobs_created_today
from batch_assets.ledger.retries import latest_operator_detail, record_operator_action
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.providers.prices import currency_of, model_price
from batch_assets.spec.resolve import ResolvedTask

BUDGETS_FILE = Path(__file__).resolve().parents[1] / "defs" / "budgets.yaml"
OVERRIDE_ACTION = "budget_override"


class ProjectBudgets(BaseModel):
    """`batch_assets/defs/budgets.yaml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    currency: str = "USD"
    per_day: float | None = Field(default=None, ge=0, description="All tasks and models, per UTC day.")
    per_model_per_day: dict[str, float] = Field(default_factory=dict, description="model -> cap per UTC day.")


@functools.cache
def _load(path: Path, mtime: float) -> ProjectBudgets:
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    try:
        return ProjectBudgets(**raw)
    except Exception as exc:
        raise ValueError(f"{path}: {exc}") from None


def project_budgets(path: Path | None = None) -> ProjectBudgets:
    path = path or BUDGETS_FILE
    if not path.is_file():
        return ProjectBudgets()
    return _load(path, path.stat().st_mtime)


@dataclass(frozen=True)
class BudgetVerdict:
    task_id: str
    passed: bool
    currency: str | None
    estimate: float  # the partition's estimated cost (every shard line cut for it)
    pending: float  # what submitting now would add
    spent_today: float  # estimated cost of all jobs created today (all tasks)
    spent_today_model: float  # same, this task's model only
    refusals: tuple[str, ...] = ()
    caps: dict = field(default_factory=dict)
    overridden: str | None = None  # the recorded override reason, when one lets it through

    def as_metadata(self) -> dict:
        r = lambda v: round(v, 6)  # noqa: E731
        return {
            "task_id": self.task_id,
            "currency": self.currency or "unknown",
            "estimate": r(self.estimate),
            "pending": r(self.pending),
            "spent_today": r(self.spent_today),
            "spent_today_model": r(self.spent_today_model),
            **{f"cap_{k}": v for k, v in self.caps.items()},
            "refusals": "\n".join(self.refusals) or "none",
            "override": self.overridden or "none",
        }


def _figures(conn, task_id: str, model: str) -> tuple[float, float, float, float]:
    """(estimate, pending, spent today, spent today on `model`) from the shards' recorded costs:
    this partition's and those of the partitions with a job created today, read from the control
    ledger alone (in `distributed` the other partitions' lines are in stores this run does not open)."""
    db = as_control(conn)
    with db.transaction():  # one snapshot for both reads
        tasks = {task_id} | tasks_with_jobs_created_today(db)
        shards = shard_send_states(db, sorted(tasks))
    with duckdb.connect() as scratch:
        scratch.register("_budget_shards", shards)
        return scratch.execute(
            """
            SELECT coalesce(sum(cost) FILTER (WHERE task_id = $t), 0),
                   -- Pending: no job, or only abandoned ones (the shard goes again under a new job key).
                   coalesce(sum(cost) FILTER (WHERE task_id = $t AND unsent), 0),
                   coalesce(sum(cost) FILTER (WHERE sent_today), 0),
                   coalesce(sum(cost) FILTER (WHERE sent_today AND model = $m), 0)
            FROM (SELECT task_id, model, sent_today, unsent, coalesce(est_cost, 0) AS cost FROM _budget_shards)
            """,
            {"t": task_id, "m": model},
        ).fetchall()[0]


def recorded_override(conn, task_id: str) -> str | None:
    return latest_operator_detail(conn, OVERRIDE_ACTION, task_id)


def check_budget(
    wh: Warehouse,
    task: ResolvedTask,
    partition_date: str,
    *,
    override_reason: str = "",
    budgets: ProjectBudgets | None = None,
) -> BudgetVerdict:
    """Would submitting the partition's unsent shards exceed a cap? With `override_reason`, a
    refusal is recorded as an operator override and the verdict passes."""
    spec = task.spec
    budgets = budgets or project_budgets()
    task_id = task.task_id(partition_date)
    currency = currency_of(spec.provider, spec.model)
    caps = {
        k: v
        for k, v in {
            "partition": spec.budget.max_cost_per_partition,
            "model_per_day": budgets.per_model_per_day.get(spec.model),
            "per_day": budgets.per_day,
        }.items()
        if v is not None
    }
    with wh.control() as conn:
        estimate, pending, spent, spent_model = _figures(conn, task_id, spec.model)
        refusals: list[str] = []
        if pending > 0 or (caps and model_price(spec.provider, spec.model) is None):
            if caps and model_price(spec.provider, spec.model) is None:
                refusals.append(
                    f"no price for {spec.provider} model {spec.model!r}: cannot check the budget caps "
                    f"{sorted(caps)}; add it to providers/{spec.provider}/prices.yaml"
                )
            elif caps and currency != budgets.currency and ("model_per_day" in caps or "per_day" in caps):
                refusals.append(f"prices of {spec.model} are in {currency}, budgets.yaml in {budgets.currency}")
            else:

                def fmt(v: float) -> str:
                    return f"{v:.4f} {currency}"

                if "partition" in caps and estimate > caps["partition"]:
                    refusals.append(
                        f"partition estimate {fmt(estimate)} > budget.max_cost_per_partition {fmt(caps['partition'])}"
                    )
                if "model_per_day" in caps and spent_model + pending > caps["model_per_day"]:
                    refusals.append(
                        f"{spec.model} today: spent {fmt(spent_model)} + this submission {fmt(pending)} "
                        f"> per_model_per_day cap {fmt(caps['model_per_day'])}"
                    )
                if "per_day" in caps and spent + pending > caps["per_day"]:
                    refusals.append(
                        f"all models today: spent {fmt(spent)} + this submission {fmt(pending)} "
                        f"> per_day cap {fmt(caps['per_day'])}"
                    )
        overridden = None
        if refusals:
            if override_reason.strip():
                overridden = override_reason.strip()
                record_operator_action(
                    conn, OVERRIDE_ACTION, task_id=task_id, detail=f"{overridden} | overrode: {'; '.join(refusals)}"
                )
            else:
                overridden = recorded_override(conn, task_id)
    return BudgetVerdict(
        task_id=task_id,
        passed=not refusals or overridden is not None,
        currency=currency,
        estimate=estimate,
        pending=pending,
        spent_today=spent,
        spent_today_model=spent_model,
        refusals=tuple(refusals),
        caps=caps,
        overridden=overridden,
    )
