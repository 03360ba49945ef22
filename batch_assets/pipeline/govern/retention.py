"""Retention: provider-side files deleted once a job's results are downloaded, local files purged
after a retention window.

Provider side: after a collect run has downloaded and ingested a job's results, its input, output
and error files are deleted through the provider's SDK (`delete_remote_files`; Anthropic keeps no
user files: recorded as `nothing_to_delete`). Every deletion lands in `ledger.remote_file_deletion`;
a failure is recorded there too and the job stays pending (`provider_job.remote_deleted_at` NULL):
the next collect run of its partition, the provider status sensor's next tick and the `retention`
job try again. Never fatal.

Local side: shard files and raw result files of partitions that are final (`batch_task.final_status`)
and finished longer ago than the window are purged. The ledger rows and their sha256 stay. The
ledger keeps each result line parsed (`raw_result.body`), not verbatim, so a raw file is the only
verbatim copy of the provider's answer: it is gzip-compressed next to itself, never deleted. With
object storage the same holds for the objects (a compressed raw file is a new object, its original
deleted once the ledger names the copy), and objects no ledger row names are collected after a
grace period. Running the purge again changes nothing; `dry_run` only lists.
"""

from __future__ import annotations

import datetime as dt
import gzip
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from batch_assets.formatting import parse_duration
from batch_assets.ledger.control_db import registered
from batch_assets.ledger.job_reads import jobs_with_remote_files
from batch_assets.ledger.retention import (
    mark_raw_file_purged,
    mark_shard_purged,
    record_remote_deletion,
    record_remote_deletion_failure,
    recorded_control_files,
    recorded_item_files,
)
from batch_assets.ledger.run_requests import forget_old_run_requests
from batch_assets.ledger.shards import unpurged_shards
from batch_assets.ledger.store_versions import collect_garbage
from batch_assets.ledger.tasks import final_task_ids_before
from batch_assets.ledger.warehouse import Warehouse, fetch_dicts
from batch_assets.providers.contract import BatchProvider, JobRef
from batch_assets.storage.run_files import ORPHAN_GRACE, RunFiles, is_object

log = logging.getLogger(__name__)


def parse_age(text: str) -> dt.timedelta:
    """`30d` or `12h` as a timedelta; anything else raises ValueError saying what to write."""
    try:
        return dt.timedelta(seconds=parse_duration(text, units="dh", bare_seconds=False, whole=True))
    except ValueError:
        raise ValueError(f"age {text!r} is not a number of days or hours; write e.g. 30d or 12h") from None


# Of the jobs with provider files left (ledger.job_reads), those whose every downloaded file is ingested.
_PENDING_SQL = """
    SELECT j.* FROM _remote_jobs j
    WHERE NOT EXISTS (SELECT 1 FROM ledger.raw_file f WHERE f.job_key = j.job_key AND f.ingested_at IS NULL)
    ORDER BY j.job_key
    LIMIT $limit
"""


def pending_remote_deletions(
    wh: Warehouse,
    task_id: str | None = None,
    task_names: list[str] | None = None,
    *,
    retry_only: bool = False,
    limit: int | None = None,
) -> list[dict]:
    """Jobs (of one partition, of some tasks, or all) whose provider-side files still wait to be
    deleted; with `retry_only`, only those whose deletion was tried and failed."""
    with wh.connect() as conn:
        jobs = jobs_with_remote_files(conn, task_id, task_names, retry_only=retry_only)
        with registered(conn, "_remote_jobs", jobs):
            return fetch_dicts(conn, _PENDING_SQL, {"limit": limit})


@dataclass
class RemoteDeletionSummary:
    jobs_done: int = 0
    files_deleted: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # job_key -> error (pending, tried again later)


def delete_remote_files(
    wh: Warehouse,
    adapter_for: Callable[[str], BatchProvider],
    task_id: str | None = None,
    task_names: list[str] | None = None,
    *,
    retry_only: bool = False,
    limit: int | None = None,
) -> RemoteDeletionSummary:
    """Delete the provider-side files of the pending jobs (see `pending_remote_deletions`); each
    outcome recorded. A failure is logged and recorded, never raised."""
    summary = RemoteDeletionSummary()
    for job in pending_remote_deletions(wh, task_id, task_names, retry_only=retry_only, limit=limit):
        ref = JobRef(
            job["provider_batch_id"],
            output_file_id=job["output_file_id"],
            error_file_id=job["error_file_id"],
            input_file_id=job["input_file_id"],
        )
        keys = {"job_key": job["job_key"], "task_id": job["task_id"], "provider": job["provider"]}
        try:
            deleted = adapter_for(job["provider"]).delete_remote_files(ref)
        except Exception as exc:  # noqa: BLE001 - any provider error leaves the job pending
            error = f"{type(exc).__name__}: {exc}"
            log.warning(
                "%s: deleting provider files failed (try %d), tried again later: %s",
                job["job_key"],
                job["attempts"] + 1,
                error,
            )
            with wh.control() as conn:
                record_remote_deletion_failure(conn, error=error, **keys)
            summary.failed[job["job_key"]] = error
            continue
        with wh.control() as conn:
            record_remote_deletion(conn, deleted=deleted, **keys)
        summary.jobs_done += 1
        summary.files_deleted += len(deleted)
    return summary


@dataclass
class PurgeSummary:
    dry_run: bool
    # Locations as acted on: absolute paths (a ledger older than absolute paths may hold relative
    # ones), or s3:// URLs of objects.
    shards: list[str] = field(default_factory=list)  # shard files deleted (or that would be)
    raw_files: list[str] = field(default_factory=list)  # raw files compressed (or that would be)
    archives: dict[str, str] = field(default_factory=dict)  # raw file -> its compressed copy (when made)
    bytes_freed: int = 0

    def describe(self) -> str:
        verb = "would purge" if self.dry_run else "purged"
        return (
            f"{verb} {len(self.shards)} shard file(s) and compressed {len(self.raw_files)} raw file(s)"
            f" ({self.bytes_freed:,} bytes {'to free' if self.dry_run else 'freed'})"
        )


def _located(location: str) -> str:
    return location if is_object(location) else str(Path(location).absolute())


def purge_local(
    wh: Warehouse, older_than: dt.timedelta, *, dry_run: bool = False, task_name: str | None = None
) -> PurgeSummary:
    """Purge the shard files and compress the raw files of final partitions finished more than
    `older_than` ago (of one task, or all), on disk or in object storage. Ledger rows and hashes
    stay; safe to run again."""
    summary = PurgeSummary(dry_run)
    files = wh.files
    with wh.connect() as conn:
        cutoff = conn.execute("SELECT now()::TIMESTAMP").fetchone()[0] - older_than
        old = final_task_ids_before(conn, cutoff, task_name)
        shards = unpurged_shards(conn, old)
        raws = fetch_dicts(
            conn,
            """SELECT file_key, task_id, path, byte_count FROM ledger.raw_file
            WHERE purged_at IS NULL AND ingested_at IS NOT NULL AND task_id = ANY($old) ORDER BY file_key""",
            {"old": old},
        )
    for s in shards:
        location = _located(s["path"])
        summary.shards.append(location)
        if files.exists(location):
            summary.bytes_freed += s["byte_count"] if is_object(location) else Path(location).stat().st_size
        if dry_run:
            continue
        files.remove(location)
        with wh.control() as conn:
            mark_shard_purged(conn, s["shard_id"])
    for f in raws:
        location = _located(f["path"])
        summary.raw_files.append(location)
        present = files.exists(location)
        if present:
            summary.bytes_freed += f["byte_count"] if is_object(location) else Path(location).stat().st_size
        if dry_run:
            continue
        archived = _compress(files, f["task_id"], location) if present else None
        if archived is None and not is_object(location) and Path(f"{location}.gz").is_file():
            archived = f"{location}.gz"  # compressed by a purge cut off before its ledger write
        if archived is not None:
            summary.archives[location] = archived
            if present:
                summary.bytes_freed -= files.local(archived).stat().st_size
        with wh.of(f["task_id"]).connect() as conn:  # a per-item row: in its partition's store
            mark_raw_file_purged(conn, f["file_key"], archived)
        if is_object(location) and present:
            files.remove(location)  # after the ledger names the copy: a crash before leaves an orphan
    return summary


def _compress(files: RunFiles, task_id: str, location: str) -> str:
    """The raw file at `location` gzip-compressed: next to itself on disk (the original deleted),
    or as a new object (its original is deleted once the ledger names the copy). Its location."""
    source = files.local(location)
    if not is_object(location):
        archived = Path(f"{source}.gz")
        _gzip(source, archived)
        source.unlink()
        return str(archived)
    compressed = files.new_path("raw", task_id, f"{source.name}.gz")
    _gzip(source, compressed)
    return files.keep(compressed, "raw", task_id)


def _gzip(path: Path, dest: Path) -> None:
    """Compress `path` to `dest` (written under a temporary name, then renamed: never half a file)."""
    tmp = dest.with_name(dest.name + ".tmp")
    with open(path, "rb") as src, gzip.open(tmp, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    with open(tmp, "rb") as written:
        os.fsync(written.fileno())
    tmp.replace(dest)


@dataclass
class RetentionRun:
    """What one run of the `retention` job did, per task."""

    remote: RemoteDeletionSummary
    purged: dict[str, PurgeSummary]  # task name -> its purge
    pending_remote: int  # jobs still waiting for their provider files to be deleted
    store_objects_deleted: int = 0  # partition store versions no pointer names (object storage)
    file_objects_deleted: int = 0  # manifest, shard and raw file objects no ledger row names
    run_requests_forgotten: int = 0  # status sensors' run-key claims older than a week

    def metadata(self) -> dict[str, int]:
        return {
            "remote_jobs_done": self.remote.jobs_done,
            "remote_files_deleted": self.remote.files_deleted,
            "remote_deletions_failed": len(self.remote.failed),
            "remote_deletions_pending": self.pending_remote,
            "shards_purged": sum(len(p.shards) for p in self.purged.values()),
            "raw_files_compressed": sum(len(p.raw_files) for p in self.purged.values()),
            "bytes_freed": sum(p.bytes_freed for p in self.purged.values()),
            "store_objects_deleted": self.store_objects_deleted,
            "file_objects_deleted": self.file_objects_deleted,
            "run_requests_forgotten": self.run_requests_forgotten,
        }


def run_retention(wh: Warehouse, tasks: dict, adapter_for: Callable[[str], BatchProvider]) -> RetentionRun:
    """Each task's retention settings applied: provider-side deletions still pending tried again
    (tasks with `retention.delete_remote_files`), then local files older than `retention.local_days` purged."""
    deleting = sorted(name for name, t in tasks.items() if t.spec.retention.delete_remote_files)
    remote = delete_remote_files(wh, adapter_for, task_names=deleting) if deleting else RemoteDeletionSummary()
    purged = {
        name: purge_local(wh, dt.timedelta(days=t.spec.retention.local_days), task_name=name)
        for name, t in sorted(tasks.items())
    }
    pending = len(pending_remote_deletions(wh, task_names=deleting)) if deleting else 0
    with wh.control() as conn:
        forgotten = forget_old_run_requests(conn)
    return RetentionRun(
        remote, purged, pending, len(collect_store_garbage(wh)), len(collect_file_garbage(wh)), forgotten
    )


def collect_file_garbage(wh: Warehouse, *, grace: dt.timedelta = ORPHAN_GRACE, dry_run: bool = False) -> list[str]:
    """With object storage: the manifest, shard and raw file objects no ledger row names (uploads
    whose commit never came, purged originals, superseded manifests) deleted once older than the
    grace period (`dry_run`: only listed). Their keys."""
    if wh.storage is None:
        return []
    with wh.control() as db:
        kept = recorded_control_files(db)
    with wh.across() as conn:
        kept += recorded_item_files(conn)
    return wh.files.collect_garbage(kept, grace=grace, dry_run=dry_run)


def collect_store_garbage(wh: Warehouse) -> list[str]:
    """With partition stores in object storage: the versions no partition's pointer names (superseded,
    or uploaded by a run whose commit never came) deleted once older than the grace period."""
    if wh.storage is None or not wh.partition_stores:
        return []
    with wh.control() as db:
        return collect_garbage(wh.storage, db)
