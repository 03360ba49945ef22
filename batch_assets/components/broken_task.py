"""A task folder that does not load, as a definition in an error state beside the tasks that do.

The asset `<task>/task_spec` sits in the task's group: its description is the one-line error, its
metadata the file, the field, the error and the fix; materializing it fails with them, and its
ERROR check `task_spec_loads` always fails with them. A broken task has no jobs, so the provider
status sensor (which targets every task's jobs) is built from the others.
"""

from __future__ import annotations

import re

import dagster as dg

from batch_assets.spec.resolve import BrokenTask, declared_attributes

SPEC_STAGE = "task_spec"
SPEC_CHECK = "task_spec_loads"
TAG_BROKEN = "batch_assets/task_spec"  # value "broken": find every broken task in the asset catalog


def group_of(broken: BrokenTask) -> str:
    """The task's group: its declared name when that is a plain name no other folder declares (a copy
    that kept its original's name must not sit in, or clash with, the original's group), else its
    folder's name as a Dagster name."""
    name = broken.name
    siblings = (p for p in broken.yaml_path.parent.parent.glob("*/defs.yaml") if p.parent.name != broken.folder)
    unique = name is not None and all(declared_attributes(p).get("name") != name for p in siblings)
    if unique and re.fullmatch(r"[a-z][a-z0-9_]*", name):
        return name
    return re.sub(r"[^A-Za-z0-9_]", "_", broken.folder) or "broken_task"


def error_metadata(broken: BrokenTask) -> dict:
    return {
        "file": dg.MetadataValue.path(str(broken.yaml_path)),
        "field": broken.field or "-",
        "error": broken.error,
        "fix": broken.fix or "see the error",
    }


def build_broken_task_defs(broken: BrokenTask) -> dg.Definitions:
    group = group_of(broken)
    key = dg.AssetKey([group, SPEC_STAGE])
    metadata = error_metadata(broken)

    @dg.asset(
        key=key,
        group_name=group,
        description=f"BROKEN task folder {broken.folder}: {broken.error}",
        metadata=metadata,
        kinds={"yaml"},
        tags={TAG_BROKEN: "broken"},
    )
    def task_spec() -> None:
        raise dg.Failure(description=broken.error, metadata=metadata, allow_retries=False)

    @dg.asset_check(
        asset=key,
        name=SPEC_CHECK,
        description="Whether the task's defs.yaml loads; fails (ERROR) with the file, the field and the fix.",
    )
    def task_spec_loads() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(
            passed=False, severity=dg.AssetCheckSeverity.ERROR, description=broken.error, metadata=metadata
        )

    return dg.Definitions(assets=[task_spec], asset_checks=[task_spec_loads])
