"""Gemini batches (`batches/<id>` long-running operations): create, get, list, cancel, delete.

Both job types share everything but the per-request answer: `batchGenerateContent` (answers are
GenerateContentResponses) and `asyncBatchEmbedContent` (answers are embeddings). Input comes from
an uploaded JSONL file (`inputConfig.fileName`) or inline (`inputConfig.requests.requests[]`).

The simulated clock is the shared one (`clock.Timeline`), mapped onto Gemini's states:
queued -> PENDING, running/finalizing -> RUNNING, done -> SUCCEEDED, expired -> EXPIRED,
cancelled -> CANCELLED (a pending cancel still shows the state it interrupted), and a batch with
batch-level errors turns FAILED when its queue delay ends. The app's `Worker` reads the input (the
batch stays PENDING until it has) and writes the results of a success, a line at a time, to a
staged file (the batch stays RUNNING until it has); the first read after the batch succeeded
publishes them: as `files/batch-<id>` for file input, inline for inline input, in input order
(see `processing_order` below) unless `inline_responses_shuffled` says otherwise. A small input
(under `background_min_bytes`) is worked on within the create call instead.
Knobs reproduce reported real-service quirks: `succeeded_before_results_s` (SUCCEEDED before the
results appear), `inline_responses_shuffled` and `inline_responses_drop_keys_rate` (inlined
responses out of order, some without `metadata.key`). EXPIRED and CANCELLED batches expose no
results ("no results can be retrieved", in the words of Google's Batch API docs); their
`batchStats` still count what was processed.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from batch_assets.emulator import clock, faults
from batch_assets.emulator.clock import Phase, Timeline
from batch_assets.emulator.settings import EmulatorSettings, RuntimeSettings, token_limit_for
from batch_assets.emulator.store import Record, Store
from batch_assets.emulator.worker import Worker, write_lines
from batch_assets.providers.gemini.emulator.bodies import PROMPT_BLOCKED, THOUGHT_OUT, UsageOptions, respond
from batch_assets.providers.gemini.emulator.fields import unknown_field
from batch_assets.providers.gemini.emulator.files import GeminiFileService
from batch_assets.providers.gemini.emulator.requests import (
    EMBED,
    GENERATE,
    is_embedding_model,
    prompt_of,
    request_error,
)
from batch_assets.providers.gemini.emulator.wire import (
    GRPC_CODES,
    counts,
    failed_precondition,
    google_error,
    invalid_argument,
    page_after,
    page_token,
    random_id,
    resource_id,
    rfc3339,
)
from batch_assets.providers.gemini.emulator.wire import (
    field as get_field,
)

KIND = "gemini_batches"
DEFAULT_WINDOW_S = 48 * 3600  # batches still pending or running after 48 hours expire
_TYPE_PREFIX = "type.googleapis.com/google.ai.generativelanguage.v1main."
_TYPES = {
    GENERATE: ("GenerateContentBatch", "GenerateContentBatchOutput"),
    EMBED: ("EmbedContentBatch", "EmbedContentBatchOutput"),
}
_VERBS = {GENERATE: "batchGenerateContent", EMBED: "asyncBatchEmbedContent"}
PENDING, RUNNING, SUCCEEDED = "BATCH_STATE_PENDING", "BATCH_STATE_RUNNING", "BATCH_STATE_SUCCEEDED"
FAILED, CANCELLED, EXPIRED = "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED"
UNSPECIFIED = "BATCH_STATE_UNSPECIFIED"
_STATES = {
    clock.QUEUED: PENDING,
    clock.RUNNING: RUNNING,
    clock.FINALIZING: RUNNING,  # Gemini has no finalizing state
    clock.DONE: SUCCEEDED,
    clock.EXPIRED: EXPIRED,
    clock.CANCELLED: CANCELLED,
}
_HOLD_S = 1e-6  # how far before a step a batch waiting on the worker is shown
_ENDED = {SUCCEEDED: None, CANCELLED: "The batch was cancelled.", EXPIRED: "The batch expired before it finished."}


@dataclass
class Item:
    key: str | None
    metadata: dict[str, Any] | None  # inline requests' metadata, echoed in their responses
    request: dict[str, Any]


@dataclass
class ParsedInput:
    items: list[Item] = field(default_factory=list)
    error: str | None = None  # why the whole batch fails


def processing_order(count: int) -> list[int]:
    """Gemini writes results in input order (the API reference says so for both the responses
    file and inlined responses, and inlined embeddings carry no key to match them by), so the
    `shuffle_output` knob, which imitates OpenAI, does not apply here."""
    return faults.processing_order(count, "", shuffle=False)


class GeminiBatchService:
    def __init__(self, store: Store, files: GeminiFileService, runtime: RuntimeSettings, worker: Worker) -> None:
        self.store = store
        self.files = files
        self.runtime = runtime
        self.worker = worker

    # --- create -------------------------------------------------------------------------------

    def create(self, kind: str, model: str, body: Any) -> dict[str, Any]:
        """Create a batch from a `models/{model}:batchGenerateContent` (or embed) request body;
        returns its Operation."""
        model = _check_model(kind, model)
        batch = body.get("batch") if isinstance(body, dict) else None
        if not isinstance(batch, dict):
            raise invalid_argument(f"* {_request_name(kind)}.batch: batch is required.\n")
        config = get_field(batch, "inputConfig")
        file_name = get_field(config, "fileName")
        requests = get_field(get_field(config, "requests"), "requests")
        if (file_name is None) == (requests is None):
            raise invalid_argument(
                f"* {_request_name(kind)}.batch.input_config: exactly one of file_name or requests must be set.\n"
            )
        display_name = get_field(batch, "displayName")
        if display_name is not None and not isinstance(display_name, str):
            raise invalid_argument(f"* {_request_name(kind)}.batch.display_name: must be a string.\n")
        priority = get_field(batch, "priority")
        with self.store.locked():
            if file_name is not None:
                named = isinstance(file_name, str) and file_name.startswith("files/")
                if not named or not resource_id(file_name, "files"):
                    raise invalid_argument(
                        f"* {_request_name(kind)}.batch.input_config.file_name: must be a file name like files/abc.\n"
                    )
                source = self.files.input_blob(file_name)
                data = None
            else:
                _inline_items(kind, requests)  # a malformed inline request rejects the call
                source = None
                data = json.dumps(requests, sort_keys=True, ensure_ascii=False).encode()
            settings = self.runtime.take_batch_settings()
            record, created = self._create(kind, model, display_name, file_name, priority, source, data, settings)
            self._schedule(record)
            # Results are written before any answer says SUCCEEDED (with no delays, this one may).
            self._refresh(record, created)
            return self._view(record, created)

    def _create(
        self,
        kind: str,
        model: str,
        display_name: str | None,
        file_name: str | None,
        priority: Any,
        source: str | None,
        data: bytes | None,
        settings: EmulatorSettings,
    ) -> tuple[Record, float]:
        """The batch's record; its input (the uploaded blob `source`, or inline `data`) is read later,
        by `_validate`."""
        created = clock.now()
        batch_id = random_id(36)
        # The batch keeps its own copy of the input, so deleting the uploaded file cannot break it.
        if source is not None:
            self.store.copy_blob(source, _input_blob(batch_id))
        else:
            self.store.put_blob(_input_blob(batch_id), data or b"")
        size = self.store.blob_path(_input_blob(batch_id)).stat().st_size
        window = settings.completion_window_s or DEFAULT_WINDOW_S
        record = {
            "id": batch_id,
            "kind": kind,
            "model": model,
            "display_name": display_name or f"batch-{batch_id}",
            "input_file": file_name,
            "priority": str(priority) if priority is not None else None,
            # Planned again, with the request count, once the input is read.
            "timeline": Timeline.plan(created, 0, settings, window).to_dict(),
            "window_s": window,
            "settings": settings.to_dict(),
            "validated": False,
            "work_in_call": size < settings.background_min_bytes,  # small inputs are worked on within the call
            "outcomes": "",  # input order, which is also processing order
            "input_sha": None,
            "prompt_tokens": 0,
            "duplicate_output_lines": settings.duplicate_output_lines,
            "item_error_status_names": settings.gemini_item_error_status_names,
            "speed": settings.speed,
            "thinking": thinks(model, settings),
            "cached_fraction": settings.gemini_cached_token_fraction,
            "inline_shuffled": settings.inline_responses_shuffled,
            "inline_drop_keys_rate": settings.inline_responses_drop_keys_rate,
            "error": None,
            "error_status": None,
            "cancel_requested_at": None,
            "staged": False,  # the worker has written the results of a successful ending
            "finalized": False,
            "output_file": None,
        }
        return self.store.add(KIND, record), created

    # --- background work ----------------------------------------------------------------------

    def resume(self) -> None:
        """Resubmit the unfinished work of every batch (an emulator restarted mid-way)."""
        with self.store.locked():
            for record in self.store.all(KIND):
                self._schedule(record)

    def _schedule(self, record: Record) -> None:
        """Run the job the batch waits on, if any: on the worker, or here for a small input.

        Call with the store lock held."""
        if record["finalized"]:
            return
        batch_id = record["id"]
        if not record.get("validated", True):
            key, job = f"gemini:validate:{batch_id}", lambda: self._validate(batch_id)
        elif record["error"] is None and not record.get("staged", False) and _succeeds(record):
            key, job = f"gemini:results:{batch_id}", lambda: self._generate(batch_id)
        else:
            return
        if record.get("work_in_call"):
            job()
        else:
            self.worker.submit(key, job)

    def _validate(self, batch_id: str) -> None:
        """Read the batch's input a line at a time: a batch-level error, each request's outcome and
        the token count. Runs on the worker; the batch reads PENDING until it is done."""
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record.get("validated", True):
                return
            kind, inline = record["kind"], record["input_file"] is None
            settings = EmulatorSettings(**record["settings"])
        blob = _input_blob(batch_id)
        input_sha = _sha256(self.store, blob)
        keys: list[str] = []
        invalid = bytearray()
        tokens = [0]

        def take(item: Item) -> None:
            keys.append(item.key if item.key is not None else f"#{len(keys)}")
            invalid.append(request_error(kind, item.request) is not None)
            tokens[0] += prompt_of(kind, item.request).tokens

        if inline:
            for item in _inline_items(kind, json.loads(self.store.read_blob(blob))):
                take(item)
            error_text = None
        else:
            with self.store.open_blob(blob) as lines:
                error_text = parse_file(lines, kind if settings.gemini_strict_request_fields else None, take).error
        # The draws run outside the store lock, so API calls go on meanwhile. The worker reads one
        # batch at a time; only a small batch worked on within its create call at that very moment
        # could read the same occurrence counts (`item_faults_by_occurrence`).
        outcomes = []
        occurrences = None
        if error_text is None:
            plan, occurrences = faults.plan_for(self.store, "gemini", input_sha, settings, keys)
            for index, key in enumerate(keys):
                injected = plan.outcome(key)  # drawn for every request: the rotation stays in input order
                if injected == faults.OK:
                    injected = _gemini_outcome(kind, plan, key, settings)
                outcomes.append(faults.INVALID_REQUEST if invalid[index] else injected)
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record.get("validated", True):
                return
            error = ("INVALID_ARGUMENT", error_text) if error_text else None
            error = error or self._capacity_error(record["model"], len(outcomes), tokens[0], settings, batch_id)
            timeline = Timeline.plan(record["timeline"]["created"], len(outcomes), settings, record["window_s"])
            record.update(
                {
                    "timeline": timeline.to_dict(),
                    "outcomes": "".join(outcomes),
                    "input_sha": input_sha,
                    "prompt_tokens": tokens[0],
                    "error": error[1] if error else None,
                    "error_status": error[0] if error else None,
                    "validated": True,
                }
            )
            if error is None and occurrences is not None:
                occurrences.count(keys)
            self.store.save(KIND, record)
            self._schedule(record)

    def _capacity_error(
        self, model: str, total: int, prompt_tokens: int, settings: EmulatorSettings, batch_id: str
    ) -> tuple[str, str] | None:
        """(status, message) of a batch-level failure the input itself does not cause."""
        if settings.force_batch_status == "failed":
            return "INTERNAL", "The batch failed (forced by the emulator's force_batch_status)."
        if total > settings.max_requests_per_batch:
            message = f"The batch has {total} requests; a batch may hold at most {settings.max_requests_per_batch}."
            return "INVALID_ARGUMENT", message
        limit = token_limit_for(settings.enqueued_token_limit, model)
        if limit is not None and prompt_tokens + self._enqueued_tokens(model, batch_id) > limit:
            return "RESOURCE_EXHAUSTED", (
                f"Enqueued token limit reached for {model}: the batch has {prompt_tokens} tokens and the limit "
                f"is {limit} enqueued tokens. Try again once some running batches have finished."
            )
        return None

    def _enqueued_tokens(self, model: str, batch_id: str) -> int:
        at = clock.now()
        return sum(
            r["prompt_tokens"]
            for r in self.store.all(KIND)
            if r["model"] == model
            and r["id"] != batch_id
            and r["error"] is None
            and self._phase(r, at).state not in clock.TERMINAL
        )

    # --- read, cancel, delete -----------------------------------------------------------------

    def get(self, name: str) -> dict[str, Any]:
        """The batch's Operation as of now (its results written first if it has just succeeded)."""
        with self.store.locked():
            record = self._record(name)
            at = clock.now()
            self._refresh(record, at)
            view = self._view(record, at)
        if self.runtime.take_unspecified_state_read():
            # [GUESS] The state enum's zero value, which google-genai's BatchJob can carry; what else the
            # service would send with it is unknown, so only the state changes.
            view["metadata"]["state"] = UNSPECIFIED
        return view

    def list_batches(self, size: int, token: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """Operations newest first; the token continues after the last batch of the previous page."""
        after = page_after(token)
        with self.store.locked():
            at = clock.now()
            records = [r for r in reversed(self.store.all(KIND)) if after is None or r["seq"] < after]
            page = records[:size]
            for record in page:
                self._refresh(record, at)
            views = [self._view(record, at) for record in page]
        for view in views:  # a listed batch is a read too (`unspecified_state_reads`)
            if self.runtime.take_unspecified_state_read():
                view["metadata"]["state"] = UNSPECIFIED
        return views, page_token(page[-1]["seq"]) if len(records) > size else None

    def cancel(self, name: str) -> None:
        with self.store.locked():
            record = self._record(name)
            at = clock.now()
            self._refresh(record, at)
            state = batch_state(record, at)
            if record["cancel_requested_at"] is not None or state == CANCELLED:
                return
            if state == SUCCEEDED and not record["finalized"]:
                return  # it has succeeded and only waits for its results file: too late to cancel
            if state not in (PENDING, RUNNING):
                raise failed_precondition(f"Batch batches/{record['id']} is in state {state} and cannot be cancelled.")
            record["cancel_requested_at"] = at
            self.store.save(KIND, record)

    def delete(self, name: str) -> None:
        """Forget the operation; like Google's, this does not cancel it or remove its results file."""
        with self.store.locked():
            record = self._record(name)
            self.store.remove(KIND, record["id"])
            self.store.drop_blob(_input_blob(record["id"]))
            self.store.drop_blob(_inline_output_blob(record["id"]))
            self.store.drop_blob(_staged_blob(record["id"]))

    def _record(self, name: str) -> Record:
        batch_id = name.removeprefix("batches/")
        found = self.store.get(KIND, batch_id)
        if found is None:
            raise google_error(404, "Requested entity was not found.", "NOT_FOUND")
        return found

    @staticmethod
    def _phase(record: Record, at: float) -> Phase:
        return Timeline.from_dict(record["timeline"]).phase(at, record["cancel_requested_at"])

    def _refresh(self, record: Record, at: float) -> None:
        """Publish the batch's results if it has just become terminal (cheap: the worker wrote them).

        A batch that succeeded on the clock before the worker finished its results is shown as
        still running until then (`_shown_at`)."""
        terminal = self._phase(record, at).state in clock.TERMINAL or _failed(record, at)
        if record["finalized"] or not terminal or not record.get("validated", True):
            return
        if batch_state(record, at) == SUCCEEDED:
            if not record.get("staged", True):
                self._schedule(record)
                return
            self._publish(record)
        else:
            self._drop_staged(record)
        record["finalized"] = True
        self.store.save(KIND, record)
        self.store.drop_blob(_input_blob(record["id"]))

    def _shown_at(self, record: Record, at: float) -> float:
        """Now, or just before the step the batch waits on the worker for: reading its input (it is
        PENDING until then) or writing the results of its success (RUNNING until then)."""
        timeline = Timeline.from_dict(record["timeline"])
        if not record.get("validated", True):
            return min(at, timeline.running - _HOLD_S)
        if record["finalized"] or record.get("staged", True) or _failed(record, at):
            return at
        phase = self._phase(record, at)
        if phase.state == clock.DONE:
            return min(at, phase.since - _HOLD_S)
        return at

    # --- results ------------------------------------------------------------------------------

    def _generate(self, batch_id: str) -> None:
        """Write the results of the batch's success to a staged blob, one line at a time (inlined
        responses: one JSON document, small by the inline limit). Runs on the worker."""
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record["finalized"] or record.get("staged", True) or not _succeeds(record):
                return
            snapshot = json.loads(json.dumps(record))
        inline = snapshot["input_file"] is None
        with self.store.blob_writer(_staged_blob(batch_id)) as sink:
            if inline:
                results = list(self._results(snapshot))
                sink.write(json.dumps(_inline_responses(snapshot, results), ensure_ascii=False).encode())
            else:
                self._write_lines(snapshot, sink)
        with self.store.locked():
            record = self.store.get(KIND, batch_id)
            if record is None or record["finalized"]:
                self.store.drop_blob(_staged_blob(batch_id))
                return
            record["staged"] = True
            self.store.save(KIND, record)

    def _results(self, record: Record) -> Iterator[tuple[Item, dict[str, Any]]]:
        """(item, response payload) for every request, in processing order, reading one at a time."""
        blob = _input_blob(record["id"])
        if record["input_file"] is None:
            items: Iterable[Item] = _inline_items(record["kind"], json.loads(self.store.read_blob(blob)))
        else:
            items = _file_items(self.store, blob)
        for index, item in zip(processing_order(len(record["outcomes"])), items, strict=False):
            result = respond(
                record["kind"],
                record["model"],
                item.request,
                record["outcomes"][index],
                # Stable across runs (not the random batch id): the same request draws the same answer.
                f"{item.key if item.key is not None else index}:{index}",
                status_names=record.get("item_error_status_names", False),
                usage=UsageOptions(record.get("thinking", False), record.get("cached_fraction", 0.0)),
            )
            yield item, result.payload

    def _write_lines(self, record: Record, sink: BinaryIO) -> None:
        rate = record["duplicate_output_lines"]
        duplicates = []
        lines = []
        for index, (item, payload) in enumerate(self._results(record)):
            line = _line(item.key, payload)
            if faults.duplicated(record["input_sha"], item.key or f"#{index}", rate):
                duplicates.append(line)
            lines.append(line)
            if len(lines) >= 256:
                write_lines(sink, lines)
                lines.clear()
        write_lines(sink, lines + duplicates)

    def _publish(self, record: Record) -> None:
        """Make the staged results the batch's output: a generated file, or its inlined responses."""
        staged = _staged_blob(record["id"])
        if record["input_file"] is None:
            self.store.move_blob(staged, _inline_output_blob(record["id"]))
            return
        timeline = Timeline.from_dict(record["timeline"])
        output_id = f"batch-{record['id']}"
        self.files.adopt_generated(output_id, staged, output_id, timeline.done)
        record["output_file"] = f"files/{output_id}"

    def _drop_staged(self, record: Record) -> None:
        self.store.drop_blob(_staged_blob(record["id"]))

    # --- wire shape ---------------------------------------------------------------------------

    def _view(self, record: Record, at: float) -> dict[str, Any]:
        """The `batches/<id>` Operation as of `at`; call with the store lock held."""
        at = self._shown_at(record, at)
        kind = record["kind"]
        timeline = Timeline.from_dict(record["timeline"])
        state = batch_state(record, at)
        phase = self._phase(record, at)
        metadata: dict[str, Any] = {
            "@type": _TYPE_PREFIX + _TYPES[kind][0],
            "model": record["model"],
            "displayName": record["display_name"],
        }
        if record["input_file"] is not None:
            metadata["inputConfig"] = {"fileName": record["input_file"]}
        output = self._output(record) if state == SUCCEEDED and self._results_shown(record, phase, at) else None
        if output is not None:
            metadata["output"] = output
        ended = _ended_at(record, state, phase, timeline)
        metadata["createTime"] = rfc3339(timeline.created)
        if ended is not None:
            metadata["endTime"] = rfc3339(ended)
        metadata["updateTime"] = rfc3339(_updated_at(record, state, phase, timeline, ended))
        metadata["batchStats"] = _stats(record, state, phase)
        metadata["state"] = state
        metadata["name"] = f"batches/{record['id']}"
        if record["priority"] is not None:
            metadata["priority"] = record["priority"]
        operation: dict[str, Any] = {"name": f"batches/{record['id']}", "metadata": metadata}
        if ended is None:
            return operation
        operation["done"] = True
        if output is not None:
            operation["response"] = {"@type": _TYPE_PREFIX + _TYPES[kind][1], **output}
        elif state == SUCCEEDED:
            pass  # succeeded, results not there yet (`succeeded_before_results_s`): done, no response [GUESS]
        elif state == FAILED:
            operation["error"] = {"code": GRPC_CODES[record["error_status"]], "message": record["error"]}
        else:
            status = "CANCELLED" if state == CANCELLED else "DEADLINE_EXCEEDED"
            operation["error"] = {"code": GRPC_CODES[status], "message": _ENDED[state]}
        return operation

    def _results_shown(self, record: Record, phase: Phase, at: float) -> bool:
        """Whether a SUCCEEDED batch shows its results yet.

        [GUESS] tidyverse/ellmer saw live Gemini batches read SUCCEEDED while `dest.file_name` was
        still missing, for a while. `succeeded_before_results_s` is read live (not snapshotted at
        create like the other knobs) so that lowering it reveals waiting results at once; it is
        measured in the batch's own simulated seconds from the moment it succeeded.
        """
        lag = self.runtime.current.succeeded_before_results_s
        return lag == 0 or at >= phase.since + lag / record.get("speed", 1.0)

    def _output(self, record: Record) -> dict[str, Any]:
        if record["output_file"] is not None:
            return {"responsesFile": record["output_file"]}
        responses = json.loads(self.store.read_blob(_inline_output_blob(record["id"])))
        return {"inlinedResponses": {"inlinedResponses": responses}}


# --- input ---------------------------------------------------------------------------------------


def parse_file(
    data: bytes | Iterable[bytes], strict_kind: str | None = None, on_item: Callable[[Item], None] | None = None
) -> ParsedInput:
    """Lines `{"key": ..., "request": {...}}`; a line that cannot be read fails the whole batch,
    and so, given `strict_kind` (the `gemini_strict_request_fields` knob), does a request with a
    field its kind of request does not have at that level (see `fields`).

    `data` is the file whole or as lines (an open file, read a line at a time); items go to
    `on_item` as they are read when given, else are kept in `items`."""
    parsed = ParsedInput()
    found = False
    lines = data.split(b"\n") if isinstance(data, bytes) else data
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            line = None
        if not isinstance(line, dict):
            parsed.error = f"Line {number} of the input file is not a JSON object."
            return parsed
        request = line.get("request")
        if not isinstance(request, dict):
            parsed.error = f"Line {number} of the input file has no 'request' object."
            return parsed
        unknown = unknown_field(strict_kind, request) if strict_kind is not None else None
        if unknown is not None:
            # [GUESS] the wording: Google's proto JSON parser error, with the line it is on.
            name, where = unknown
            parsed.error = (
                f'Line {number} of the input file: Invalid JSON payload received. Unknown name "{name}" '
                f"at '{where}': Cannot find field."
            )
            return parsed
        key = line.get("key")
        item = Item(key if isinstance(key, str) else None, None, request)
        found = True
        if on_item is None:
            parsed.items.append(item)
        else:
            on_item(item)
    if not found:
        parsed.error = "The input file is empty; it has no requests."
    return parsed


def _file_items(store: Store, blob: str) -> Iterator[Item]:
    """The items of a valid input file, read one line at a time."""
    with store.open_blob(blob) as lines:
        for raw in lines:
            if raw.strip():
                line = json.loads(raw)
                key = line.get("key")
                yield Item(key if isinstance(key, str) else None, None, line["request"])


def _sha256(store: Store, blob: str) -> str:
    digest = hashlib.sha256()
    with store.open_blob(blob) as source:
        while chunk := source.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _gemini_outcome(kind: str, plan: faults.FaultPlan, key: str, settings: EmulatorSettings) -> str:
    """A request's Gemini-only outcome, if the `gemini_*_rate` knobs draw one (the answer-shape ones
    for generateContent only)."""
    drawn = [(faults.PROVIDER_CANCELLED, settings.gemini_item_cancelled_rate)]
    if kind == GENERATE:
        drawn += [
            (PROMPT_BLOCKED, settings.gemini_prompt_blocked_rate),
            (THOUGHT_OUT, settings.gemini_thinking_max_tokens_rate),
        ]
    for outcome, rate in drawn:
        if rate > 0 and plan.draw(f"gemini_outcome:{outcome}", key) < rate:
            return outcome
    return faults.OK


def _succeeds(record: Record) -> bool:
    """Whether the batch, as things stand, ends SUCCEEDED (no cancel, no expiry): only then has it results."""
    timeline = Timeline.from_dict(record["timeline"])
    return record["cancel_requested_at"] is None and not timeline.will_expire


def _staged_blob(batch_id: str) -> str:
    return f"gemini-batch-{batch_id}.staged"


def _inline_items(kind: str, requests: Any) -> list[Item]:
    """Inline requests `[{"request": {...}, "metadata": {...}}]`, checked as the API checks them
    on create (a malformed one rejects the call)."""
    where = f"* {_request_name(kind)}.batch.input_config.requests.requests"
    if not isinstance(requests, list) or not requests:
        raise invalid_argument(f"{where}: at least one request is required.\n")
    items = []
    for index, entry in enumerate(requests):
        request = entry.get("request") if isinstance(entry, dict) else None
        if not isinstance(request, dict):
            raise invalid_argument(f"{where}[{index}].request: request is required.\n")
        metadata = entry.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise invalid_argument(f"{where}[{index}].metadata: must be an object.\n")
        key = metadata.get("key") if metadata else None
        items.append(Item(key if isinstance(key, str) else None, metadata, request))
    return items


def thinks(model: str, settings: EmulatorSettings) -> bool:
    """Whether `model` reports thinking tokens: names with "thinking", or matching a
    `gemini_thinking_models` pattern (e.g. `gemini-2.5-*`, whose models all think by default)."""
    bare = model.removeprefix("models/")
    return "thinking" in bare or any(fnmatch.fnmatchcase(bare, pattern) for pattern in settings.gemini_thinking_models)


def _check_model(kind: str, model: str) -> str:
    bare = model.removeprefix("models/")
    if not bare or "/" in bare:
        raise invalid_argument(f"* {_request_name(kind)}.model: model is required.\n")
    if is_embedding_model(bare) != (kind == EMBED):
        raise google_error(
            404,
            f"models/{bare} is not found, or is not supported for {_VERBS[kind]}. "
            "Call ListModels to see the list of available models and their supported methods.",
            "NOT_FOUND",
        )
    return f"models/{bare}"


def _request_name(kind: str) -> str:
    return "AsyncBatchEmbedContentRequest" if kind == EMBED else "BatchGenerateContentRequest"


def _line(key: str | None, payload: dict[str, Any]) -> str:
    return json.dumps({"key": key, **payload} if key is not None else payload, ensure_ascii=False)


def _inline_responses(record: Record, results: list[tuple[Item, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Inlined responses with each request's metadata; `inline_shuffled` / `inline_drop_keys_rate`
    reproduce googleapis/python-genai#1909 (responses not in request order) and #2008 (some
    responses without `metadata.key`): [GUESS] a stable permutation, and the key dropped from
    the metadata (the whole metadata when nothing else is left)."""
    responses = []
    for index, (item, payload) in enumerate(results):
        metadata = dict(item.metadata or {})
        if "key" in metadata and faults.unit_draw("drop_key", record["input_sha"], str(index)) < record.get(
            "inline_drop_keys_rate", 0.0
        ):
            del metadata["key"]
        responses.append({**payload, **({"metadata": metadata} if metadata else {})})
    if record.get("inline_shuffled"):
        order = faults.processing_order(len(responses), "inline:" + record["input_sha"], shuffle=True)
        responses = [responses[i] for i in order]
    return responses


def _input_blob(batch_id: str) -> str:
    return f"gemini-batch-{batch_id}.input"


def _inline_output_blob(batch_id: str) -> str:
    return f"gemini-batch-{batch_id}.responses.json"


# --- state ---------------------------------------------------------------------------------------


def _failed(record: Record, at: float) -> bool:
    # Batch-level errors surface when the queue delay ends, unless a cancel came first.
    timeline = Timeline.from_dict(record["timeline"])
    cancel_at = record["cancel_requested_at"]
    cancelled_first = cancel_at is not None and cancel_at < timeline.running
    return record["error"] is not None and at >= timeline.running and not cancelled_first


def batch_state(record: Record, at: float) -> str:
    if _failed(record, at):
        return FAILED
    timeline = Timeline.from_dict(record["timeline"])
    cancel_at = record["cancel_requested_at"]
    phase = timeline.phase(at, cancel_at)
    if phase.state == clock.CANCELLING:
        # Gemini shows no cancelling state: the batch stays as it was until the cancel lands.
        return PENDING if cancel_at is not None and cancel_at < timeline.running else RUNNING
    if record["error"] is not None and phase.state == clock.QUEUED:
        return PENDING
    return _STATES[phase.state]


def _ended_at(record: Record, state: str, phase: Phase, timeline: Timeline) -> float | None:
    if state == FAILED:
        return timeline.running
    if state in _ENDED:
        return phase.since
    return None


def _updated_at(record: Record, state: str, phase: Phase, timeline: Timeline, ended: float | None) -> float:
    if ended is not None:
        return ended
    if record["cancel_requested_at"] is not None:
        return record["cancel_requested_at"]
    return timeline.running if state == RUNNING else timeline.created


def _stats(record: Record, state: str, phase: Phase) -> dict[str, str]:
    outcomes = record["outcomes"]
    total = len(outcomes)
    if state == FAILED:
        return counts(requestCount=total)
    processed = phase.processed
    failed = sum(outcomes.count(code, 0, processed) for code in faults.FAILURES)
    return counts(
        requestCount=total,
        successfulRequestCount=processed - failed,
        failedRequestCount=failed,
        pendingRequestCount=total - processed,
    )
