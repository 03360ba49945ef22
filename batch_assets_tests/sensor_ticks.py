"""Evaluating the provider status sensor's tick in process, shared by the sensor test modules
(the `defs` and `sensor_instance` fixtures are in conftest.py)."""

from __future__ import annotations

import dataclasses

import dagster as dg

from batch_assets.resources import default_resources


def tick(defs, instance, cursor: str | None) -> dg.SensorResult:
    """One tick of `provider_status_sensor` from `cursor`, with the resources the environment names."""
    sensor = defs.resolve_sensor_def("provider_status_sensor")
    ctx = dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs, resources=default_resources())
    return sensor.evaluate_tick(ctx)


def limited(task, n: int):
    """`task` with at most `n` requests a shard (so a partition makes several jobs)."""
    return dataclasses.replace(task, limits=dataclasses.replace(task.limits, max_requests_per_shard=n))
