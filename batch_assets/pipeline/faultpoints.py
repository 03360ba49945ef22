"""Named crash points for the kill-and-restart tests: inert unless BATCH_ASSETS_FAULTPOINT is set.

A stage calls `reached("<stage>.<where>")` at the places where a crash matters most (a file written
but not yet recorded, a transaction open but not yet committed). Normally that is a no-op: one
environment lookup. A test that wants the process to die exactly there starts it with

    BATCH_ASSETS_FAULTPOINT=<point>=<marker file>

and the process, on reaching that point, writes its pid to the marker file and blocks; the test
waits for the marker, then SIGKILLs the process (no sleeps, no timing: the kill lands at the point,
every time). If nobody kills it, the process exits with FAULTPOINT_EXIT after BLOCK_S seconds so a
broken test never leaves it hanging. Production never sets the variable.

Points in use:
    download.file_written     ingest.download_results: result files on disk, not yet in ledger.raw_file
    ingest.before_commit      ingest.ingest_files: raw_result rows inserted, transaction not committed
    parse.before_commit       parse.parse_results: parsed_result rows inserted, transaction not committed
    apply.before_commit       apply.apply_results: business rows written, applied_result not yet, not committed
    submit.admitted           submit: a shard admitted (its quota reserved, its intent claimed), nothing created

(`submit.created`, a batch created but its id not recorded, is reached from the kill tests' stage
process, which wraps the submit stage's recording call: pipeline/submit.py carries no hook. So is
`<stage>.between_commits`: the stage's first transaction has committed the warehouse file's rows,
not yet the PostgreSQL ledger's, through ledger.transaction.BETWEEN_COMMITS.)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "BATCH_ASSETS_FAULTPOINT"
BLOCK_S = 120.0
FAULTPOINT_EXIT = 97


def armed() -> tuple[str, Path] | None:
    """(point, marker file) named by the environment, or None."""
    spec = os.environ.get(ENV)
    if not spec:
        return None
    point, sep, marker = spec.partition("=")
    if not sep or not point or not marker:
        raise ValueError(f"{ENV}={spec!r}: expected <point>=<marker file>")
    return point, Path(marker)


def reached(point: str) -> None:
    """Block here (until killed) if the environment names this point; otherwise do nothing."""
    target = armed()
    if target is None or target[0] != point:
        return
    marker = target[1]
    tmp = marker.with_name(marker.name + ".tmp")
    tmp.write_text(str(os.getpid()), encoding="utf-8")
    tmp.replace(marker)  # the marker appears whole, so its reader never sees an empty pid
    deadline = time.monotonic() + BLOCK_S
    while time.monotonic() < deadline:
        time.sleep(0.5)
    os._exit(FAULTPOINT_EXIT)
