"""Errors a stage raises for bad task input (the CLI and the assets turn them into one line)."""

from __future__ import annotations


class SourceQueryError(ValueError):
    """The task's source query failed or lacks a column the task needs."""
