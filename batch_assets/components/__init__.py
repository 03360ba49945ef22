"""Dagster wiring: the BatchTask component, shared partitions and per-task asset factory."""

from batch_assets.components.batch_task import BatchTask

__all__ = ["BatchTask"]
