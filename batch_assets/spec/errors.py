"""Errors in what an operator declares: a task file, or a setting read from the environment.

Kept apart from the loaders (cheap to import): the command line names them in its one-line errors.
"""

from __future__ import annotations


class TaskSpecError(ValueError):
    """A task spec that cannot be used; the message names the file (and line or field) and the fix."""


class SettingError(ValueError):
    """An environment setting with a value that cannot be used; the message names the variable and the
    expected format."""
