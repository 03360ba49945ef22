"""OpenAI-format batches: create, retrieve, cancel, list, and their results, written in the background.

A batch's status is derived from its `Timeline` on every read. The slow work runs on the app's
`Worker`, never in an API call: reading the input (`_validate`, while the batch validates) and
writing the results of its expected ending to staged files, a line at a time (`_generate`).
When the clock reaches that ending, the next read publishes the staged files as the output and
error files (a rename). Until the worker is done the batch shows the state before, so nothing
reports a finished batch without its files.
"""

from __future__ import annotations

import array
import hashlib
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

from batch_assets.emulator import clock, faults
from batch_assets.emulator.clock import Phase, Timeline
from batch_assets.emulator.errors import ApiError, invalid_value, missing_parameter, not_found
from batch_assets.emulator.settings import EmulatorSettings, RuntimeSettings, token_limit_for
from batch_assets.emulator.store import Record, Store
from batch_assets.emulator.worker import Worker, results_target, staged_for, write_lines
from batch_assets.providers.openai.emulator.bodies import REFUSED, respond
from batch_assets.providers.openai.emulator.files import (
    DEFAULT_BATCH_FILE_TTL_S,
    FileService,
    check_expires_after,
    page,
)
from batch_assets.providers.openai.emulator.flavor import Flavor
from batch_assets.providers.openai.emulator.requests import EMBEDDINGS, output_format, prompt_of, request_error
from batch_assets.providers.openai.emulator.validation import ParsedInput, batch_error, parse_input

KIND = "openai_batches"
_STATUS = {
    clock.QUEUED: "validating",
    clock.RUNNING: "in_progress",
    clock.FINALIZING: "finalizing",
    clock.DONE: "completed",
    clock.EXPIRED: "expired",
    clock.CANCELLING: "cancelling",
    clock.CANCELLED: "cancelled",
}
_UNFINISHED = {
    clock.EXPIRED: ("batch_expired", "This request could not be executed before the completion window expired."),
    clock.CANCELLED: ("batch_cancelled", "This request could not be executed before the batch was cancelled."),
}
_METADATA_PAIRS, _METADATA_KEY_LEN, _METADATA_VALUE_LEN = 16, 64, 512
_HOLD_S = 1e-6  # how far before a step a batch waiting on the worker is shown
_CHUNK = 1 << 20


class BatchService:
    def __init__(self, store: Store, files: FileService, runtime: RuntimeSettings, worker: Worker) -> None:
        self.store = store
        self.files = files
        self.runtime = runtime
        self.worker = worker

    # --- create -------------------------------------------------------------------------------

    def create(self, flavor: Flavor, params: dict[str, Any]) -> dict[str, Any]:
        for name in ("input_file_id", "endpoint", "completion_window"):
            if not isinstance(params.get(name), str) or not params[name]:
                raise missing_parameter(name)
        endpoint, window = params["endpoint"], params["completion_window"]
        if endpoint not in flavor.endpoints:
            supported = ", ".join(flavor.endpoints)
            message = f"Invalid value for 'endpoint': '{endpoint}'. Supported values are: {supported}."
            raise invalid_value("endpoint", message)
        window_s = flavor.window_seconds(window)
        if window_s is None:
            raise invalid_value("completion_window", f"Invalid value for 'completion_window': '{window}'.")
        metadata = _check_metadata(params.get("metadata"))
        output_ttl = check_expires_after(params.get("output_expires_after"), "output_expires_after")
        with self.store.locked():
            source = self.files.record(flavor, params["input_file_id"])
            if source["object"]["purpose"] != "batch":
                raise ApiError(400, "The input file must be uploaded with purpose 'batch'.", param="input_file_id")
            settings = self.runtime.take_batch_settings()
            created = clock.now()
            batch_id = flavor.batch_id(created)
            window_s = settings.completion_window_s or window_s
            record = {
                "id": batch_id,
                "flavor": flavor.name,
                "endpoint": params["endpoint"],
                "input_file_id": source["id"],
                "completion_window": params["completion_window"],
                "metadata": metadata,
                "model": None,
                "errors": None,
                # Planned again, with the request count, once the input is read (`_validate`).
                "timeline": Timeline.plan(created, 0, settings, window_s).to_dict(),
                "window_s": window_s,
                "settings": settings.to_dict(),
                "validated": False,
                # Small inputs are worked on within the API call, large ones by the worker.
                "work_in_call": source["object"]["bytes"] < settings.background_min_bytes,
                "outcomes": "",  # in processing order, once validated
                "file_sha": None,
                "shuffle_output": settings.shuffle_output,
                "duplicate_output_lines": settings.duplicate_output_lines,
                "prompt_tokens": 0,
                # What the batch holds of its model's enqueued-token limit while it is active.
                "enqueued_tokens": 0,
                "output_ttl": output_ttl,
                "cancel_requested_at": None,
                "staged": None,  # the results written so far: {"state", "processed", "output", "error", "usage"}
                "finalized": False,
                "output_file_id": None,
                "error_file_id": None,
                "usage": None,
            }
            # The batch keeps its own copy of the input (a hard link), so deleting the upload cannot break it.
            self.store.copy_blob(source["id"], _input_blob(batch_id))
            self.store.add(KIND, record)
            self._schedule(flavor, record)
            return self._refresh(flavor, record, created)

    # --- background work ----------------------------------------------------------------------

    def resume(self, flavor: Flavor) -> None:
        """Resubmit the unfinished work of `flavor`'s batches (an emulator restarted mid-way)."""
        with self.store.locked():
            for record in self.store.all(KIND):
                if record["flavor"] == flavor.name:
                    self._schedule(flavor, record)

    def _schedule(self, flavor: Flavor, record: Record) -> None:
        """Run the job the batch waits on, if any: on the worker, or here for a small input.

        Call with the store lock held."""
        if record["finalized"]:
            return
        batch_id = record["id"]
        if not record.get("validated", True):
            key, job = f"openai:validate:{batch_id}", lambda: self._validate(flavor, batch_id)
        elif (not record["errors"] or record["cancel_requested_at"] is not None) and not staged_for(
            record, results_target(record)
        ):
            key, job = f"openai:results:{batch_id}", lambda: self._generate(flavor, batch_id)
        else:
            return
        if record.get("work_in_call"):
            job()
        else:
            self.worker.submit(key, job)

    def _validate(self, flavor: Flavor, batch_id: str) -> None:
        """Read the batch's input, one line at a time: batch-level errors, each request's outcome,
        the token estimate. Runs on the worker; the batch reads `validating` until it is done."""
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record.get("validated", True):
                return
            endpoint = record["endpoint"]
            settings = EmulatorSettings(**record["settings"])
        blob = _input_blob(batch_id)
        file_sha = _sha256(self.store, blob)
        custom_ids: list[str] = []
        invalid = bytearray()
        tokens = {"prompt": 0, "max": 0}

        def take(custom_id: str, body: dict[str, Any]) -> None:
            custom_ids.append(custom_id)
            invalid.append(
                request_error(
                    endpoint, body, flavor.max_embedding_dimensions, flavor.reasons(str(body.get("model", "")))
                )
                is not None
            )
            tokens["prompt"] += prompt_of(endpoint, body).tokens
            tokens["max"] += _max_tokens(output_format(endpoint, body).max_tokens)

        with self.store.open_blob(blob) as lines:
            parsed = parse_input(lines, endpoint, settings.max_requests_per_batch, on_request=take)
        # The draws run outside the store lock, so API calls go on meanwhile. The worker reads one
        # batch at a time; only a small batch worked on within its create call at that very moment
        # could read the same occurrence counts (`item_faults_by_occurrence`).
        outcomes = []
        occurrences = None
        if not parsed.errors:
            plan, occurrences = faults.plan_for(self.store, flavor.name, file_sha, settings, custom_ids)
            for position, custom_id in enumerate(custom_ids):
                injected = plan.outcome(custom_id)  # drawn for every request: the rotation stays in input order
                if injected == faults.OK:
                    injected = _openai_outcome(flavor, endpoint, plan, custom_id, settings)
                outcomes.append(faults.INVALID_REQUEST if invalid[position] else injected)
        order = faults.processing_order(len(outcomes), file_sha, settings.shuffle_output)
        in_order = "".join(outcomes[i] for i in order)
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record.get("validated", True):
                return
            if not parsed.errors:
                estimate = tokens["prompt"] + tokens["max"]
                parsed.errors = self._capacity_errors(flavor, parsed, estimate, settings, batch_id)
            timeline = Timeline.plan(record["timeline"]["created"], len(outcomes), settings, record["window_s"])
            record.update(
                {
                    "model": parsed.model,
                    "errors": parsed.errors or None,
                    "timeline": timeline.to_dict(),
                    "outcomes": in_order,
                    "file_sha": file_sha,
                    "prompt_tokens": tokens["prompt"],
                    "enqueued_tokens": tokens["prompt"] + tokens["max"],
                    "validated": True,
                }
            )
            if not parsed.errors and occurrences is not None:
                occurrences.count(custom_ids)
            self.store.save(KIND, record)
            self._schedule(flavor, record)

    def _capacity_errors(
        self, flavor: Flavor, parsed: ParsedInput, tokens: int, settings: EmulatorSettings, batch_id: str
    ) -> list[dict[str, Any]]:
        """`tokens`: the new batch's estimate, its input tokens plus every request's max_tokens.

        [GUESS] the estimate (issue #8: OpenAI counts enqueued tokens per model over the batches
        still in progress; exactly how it weighs max_tokens is not published). The failure itself,
        `failed` at validation with code `token_limit_exceeded` and this message, is as OpenAI
        reports it to users (quoted in issue #8)."""
        limit = token_limit_for(settings.enqueued_token_limit, parsed.model)
        if settings.force_batch_status == "failed" or (
            limit is not None and tokens + self._enqueued_tokens(flavor, parsed.model, batch_id) > limit
        ):
            return [
                batch_error(
                    "token_limit_exceeded",
                    f"Enqueued token limit reached for {parsed.model} in organization org-emulator. "
                    f"Limit: {limit or 0} enqueued tokens. "
                    "Please try again once some in_progress batches have been completed.",
                )
            ]
        return []

    def _enqueued_tokens(self, flavor: Flavor, model: str | None, batch_id: str) -> int:
        at = clock.now()
        return sum(
            r.get("enqueued_tokens", r["prompt_tokens"])
            for r in self.store.all(KIND)
            if r["flavor"] == flavor.name
            and r["id"] != batch_id
            and r["model"] == model
            and not r["errors"]
            and self._phase(r, at).state not in clock.TERMINAL
        )

    # --- read ---------------------------------------------------------------------------------

    def retrieve(self, flavor: Flavor, batch_id: str) -> dict[str, Any]:
        with self.store.locked():
            return self._refresh(flavor, self._record(flavor, batch_id))

    def list_batches(self, flavor: Flavor, after: str | None, limit: int) -> dict[str, Any]:
        """Newest first, as OpenAI lists them."""
        with self.store.locked():
            records = [r for r in reversed(self.store.all(KIND)) if r["flavor"] == flavor.name]
            listing = page(records, after, limit)
            listing["data"] = [self._refresh(flavor, record) for record in listing["data"]]
            return listing

    def cancel(self, flavor: Flavor, batch_id: str) -> dict[str, Any]:
        with self.store.locked():
            record = self._record(flavor, batch_id)
            at = clock.now()
            current = self._refresh(flavor, record, at)
            if current["status"] in ("validating", "in_progress", "finalizing"):
                if self._phase(record, at).state in clock.TERMINAL:
                    return current  # it has ended and only waits for its results file: too late to cancel
                record["cancel_requested_at"] = at
                self.store.save(KIND, record)
                self._schedule(flavor, record)  # the results to write are now the cancelled batch's
                return self._refresh(flavor, record, at)
            if current["status"] in ("cancelling", "cancelled"):
                return current
            raise ApiError(400, f"Cannot cancel a batch with status '{current['status']}'.", param="batch_id")

    def _record(self, flavor: Flavor, batch_id: str) -> Record:
        found = self.store.get(KIND, batch_id)
        if found is None or found["flavor"] != flavor.name:
            raise not_found("batch", batch_id)
        return found

    @staticmethod
    def _phase(record: Record, at: float) -> Phase:
        return Timeline.from_dict(record["timeline"]).phase(at, record["cancel_requested_at"])

    def _refresh(self, flavor: Flavor, record: Record, at: float | None = None) -> dict[str, Any]:
        """The batch as of now, its result files published first if it has just become terminal.

        Publishing is cheap (the worker wrote the files already); until the worker has, the
        batch shows the state it was in just before (see `_shown_at`). `record` is one of
        `flavor`'s (`_record` and the listing pick them by flavor).
        """
        at = clock.now() if at is None else at
        phase = self._phase(record, at)
        if phase.state in clock.TERMINAL and not record["finalized"] and not self._failed(record, at):
            if staged_for(record, {"state": phase.state, "processed": phase.processed}):
                self._finalize(flavor, record, phase)
            else:
                self._schedule(flavor, record)
        return self._view(flavor, record, at)

    def _shown_at(self, record: Record, at: float) -> float:
        """The instant the batch is shown as of: now, or just before the step it waits on.

        A batch whose input the worker has not read yet is still validating; one that has ended
        on the clock but whose results the worker has not written yet is still in the state
        before (finalizing, cancelling, in progress). So no answer reports a finished batch
        without its results files, and no API call waits for them to be written.
        """
        timeline = Timeline.from_dict(record["timeline"])
        if not record.get("validated", True):
            return min(at, timeline.running - _HOLD_S)
        if record["finalized"] or self._failed(record, at):
            return at
        phase = self._phase(record, at)
        if phase.state in clock.TERMINAL:
            return min(at, phase.since - _HOLD_S)
        return at

    @staticmethod
    def _failed(record: Record, at: float) -> bool:
        # Validation errors surface when validating ends, unless a cancel came first.
        timeline = Timeline.from_dict(record["timeline"])
        cancel_at = record["cancel_requested_at"]
        cancelled_first = cancel_at is not None and cancel_at < timeline.running
        return bool(record["errors"]) and at >= timeline.running and not cancelled_first

    # --- results ------------------------------------------------------------------------------

    def _generate(self, flavor: Flavor, batch_id: str) -> None:
        """Write the results of the batch's expected ending to staged files, one line at a time.

        Runs on the worker. The files are published (`_finalize`) when the clock reaches that
        ending; a cancel arriving meanwhile changes the ending, and this runs again for it.
        """
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record["finalized"] or not record.get("validated", True):
                return
            target = results_target(record)
            if staged_for(record, target):
                return
            if record["errors"]:
                # Failed validation, then cancelled before it could fail: a batch with no results.
                record["staged"] = {**target, "output": False, "error": False, "usage": _usage(0, 0)}
                self.store.save(KIND, record)
                return
            snapshot = json.loads(json.dumps(record))
        usage = {"input": 0, "output": 0}
        roles = {}
        with (
            self.store.blob_writer(_staged_blob(batch_id, "output")) as output,
            self.store.blob_writer(_staged_blob(batch_id, "error")) as errors,
            self.store.open_blob(_input_blob(batch_id)) as source,
        ):
            duplicates = []
            for line, failed in _result_lines(flavor, snapshot, target, source, usage, duplicates):
                (errors if failed else output).write(line.encode() + b"\n")
            write_lines(output, duplicates)
            roles = {"output": output.tell() > 0, "error": errors.tell() > 0}
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record["finalized"]:
                return
            if results_target(record) != target:
                self._schedule(flavor, record)  # cancelled while writing: write the cancelled ending
                return
            record["staged"] = {**target, **roles, "usage": _usage(usage["input"], usage["output"])}
            self.store.save(KIND, record)

    def _finalize(self, flavor: Flavor, record: Record, phase: Phase) -> None:
        """Publish the staged results files as the batch's output and error files; cheap."""
        staged = record["staged"]
        written = int(phase.since)
        ttl = record["output_ttl"] or DEFAULT_BATCH_FILE_TTL_S
        for role in ("output", "error"):
            blob = _staged_blob(record["id"], role)
            if staged[role]:
                name = f"{record['id']}_{role}.jsonl"
                stored = self.files.adopt(flavor, role, name, "batch_output", blob, ttl, created=written)
                record[f"{role}_file_id"] = stored["id"]
            else:
                self.store.drop_blob(blob)
        record["usage"] = staged["usage"]
        record["finalized"] = True
        self.store.save(KIND, record)
        self.store.drop_blob(_input_blob(record["id"]))

    # --- wire shape ---------------------------------------------------------------------------

    def _view(self, flavor: Flavor, record: Record, at: float) -> dict[str, Any]:
        at = self._shown_at(record, at)
        timeline = Timeline.from_dict(record["timeline"])
        cancel_at = record["cancel_requested_at"]
        failed = self._failed(record, at)
        phase = self._phase(record, at)
        state = "failed" if failed else _STATUS[phase.state]
        reached = timeline.progress_end(at, cancel_at)
        validated = not failed and reached >= timeline.running

        def stamp(instant: float, condition: bool) -> int | None:
            return int(instant) if condition else None

        batch: dict[str, Any] = {"id": record["id"], "object": "batch", "endpoint": record["endpoint"]}
        if flavor.batches_report_model_and_usage:
            batch["model"] = record["model"]
        batch.update(
            {
                "errors": {"object": "list", "data": record["errors"]} if failed else None,
                "input_file_id": record["input_file_id"],
                "completion_window": record["completion_window"],
                "status": state,
                "output_file_id": record["output_file_id"],
                "error_file_id": _error_file_id(flavor, record),
                "created_at": int(timeline.created),
                "in_progress_at": stamp(timeline.running, validated),
                "expires_at": stamp(timeline.expires, flavor.expiry_before_validation or validated),
                "finalizing_at": stamp(timeline.finalizing, not failed and reached >= timeline.finalizing),
                "completed_at": stamp(phase.since, state == "completed"),
                "failed_at": stamp(timeline.running, failed),
                "expired_at": stamp(phase.since, state == "expired"),
                "cancelling_at": stamp(cancel_at or 0.0, cancel_at is not None and not failed),
                "cancelled_at": stamp(phase.since, state == "cancelled"),
                "request_counts": _counts(record, phase, state),
            }
        )
        if flavor.batches_report_model_and_usage:
            batch["usage"] = record["usage"] or _usage(0, 0)
        batch["metadata"] = record["metadata"]
        return batch


def _error_file_id(flavor: Flavor, record: Record) -> str | None:
    """The batch's error file, or "" for a finished one without, under `openai_empty_error_file_id`:
    a live clean batch reported `error_file_id: ""` (tobert/kaibo#93), where the docs say null."""
    empty = flavor.name == "openai" and record["settings"].get("openai_empty_error_file_id", False)
    if record["error_file_id"] is None and record["finalized"] and empty:
        return ""
    return record["error_file_id"]


def _openai_outcome(
    flavor: Flavor, endpoint: str, plan: faults.FaultPlan, custom_id: str, settings: EmulatorSettings
) -> str:
    """A request's OpenAI-only outcome, if the `openai_*` knobs draw one (never for another flavor,
    whose dialect has its own codes, nor for embeddings, which no usage policy screens)."""
    if flavor.name != "openai" or endpoint == EMBEDDINGS:
        return faults.OK
    for outcome, rate in (
        (faults.FLAGGED_PROMPT, settings.openai_invalid_prompt_rate),
        (REFUSED, settings.openai_refusal_rate),
    ):
        if rate > 0 and plan.draw(f"openai_outcome:{outcome}", custom_id) < rate:
            return outcome
    return faults.OK


def _counts(record: Record, phase: Phase, state: str) -> dict[str, int]:
    if state in ("validating", "failed"):
        return {"total": 0, "completed": 0, "failed": 0}
    outcomes = record["outcomes"]
    total = len(outcomes)
    failed = sum(outcomes.count(code, 0, phase.processed) for code in faults.FAILURES)
    completed = phase.processed - failed
    counted = state == "cancelled" or (
        state == "expired" and record["settings"].get("expired_counts_unfinished_as_failed", True)
    )
    if counted:
        failed += total - phase.processed  # unfinished requests are error-file lines too
    # A live expired batch reported {total: 10, completed: 1, failed: 0} (warmbly/warmbly#333): its
    # unfinished requests were not counted, though they are batch_expired lines of the error file.
    return {"total": total, "completed": completed, "failed": failed}


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def _line(line_id: str, custom_id: str, response: dict[str, Any] | None, error: dict[str, str] | None) -> str:
    return json.dumps({"id": line_id, "custom_id": custom_id, "response": response, "error": error}, ensure_ascii=False)


def _check_metadata(metadata: Any) -> dict[str, str] | None:
    if metadata is None:
        return None
    valid = (
        isinstance(metadata, dict)
        and len(metadata) <= _METADATA_PAIRS
        and all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= _METADATA_KEY_LEN and len(v) <= _METADATA_VALUE_LEN
            for k, v in metadata.items()
        )
    )
    if not valid:
        raise invalid_value(
            "metadata",
            f"Invalid 'metadata': at most {_METADATA_PAIRS} string pairs, keys up to {_METADATA_KEY_LEN} "
            f"and values up to {_METADATA_VALUE_LEN} characters.",
        )
    return metadata


def _max_tokens(value: Any) -> int:
    """A request's max_tokens as it counts towards the enqueued-token limit (invalid ones: 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _input_blob(batch_id: str) -> str:
    return f"{batch_id}.input.jsonl"


def _staged_blob(batch_id: str, role: str) -> str:
    return f"{batch_id}.staged-{role}.jsonl"


def _sha256(store: Store, blob: str) -> str:
    digest = hashlib.sha256()
    with store.open_blob(blob) as source:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _line_offsets(source: BinaryIO) -> array.array[int]:
    """Where each non-blank line (each request of a valid file) starts."""
    offsets = array.array("q")
    position = 0
    source.seek(0)
    for raw in source:
        if raw.strip():
            offsets.append(position)
        position += len(raw)
    return offsets


def _result_lines(
    flavor: Flavor,
    record: Record,
    target: dict[str, Any],
    source: BinaryIO,
    usage: dict[str, int],
    duplicates: list[str],
) -> Iterator[tuple[str, bool]]:
    """(line, is an error line) for every request, in processing order; reads one request at a time."""
    timeline = Timeline.from_dict(record["timeline"])
    offsets = _line_offsets(source)
    order = faults.processing_order(len(record["outcomes"]), record["file_sha"], record["shuffle_output"])
    processed = target["processed"]
    settings = record["settings"]
    missing_rate = settings.get("missing_output_lines", 0.0) if target["state"] == clock.DONE else 0.0
    failures = written = 0
    last = len(order) - 1
    for position, index in enumerate(order):
        source.seek(offsets[index])
        request = json.loads(source.readline())
        custom_id, body = request["custom_id"], request["body"]
        line_id, request_id = flavor.line_ids(record["id"], index)
        if position >= processed:
            code, message = _UNFINISHED[target["state"]]
            yield _line(line_id, custom_id, None, {"code": code, "message": message}), True
            continue
        # The batch completed, and this request got no line in either file; never every request:
        # a completed batch keeps a results file to read.
        if faults.missing(record["file_sha"], custom_id, missing_rate) and (written or position < last):
            continue
        written += 1
        finished = int(timeline.running + (position + 1) * timeline.per_request)
        outcome = record["outcomes"][position]
        result = respond(flavor, record["endpoint"], body, outcome, line_id, finished)
        if result.status_code != 200:
            message = str((result.body.get("error") or {}).get("message", ""))
            own = flavor.item_error(outcome, message, failures, settings)
            failures += 1
            response = (
                None if own else {"status_code": result.status_code, "request_id": request_id, "body": result.body}
            )
            yield _line(line_id, custom_id, response, own), True
            continue
        response = {"status_code": result.status_code, "request_id": request_id, "body": result.body}
        line = _line(line_id, custom_id, response, None)
        usage["input"] += result.input_tokens
        usage["output"] += result.output_tokens
        if faults.duplicated(record["file_sha"], custom_id, record["duplicate_output_lines"]):
            duplicates.append(line)
        yield line, False
