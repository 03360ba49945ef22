"""The `BatchTask` Dagster Component: one task's defs.yaml becomes its asset group."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from batch_assets.components.task_defs import build_task_defs
from batch_assets.spec.model import TaskSpec
from batch_assets.spec.resolve import ResolvedTask, resolve_task


class BatchTask(dg.Component):
    """A batch LLM task declared in YAML: source query, prompt, provider, output schema, apply target."""

    def __init__(self, task: ResolvedTask):
        self.task = task

    @classmethod
    def get_model_cls(cls):
        # Dagster validates `attributes:` against the plain (Dagster-free) TaskSpec model and
        # reports errors with the YAML file and line.
        return TaskSpec

    @classmethod
    def load(cls, attributes: TaskSpec | None, context: dg.ComponentLoadContext) -> BatchTask:
        if attributes is None:
            raise ValueError(f"{context.path}: a BatchTask needs `attributes:` (the task spec)")
        return cls(resolve_task(attributes, Path(context.path) / "defs.yaml"))

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return build_task_defs(self.task)
