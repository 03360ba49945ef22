"""The `BatchTask` Dagster Component: one task's defs.yaml becomes its asset group, or, when it does
not load, a definition in an error state (components/broken_task.py) so the other tasks load."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pydantic

from batch_assets.components.broken_task import build_broken_task_defs
from batch_assets.components.task_defs import build_task_defs
from batch_assets.spec.resolve import BrokenTask, ResolvedTask, TaskSpecError, load_task_folder


class TaskAttributes(pydantic.BaseModel):
    """Any `attributes:` mapping. The task spec is validated by BatchTask.load (as the CLI reads the
    file, with the same one-line error): Dagster validating it would fail the whole code location."""

    model_config = pydantic.ConfigDict(extra="allow")


class BatchTask(dg.Component):
    """A batch LLM task declared in YAML: source query, prompt, provider, output schema, apply target."""

    def __init__(self, task: ResolvedTask | BrokenTask):
        self.task = task

    @classmethod
    def get_model_cls(cls):
        return TaskAttributes

    @classmethod
    def load(cls, attributes: TaskAttributes | None, context: dg.ComponentLoadContext) -> BatchTask:
        yaml_path = Path(context.path) / "defs.yaml"
        try:
            return cls(load_task_folder(yaml_path))
        except Exception as exc:  # a bug in loading one task must not hide the others either
            message = f"{yaml_path}: cannot be loaded ({type(exc).__name__}: {exc}). Fix: see the error"
            return cls(BrokenTask.of(yaml_path, TaskSpecError(message, fix="see the error")))

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        if isinstance(self.task, BrokenTask):
            return build_broken_task_defs(self.task)
        return build_task_defs(self.task)
