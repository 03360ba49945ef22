"""Errors in what an operator declares: a task file, or a setting read from the environment.

Kept apart from the loaders (cheap to import): the command line names them in its one-line errors.
"""

from __future__ import annotations


class TaskSpecError(ValueError):
    """A task spec that cannot be used; the message names the file (and line or field) and the fix.

    `field` and `fix` repeat those parts on their own (None when the message has none), for the
    metadata of a broken task's definition in Dagster and the `batch-assets tasks` listing.
    """

    def __init__(self, message: str, *, field: str | None = None, fix: str | None = None):
        super().__init__(message)
        self.field, self.fix = field, fix


class SettingError(ValueError):
    """An environment setting with a value that cannot be used; the message names the variable and the
    expected format."""
