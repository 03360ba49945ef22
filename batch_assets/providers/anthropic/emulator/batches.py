"""Anthropic Message Batches: create, retrieve, list, cancel, delete, and results written in the background.

Built on the shared simulated clock (`clock.Timeline`): its queued, running and finalizing phases
all read `in_progress` here (processing starts on create, as on the real API), a cancel reads
`canceling`, and every terminal phase reads `ended`. As on the real API, only `processing` moves
in `request_counts` until the batch ends. Anthropic has no batch-level failure (a batch always
ends; its requests succeed or fail one by one), so there is no `failed` state; see `_outcomes`
for what `force_batch_status: failed` does instead.

A create call keeps the body as sent and checks it in one streaming pass, a request at a time,
for what the real API refuses there with a 400 (malformed JSON, the request count, each
custom_id, the params' basic shape; see `requests`), and answers. The app's `Worker` then reads
the body again (`_prepare`): it stores the requests one per line in canonical form, finds the
requests the Messages API itself would refuse (they end `errored`, as on the real API) and draws
each request's outcome; then it writes the results of the batch's expected ending to a staged
file, a line at a time (`_generate`), and the first read after the batch ends publishes it (a
rename). Until the worker is done the batch shows as still processing, so nothing reports
`ended` without its results. (A small body is worked on within the create call.)
"""

from __future__ import annotations

import array
import hashlib
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, BinaryIO

from batch_assets.emulator import clock, faults, ids
from batch_assets.emulator.clock import Phase, Timeline
from batch_assets.emulator.errors import ApiError
from batch_assets.emulator.settings import EmulatorSettings, RuntimeSettings
from batch_assets.emulator.store import Record, Store
from batch_assets.emulator.worker import Worker, results_target, staged_for, write_lines
from batch_assets.providers.anthropic.emulator.messages import (
    CONTEXT_WINDOW_EXCEEDED,
    PAUSE_TURN,
    REFUSAL,
    result_for,
)
from batch_assets.providers.anthropic.emulator.requests import (
    MAX_REQUESTS,
    checked_requests,
    invalid,
    read_create,
    request_error,
)

KIND = "anthropic_batches"
WINDOW_S = 24 * 3600  # processing expires 24 h after creation
RESULTS_PATH = "/v1/messages/batches/{batch_id}/results"
_DEFAULT_MAX_REQUESTS = EmulatorSettings().max_requests_per_batch
_UNFINISHED = {clock.CANCELLED: "canceled", clock.EXPIRED: "expired"}
_HOLD_S = 1e-6  # how far before it ended a batch waiting on the worker is shown


def not_found(what: str) -> ApiError:
    return ApiError(404, what, kind="not_found_error")


def rfc3339(instant: float) -> str:
    """`2024-08-20T18:37:24.100435Z`, as recorded MessageBatch timestamps."""
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def max_requests(settings: EmulatorSettings) -> int:
    """Anthropic's 100,000, or fewer when `max_requests_per_batch` was changed from its default."""
    if settings.max_requests_per_batch == _DEFAULT_MAX_REQUESTS:
        return MAX_REQUESTS
    return min(MAX_REQUESTS, settings.max_requests_per_batch)


class MessageBatchService:
    def __init__(self, store: Store, runtime: RuntimeSettings, worker: Worker) -> None:
        self.store = store
        self.runtime = runtime
        self.worker = worker

    # --- create -------------------------------------------------------------------------------

    @contextmanager
    def receiving(self) -> Iterator[tuple[str, BinaryIO]]:
        """A new batch id and where to write its create body as it arrives (`create(batch_id)`
        then checks it); a body cut short leaves nothing behind."""
        batch_id = f"msgbatch_01{ids.random_base62(22)}"
        with self.store.blob_writer(_body_blob(batch_id)) as sink:
            yield batch_id, sink

    def create(self, batch_id: str, origin: str) -> dict[str, Any]:
        """Check the body `receiving` wrote in one pass, a request at a time (what the real API
        refuses at create is a 400 now, and leaves nothing behind); the rest is done later, by the
        worker (or here, for a small body)."""
        try:
            with self.store.open_blob(_body_blob(batch_id)) as source:
                size = source.seek(0, io.SEEK_END)
                source.seek(0)
                count = read_create(source, _ignore, max_requests(self.runtime.current))
        except Exception:
            self.store.drop_blob(_body_blob(batch_id))  # refused: no batch, nothing kept
            raise
        with self.store.locked():
            settings = self.runtime.take_batch_settings()
            created = clock.now()
            timeline = Timeline.plan(created, count, settings, settings.completion_window_s or WINDOW_S)
            record = {
                "id": batch_id,
                "timeline": timeline.to_dict(),
                "settings": settings.to_dict(),
                "prepared": False,  # set by `_prepare`, with the two fields below
                "outcomes": "",  # in processing order
                "seed_sha": None,
                "shuffle_output": settings.shuffle_output,
                "duplicate_output_lines": settings.duplicate_output_lines,
                "cancel_requested_at": None,
                # Small batches are worked on within the API call, large ones by the worker.
                "work_in_call": size < settings.background_min_bytes,
                "staged": None,  # the results written so far: {"state", "processed"}
                "finalized": False,
            }
            self.store.add(KIND, record)
            self._schedule(record)
            # Results are published before any answer says `ended` (with no delays, this one may).
            return self._refresh(record, origin, created)

    # --- background work ----------------------------------------------------------------------

    def resume(self) -> None:
        """Resubmit the unfinished work of every batch (an emulator restarted mid-way)."""
        with self.store.locked():
            for record in self.store.all(KIND):
                self._schedule(record)

    def _schedule(self, record: Record) -> None:
        """Run the job the batch waits on, if any (reading its body, then writing the results of
        its expected ending), on the worker or here for a small batch. Call with the store lock held."""
        if record["finalized"]:
            return
        batch_id = record["id"]
        if not record.get("prepared", True):
            key, job = f"anthropic:prepare:{batch_id}", lambda: self._prepare(batch_id)
        elif not staged_for(record, results_target(record)):
            key, job = f"anthropic:results:{batch_id}", lambda: self._generate(batch_id)
        else:
            return
        if record.get("work_in_call"):
            job()
        else:
            self.worker.submit(key, job)

    def _prepare(self, batch_id: str) -> None:
        """Read the checked body a request at a time: store the requests one per line, seed the
        fault draws and output order with their hash, and draw each request's outcome."""
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record.get("prepared", True):
                return
            settings = EmulatorSettings(**record["settings"])
        # Requests as sent, canonically serialised: their hash seeds the fault draws and output order.
        # The hash is of the whole list; the blob keeps one request per line, for reading them one by one.
        hasher = hashlib.sha256(b"[")
        custom_ids: list[str] = []
        invalid_flags = bytearray()

        with (
            self.store.blob_writer(_requests_blob(batch_id)) as sink,
            self.store.open_blob(_body_blob(batch_id)) as source,
        ):
            for custom_id, params in checked_requests(source):
                data = json.dumps([custom_id, params], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                if custom_ids:
                    hasher.update(b",")
                line = data.encode()
                hasher.update(line)
                sink.write(line + b"\n")
                custom_ids.append(custom_id)
                invalid_flags.append(request_error(params) is not None)
        hasher.update(b"]")
        seed_sha = hasher.hexdigest()
        # The draws run outside the store lock, so API calls go on meanwhile (see the OpenAI
        # service's `_validate` for why the occurrence counts cannot change under them).
        plan, occurrences = faults.plan_for(self.store, "anthropic", seed_sha, settings, custom_ids)
        outcomes = _outcomes(custom_ids, invalid_flags, plan, settings)
        order = faults.processing_order(len(custom_ids), seed_sha, settings.shuffle_output)
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record.get("prepared", True):
                return
            record.update({"outcomes": "".join(outcomes[i] for i in order), "seed_sha": seed_sha, "prepared": True})
            if occurrences is not None:
                occurrences.count(custom_ids)
            self.store.save(KIND, record)
            self.store.drop_blob(_body_blob(batch_id))
            self._schedule(record)

    def _generate(self, batch_id: str) -> None:
        """Write the results of the batch's expected ending to a staged blob, one line at a time."""
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record["finalized"] or not record.get("prepared", True):
                return
            target = results_target(record)
            if staged_for(record, target):
                return
            snapshot = dict(record)
        with (
            self.store.blob_writer(_staged_blob(batch_id)) as sink,
            self.store.open_blob(_requests_blob(batch_id)) as source,
        ):
            write_lines(sink, _result_lines(snapshot, target, source))
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record["finalized"]:
                self.store.drop_blob(_staged_blob(batch_id))
                return
            if results_target(record) != target:
                self._schedule(record)  # cancelled while writing: write the cancelled ending
                return
            record["staged"] = target
            self.store.save(KIND, record)

    # --- read ---------------------------------------------------------------------------------

    def retrieve(self, batch_id: str, origin: str) -> dict[str, Any]:
        with self.store.locked():
            return self._refresh(self._record(batch_id), origin)

    def list_batches(self, after_id: str | None, before_id: str | None, limit: int, origin: str) -> dict[str, Any]:
        """Newest first; `after_id` pages towards older batches, `before_id` towards newer ones."""
        if after_id is not None and before_id is not None:
            raise invalid("Only one of after_id and before_id may be given.")  # [GUESS] the wording
        with self.store.locked():
            records = list(reversed(self.store.all(KIND)))
            positions = {r["id"]: i for i, r in enumerate(records)}
            cursor = after_id if after_id is not None else before_id
            if cursor is not None and cursor not in positions:
                name = "after_id" if after_id is not None else "before_id"
                raise invalid(f"{name}: no message batch with id '{cursor}'.")  # [GUESS] the wording
            if before_id is not None:
                end = positions[before_id]
                start = max(0, end - limit)
                has_more = start > 0
            else:
                start = positions[after_id] + 1 if after_id is not None else 0
                end = start + limit
                has_more = end < len(records)
            data = [self._refresh(r, origin) for r in records[start:end]]
            return {
                "data": data,
                "has_more": has_more,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }

    def results(self, batch_id: str) -> BinaryIO:
        """The results file, open for streaming (a later delete does not cut the read short)."""
        with self.store.locked():
            record = self._record(batch_id)
            if not record["finalized"]:
                self._refresh(record, "")
            if not record["finalized"]:
                # [GUESS] the real API's status and wording for results requested too early.
                raise not_found(f"Results for message batch '{batch_id}' are not available: it has not ended yet.")
            return self.store.open_blob(_results_blob(batch_id))

    # --- change -------------------------------------------------------------------------------

    def cancel(self, batch_id: str, origin: str) -> dict[str, Any]:
        with self.store.locked():
            record = self._record(batch_id)
            at = clock.now()
            phase = _phase(record, at)
            if phase.state in clock.TERMINAL and not record["finalized"]:
                return self._refresh(record, origin, at)  # ended, its results about to be published
            if phase.state in clock.TERMINAL:
                # [GUESS] the real API's answer to canceling an ended batch.
                raise invalid(f"Message batch '{batch_id}' has already ended and can no longer be canceled.")
            if record["cancel_requested_at"] is None:
                record["cancel_requested_at"] = at
                self.store.save(KIND, record)
                self._schedule(record)  # the results to write are now the canceled batch's
            return self._refresh(record, origin, at)

    def delete(self, batch_id: str) -> dict[str, Any]:
        with self.store.locked():
            record = self._record(batch_id)
            self._refresh(record, "")
            if not record["finalized"]:
                # Documented rule (SDK docstring); [GUESS] the wording.
                raise invalid(
                    f"Message batch '{batch_id}' cannot be deleted while it is still processing; "
                    "cancel it first and delete it once it has ended."
                )
            self.store.remove(KIND, batch_id)
            self.store.drop_blob(_results_blob(batch_id))
            self.store.drop_blob(_requests_blob(batch_id))
            self.store.drop_blob(_body_blob(batch_id))
            self.store.drop_blob(_staged_blob(batch_id))
            return {"id": batch_id, "type": "message_batch_deleted"}

    # --- state --------------------------------------------------------------------------------

    def _record(self, batch_id: str) -> Record:
        found = self.store.get(KIND, batch_id)
        if found is None:
            raise not_found(f"No message batch found with id '{batch_id}'.")
        return found

    def _refresh(self, record: Record, origin: str, at: float | None = None) -> dict[str, Any]:
        """The batch as of now, its results published first if it has just ended (a rename: the
        worker wrote them); until the worker has, it shows as still processing (`_shown_at`)."""
        at = clock.now() if at is None else at
        phase = _phase(record, at)
        if phase.state in clock.TERMINAL and not record["finalized"]:
            if staged_for(record, {"state": phase.state, "processed": phase.processed}):
                self._finalize(record)
            else:
                self._schedule(record)
        return self._view(record, at, origin)

    def _finalize(self, record: Record) -> None:
        batch_id = record["id"]
        self.store.move_blob(_staged_blob(batch_id), _results_blob(batch_id))
        record["finalized"] = True
        self.store.save(KIND, record)
        self.store.drop_blob(_requests_blob(batch_id))

    @staticmethod
    def _shown_at(record: Record, at: float) -> float:
        """Now, or just before the batch ended when its results are not written yet."""
        if record["finalized"]:
            return at
        phase = _phase(record, at)
        return min(at, phase.since - _HOLD_S) if phase.state in clock.TERMINAL else at

    # --- wire shape ---------------------------------------------------------------------------

    def _view(self, record: Record, at: float, origin: str) -> dict[str, Any]:
        at = self._shown_at(record, at)
        timeline = Timeline.from_dict(record["timeline"])
        cancel_at = record["cancel_requested_at"]
        phase = _phase(record, at)
        ended = phase.state in clock.TERMINAL
        if ended:
            status = "ended"
        else:
            status = "canceling" if cancel_at is not None else "in_progress"
        return {
            "id": record["id"],
            "type": "message_batch",
            "processing_status": status,
            "request_counts": _counts(record, phase, ended),
            "ended_at": rfc3339(phase.since) if ended else None,
            "created_at": rfc3339(timeline.created),
            "expires_at": rfc3339(timeline.expires),
            "archived_at": None,
            "cancel_initiated_at": rfc3339(cancel_at) if cancel_at is not None else None,
            "results_url": origin + RESULTS_PATH.format(batch_id=record["id"]) if ended else None,
        }


def _outcomes(
    custom_ids: list[str], invalid_flags: bytearray, plan: faults.FaultPlan, settings: EmulatorSettings
) -> list[str]:
    """Each request's outcome, in input order.

    `force_batch_status: failed` has no Anthropic counterpart (no batch-level failure): the
    nearest thing, a batch that ends with every request `errored` (api_error/overloaded_error),
    is what it gives.
    """
    if settings.force_batch_status == "failed":
        return [faults.SERVER_ERROR] * len(custom_ids)
    outcomes = []
    for custom_id, invalid_request in zip(custom_ids, invalid_flags, strict=True):
        injected = plan.outcome(custom_id)  # drawn for every request, so the rotation stays in input order
        rate = settings.anthropic_timeout_error_rate
        if injected == faults.OK and rate > 0 and plan.draw("anthropic_timeout_error", custom_id) < rate:
            injected = faults.TIMED_OUT
        if injected == faults.OK:
            injected = _stop_outcome(plan, custom_id, settings)
        outcomes.append(faults.INVALID_REQUEST if invalid_request else injected)
    return outcomes


def _stop_outcome(plan: faults.FaultPlan, custom_id: str, settings: EmulatorSettings) -> str:
    """A succeeded result's rarer stop reason, if the `anthropic_*_rate` knobs draw one."""
    for outcome, rate in (
        (CONTEXT_WINDOW_EXCEEDED, settings.anthropic_context_window_exceeded_rate),
        (PAUSE_TURN, settings.anthropic_pause_turn_rate),
        (REFUSAL, settings.anthropic_refusal_rate),
    ):
        if rate > 0 and plan.draw(f"anthropic_stop:{outcome}", custom_id) < rate:
            return outcome
    return faults.OK


def _phase(record: Record, at: float) -> Phase:
    return Timeline.from_dict(record["timeline"]).phase(at, record["cancel_requested_at"])


def _counts(record: Record, phase: Phase, ended: bool) -> dict[str, int]:
    outcomes = record["outcomes"]  # drawn by the worker, before the batch can show as ended
    total = record["timeline"]["total"]
    counts = {"processing": total, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    if ended:
        errored = sum(outcomes.count(code, 0, phase.processed) for code in faults.FAILURES)
        counts.update(processing=0, succeeded=phase.processed - errored, errored=errored)
        if phase.state in _UNFINISHED:
            counts[_UNFINISHED[phase.state]] = total - phase.processed
    return counts


def _line(custom_id: str, result: dict[str, Any]) -> str:
    return json.dumps({"custom_id": custom_id, "result": result}, ensure_ascii=False, separators=(",", ":"))


def _ignore(custom_id: str, params: dict[str, Any]) -> None:
    """The create call only checks the requests; the worker reads them again (`_prepare`)."""


def _body_blob(batch_id: str) -> str:
    return f"{batch_id}.body.json"


def _requests_blob(batch_id: str) -> str:
    return f"{batch_id}.requests.jsonl"


def _staged_blob(batch_id: str) -> str:
    return f"{batch_id}.staged-results.jsonl"


def _result_lines(record: Record, target: dict[str, Any], source: BinaryIO) -> Iterator[str]:
    """Every result line in processing order, then the duplicated ones; reads one request at a time."""
    offsets = array.array("q")
    position = 0
    for raw in source:
        offsets.append(position)
        position += len(raw)
    order = faults.processing_order(len(offsets), record["seed_sha"], record["shuffle_output"])
    duplicates: list[str] = []
    batch_id, processed = record["id"], target["processed"]
    following = -1  # the request the source is positioned at (none: it was read to the end)
    for position, index in enumerate(order):
        if index != following:  # in input order (no shuffle) every read follows the last one
            source.seek(offsets[index])
        following = index + 1
        custom_id, params = json.loads(source.readline())
        if position >= processed:
            result: dict[str, Any] = {"type": _UNFINISHED[target["state"]]}
        else:
            category = record["settings"].get("anthropic_refusal_category")
            result = result_for(params, record["outcomes"][position], batch_id, index, category)
        line = _line(custom_id, result)
        if position < processed and faults.duplicated(record["seed_sha"], custom_id, record["duplicate_output_lines"]):
            duplicates.append(line)
        yield line
    # One JSON object per line and never a blank line: the SDK's JSONL decoder parses every line.
    yield from duplicates


def _results_blob(batch_id: str) -> str:
    return f"{batch_id}.results.jsonl"
