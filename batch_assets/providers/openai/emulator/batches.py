"""OpenAI-format batches: create, retrieve, cancel, list, and the one-time write of their results.

A batch's status is derived from its `Timeline` on every read; the only writes after creation are
a cancel request and, once the batch reaches a terminal state, its output and error files.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from batch_assets.emulator import clock, faults
from batch_assets.emulator.clock import Phase, Timeline
from batch_assets.emulator.errors import ApiError, invalid_value, missing_parameter, not_found
from batch_assets.emulator.settings import EmulatorSettings, RuntimeSettings, token_limit_for
from batch_assets.emulator.store import Record, Store
from batch_assets.providers.openai.emulator.bodies import respond
from batch_assets.providers.openai.emulator.files import (
    DEFAULT_BATCH_FILE_TTL_S,
    FileService,
    check_expires_after,
    page,
)
from batch_assets.providers.openai.emulator.flavor import Flavor
from batch_assets.providers.openai.emulator.requests import output_format, prompt_of, request_error
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


class BatchService:
    def __init__(self, store: Store, files: FileService, runtime: RuntimeSettings) -> None:
        self.store = store
        self.files = files
        self.runtime = runtime

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
            return self._create(flavor, params, source, settings, created, window_s, metadata, output_ttl)

    def _create(
        self,
        flavor: Flavor,
        params: dict[str, Any],
        source: Record,
        settings: EmulatorSettings,
        created: float,
        window_s: float,
        metadata: dict[str, str] | None,
        output_ttl: int | None,
    ) -> dict[str, Any]:
        data = self.store.read_blob(source["id"])
        file_sha = hashlib.sha256(data).hexdigest()
        parsed = parse_input(data, params["endpoint"], settings.max_requests_per_batch)
        custom_ids = [custom_id for custom_id, _ in parsed.requests]
        plan, occurrences = faults.plan_for(self.store, flavor.name, file_sha, settings, custom_ids)
        outcomes = []
        prompt_tokens = max_tokens = 0
        if not parsed.errors:
            for custom_id, body in parsed.requests:
                invalid = request_error(params["endpoint"], body, flavor.max_embedding_dimensions)
                injected = plan.outcome(custom_id)
                outcomes.append(faults.INVALID_REQUEST if invalid else injected)
                prompt_tokens += prompt_of(params["endpoint"], body).tokens
                max_tokens += _max_tokens(output_format(params["endpoint"], body).max_tokens)
            parsed.errors = self._capacity_errors(flavor, parsed, prompt_tokens + max_tokens, settings)
        order = faults.processing_order(len(outcomes), file_sha, settings.shuffle_output)
        batch_id = flavor.batch_id(created)
        timeline = Timeline.plan(created, len(outcomes), settings, settings.completion_window_s or window_s)
        record = {
            "id": batch_id,
            "flavor": flavor.name,
            "endpoint": params["endpoint"],
            "input_file_id": source["id"],
            "completion_window": params["completion_window"],
            "metadata": metadata,
            "model": parsed.model,
            "errors": parsed.errors or None,
            "timeline": timeline.to_dict(),
            "outcomes": "".join(outcomes[i] for i in order),  # in processing order
            "file_sha": file_sha,
            "shuffle_output": settings.shuffle_output,
            "duplicate_output_lines": settings.duplicate_output_lines,
            "prompt_tokens": prompt_tokens,
            # What the batch holds of its model's enqueued-token limit while it is active.
            "enqueued_tokens": prompt_tokens + max_tokens,
            "output_ttl": output_ttl,
            "cancel_requested_at": None,
            "finalized": False,
            "output_file_id": None,
            "error_file_id": None,
            "usage": None,
        }
        if not parsed.errors and occurrences is not None:
            occurrences.count(custom_ids)
        if not parsed.errors:
            # The batch keeps its own copy of the input, so deleting the uploaded file cannot break it.
            self.store.copy_blob(source["id"], _input_blob(batch_id))
        self.store.add(KIND, record)
        # With no delays the batch may already be terminal: its files are written before any
        # answer says `completed`, so a snapshot never shows a finished batch without results.
        return self._refresh(flavor, record, created)

    def _capacity_errors(
        self, flavor: Flavor, parsed: ParsedInput, tokens: int, settings: EmulatorSettings
    ) -> list[dict[str, Any]]:
        """`tokens`: the new batch's estimate, its input tokens plus every request's max_tokens.

        [GUESS] the estimate (issue #8: OpenAI counts enqueued tokens per model over the batches
        still in progress; exactly how it weighs max_tokens is not published). The failure itself,
        `failed` at validation with code `token_limit_exceeded` and this message, is as OpenAI
        reports it to users (quoted in issue #8)."""
        limit = token_limit_for(settings.enqueued_token_limit, parsed.model)
        if settings.force_batch_status == "failed" or (
            limit is not None and tokens + self._enqueued_tokens(flavor, parsed.model) > limit
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

    def _enqueued_tokens(self, flavor: Flavor, model: str | None) -> int:
        at = clock.now()
        return sum(
            r.get("enqueued_tokens", r["prompt_tokens"])
            for r in self.store.all(KIND)
            if r["flavor"] == flavor.name
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
                record["cancel_requested_at"] = at
                self.store.save(KIND, record)
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
        """The batch as of now, writing its result files first if it has just become terminal.

        `record` is one of `flavor`'s (`_record` and the listing pick them by flavor).
        """
        at = clock.now() if at is None else at
        phase = self._phase(record, at)
        if phase.state in clock.TERMINAL and not record["finalized"] and not self._failed(record, at):
            self._finalize(flavor, record, phase)
        return self._view(flavor, record, at)

    @staticmethod
    def _failed(record: Record, at: float) -> bool:
        # Validation errors surface when validating ends, unless a cancel came first.
        timeline = Timeline.from_dict(record["timeline"])
        cancel_at = record["cancel_requested_at"]
        cancelled_first = cancel_at is not None and cancel_at < timeline.running
        return bool(record["errors"]) and at >= timeline.running and not cancelled_first

    # --- results ------------------------------------------------------------------------------

    def _finalize(self, flavor: Flavor, record: Record, phase: Phase) -> None:
        timeline = Timeline.from_dict(record["timeline"])
        # A batch with validation errors that was cancelled while validating has no results.
        data = b"" if record["errors"] else self.store.read_blob(_input_blob(record["id"]))
        requests = parse_input(data, record["endpoint"]).requests
        order = faults.processing_order(len(record["outcomes"]), record["file_sha"], record["shuffle_output"])
        output: list[str] = []
        errors: list[str] = []
        duplicates: list[str] = []
        input_tokens = output_tokens = 0
        for position, index in enumerate(order):
            custom_id, body = requests[index]
            line_id, request_id = flavor.line_ids(record["id"], index)
            if position >= phase.processed:
                code, message = _UNFINISHED[phase.state]
                errors.append(_line(line_id, custom_id, None, {"code": code, "message": message}))
                continue
            finished = int(timeline.running + (position + 1) * timeline.per_request)
            result = respond(flavor, record["endpoint"], body, record["outcomes"][position], line_id, finished)
            response = {"status_code": result.status_code, "request_id": request_id, "body": result.body}
            line = _line(line_id, custom_id, response, None)
            if result.status_code == 200:
                output.append(line)
                input_tokens += result.input_tokens
                output_tokens += result.output_tokens
                if faults.duplicated(record["file_sha"], custom_id, record["duplicate_output_lines"]):
                    duplicates.append(line)
            else:
                errors.append(line)
        written = int(phase.since)
        ttl = record["output_ttl"] or DEFAULT_BATCH_FILE_TTL_S
        for role, lines in (("output", output + duplicates), ("error", errors)):
            if lines:
                data = ("\n".join(lines) + "\n").encode()
                name = f"{record['id']}_{role}.jsonl"
                stored = self.files.add(flavor, role, name, "batch_output", data, ttl, created=written)
                record[f"{role}_file_id"] = stored["id"]
        record["usage"] = _usage(input_tokens, output_tokens)
        record["finalized"] = True
        self.store.save(KIND, record)
        self.store.drop_blob(_input_blob(record["id"]))

    # --- wire shape ---------------------------------------------------------------------------

    def _view(self, flavor: Flavor, record: Record, at: float) -> dict[str, Any]:
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
                "error_file_id": record["error_file_id"],
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


def _counts(record: Record, phase: Phase, state: str) -> dict[str, int]:
    if state in ("validating", "failed"):
        return {"total": 0, "completed": 0, "failed": 0}
    outcomes = record["outcomes"]
    total = len(outcomes)
    failed = sum(outcomes.count(code, 0, phase.processed) for code in faults.FAILURES)
    completed = phase.processed - failed
    if state in ("expired", "cancelled"):
        failed += total - phase.processed  # unfinished requests are error-file lines too
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
