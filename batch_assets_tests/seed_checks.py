"""Assertion helpers shared by the demo-seed tests (``test_demo_seed.py``, ``test_demo_seed_more.py``)."""

from __future__ import annotations

import os
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def rows_in_one_only(conn, table: str, other: str = "first") -> int:
    """How many rows ``main.<table>`` and ``<other>.<table>`` do not share (counting duplicates)."""
    return conn.execute(
        f"""SELECT count(*) FROM (
              (SELECT * FROM {other}.{table} EXCEPT ALL SELECT * FROM main.{table})
              UNION ALL
              (SELECT * FROM main.{table} EXCEPT ALL SELECT * FROM {other}.{table}))"""
    ).fetchone()[0]


def outputs_under_hash_seeds(script: str, *args: str, hash_seeds: tuple[str, ...] = ("0", "4242")) -> set[str]:
    """The distinct stdouts of ``python -c script *args`` run once per PYTHONHASHSEED value."""
    env_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    outputs = set()
    for hash_seed in hash_seeds:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": env_path}
        result = subprocess.run(
            [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(result.stdout.strip())
    return outputs


def templates(value) -> Iterator[str]:
    """Every string in a phrase-bank value: a string, or dicts and tuples of them, nested."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from templates(item)
    elif isinstance(value, tuple):
        for item in value:
            yield from templates(item)


def template_fields(template: str) -> set[str]:
    """The ``{slot}`` names a ``str.format_map`` template uses."""
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}
