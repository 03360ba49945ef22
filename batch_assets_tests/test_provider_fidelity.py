"""Adapter and wire-format side of provider fidelity (issue #8): what the real services do, as the
emulator reproduces it, read correctly by our adapters and formats. Each behaviour is forced with an
emulator knob (all delays zero), never timed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from batch_assets.emulator.testing import EmulatorHandle, running_emulator
from batch_assets.pipeline.collect.ingest import stage_result_file
from batch_assets.providers.contract import (
    JOB_KEY_METADATA,
    CreateOutcome,
    CreateRequest,
    InputKind,
    JobRef,
    JobState,
)
from batch_assets.providers.registry import wire_format
from batch_assets.resources import ProvidersResource

from .conftest import WIRE_EMULATOR

pytestmark = pytest.mark.usefixtures("no_emulator_left_running")

INSTANT = {**WIRE_EMULATOR, "queue_delay_s": 0, "seconds_per_request": 0, "finalize_delay_s": 0, "cancel_delay_s": 0}
MODEL = {"anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash"}
ENDPOINT = {"anthropic": "/v1/messages", "gemini": "generateContent"}


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with running_emulator(tmp_path / "emulator", **INSTANT) as emu:
        yield emu


def adapter_for(emu: EmulatorHandle, provider: str):
    return ProvidersResource(emulator_url=emu.base_url, max_retries=0).adapter(provider)


def normalize(path: Path, provider: str, endpoint: str) -> list[dict[str, Any]]:
    """Every line of a result file through the real ingest envelope and parse extraction."""
    fmt = wire_format(provider, endpoint)
    conn = duckdb.connect()
    stage_result_file(conn, str(path), fmt)
    cur = conn.execute(f"""
        SELECT a.*, CASE WHEN coalesce(status_code BETWEEN 200 AND 299, false) THEN NULL
                         ELSE {fmt.failure_class_sql} END AS failure_class
        FROM (SELECT r.line_no, r.request_id, r.status_code, r.error, {fmt.answer_sql("r")} FROM _in r) a
        ORDER BY line_no
    """)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def write_shard(tmp_path: Path, provider: str, requests: list[dict[str, Any]]) -> Path:
    path = tmp_path / f"{provider}-shard.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    return path


def create(adapter, provider: str, shard: Path, job_key: str, inline_max_bytes: int = 0, model: str | None = None):
    prepared = adapter.prepare_input(shard, job_key, ENDPOINT[provider], inline_max_bytes)
    lines = sum(1 for line in shard.read_text(encoding="utf-8").splitlines() if line.strip())
    result = adapter.create(
        CreateRequest(job_key, ENDPOINT[provider], model or MODEL[provider], "24h", lines, {JOB_KEY_METADATA: job_key}),
        prepared,
    )
    assert result.outcome == CreateOutcome.CREATED, result
    return result.snapshot, prepared


def gemini_line(key: str, text: str, **request: Any) -> dict[str, Any]:
    return {"key": key, "request": {"contents": [{"role": "user", "parts": [{"text": text}]}], **request}}


# --- Anthropic: the rarer stop reasons ------------------------------------------------------------


@pytest.mark.slow
def test_anthropic_cut_off_stop_reasons_read_as_length_and_refusal_as_content_filter(
    emulator: EmulatorHandle, tmp_path: Path
) -> None:
    emulator.configure(
        anthropic_context_window_exceeded_rate=0.25, anthropic_pause_turn_rate=0.25, anthropic_refusal_rate=0.25
    )
    adapter = adapter_for(emulator, "anthropic")
    shard = write_shard(
        tmp_path,
        "anthropic",
        [
            {
                "custom_id": f"r{i}",
                "params": {
                    "model": MODEL["anthropic"],
                    "max_tokens": 64,
                    "messages": [{"role": "user", "content": f"Ticket {i}"}],
                },
            }
            for i in range(40)
        ],
    )
    snap, _ = create(adapter, "anthropic", shard, "job-a")
    assert snap.terminal and snap.results_ready
    (out,) = adapter.stream_results(JobRef(snap.provider_batch_id), tmp_path / "raw", "a")
    reasons = {
        json.loads(line)["custom_id"]: json.loads(line)["result"]["message"]["stop_reason"]
        for line in out.path.read_text(encoding="utf-8").splitlines()
    }
    rows = {r["request_id"]: r for r in normalize(out.path, "anthropic", "/v1/messages")}
    expected = {
        "end_turn": "stop",
        "model_context_window_exceeded": "length",
        "pause_turn": "length",
        "refusal": "content_filter",
    }
    assert set(reasons.values()) == set(expected)
    for custom_id, reason in reasons.items():
        row = rows[custom_id]
        assert row["status_code"] == 200 and row["finish_reason"] == expected[reason], (reason, row)
        assert (row["refusal"] is not None) == (reason == "refusal")


# --- DashScope: error-file lines in either shape -----------------------------------------------------


def test_dashscope_error_lines_in_the_openai_shape_and_with_error_code_and_error_msg(tmp_path: Path) -> None:
    lines = [
        {
            "id": "l1",
            "custom_id": "a",
            "response": None,
            "error": {"code": "Throttling", "message": "Requests throttled"},
        },
        {
            "id": "l2",
            "custom_id": "b",
            "response": {
                "status_code": 400,
                "request_id": "q2",
                "body": {"error": {"code": "DataInspectionFailed", "message": "inappropriate content"}},
            },
            "error": None,
        },
        {"id": "l3", "custom_id": "c", "response": None, "error_code": "Arrearage", "error_msg": "account in arrears"},
        {
            "id": "l4",
            "custom_id": "d",
            "response": None,
            "error": {"error_code": "InvalidParameter", "error_msg": "messages must not be empty"},
        },
        {
            "id": "l5",
            "custom_id": "e",
            "response": {
                "status_code": 400,
                "request_id": "q5",
                "body": {
                    "code": "data_inspection_failed",
                    "message": "Input data may contain inappropriate content.",
                    "request_id": "q5",
                },
            },
        },
        {
            "id": "l6",
            "custom_id": "f",
            "response": {
                "status_code": 200,
                "request_id": "q6",
                "body": {
                    "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                },
            },
            "error": None,
        },
    ]
    path = tmp_path / "dashscope-errors.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    rows = {r["request_id"]: r for r in normalize(path, "dashscope", "/v1/chat/completions")}
    got = {k: (r["error_code"], r["error_message"], r["failure_class"]) for k, r in rows.items()}
    assert got == {
        "a": ("Throttling", "Requests throttled", "rate_or_capacity_error"),
        "b": ("DataInspectionFailed", "inappropriate content", "content_policy_error"),
        "c": ("Arrearage", "account in arrears", "account_error"),
        "d": ("InvalidParameter", "messages must not be empty", "validation_error"),
        "e": ("data_inspection_failed", "Input data may contain inappropriate content.", "content_policy_error"),
        "f": (None, None, None),
    }
    assert rows["f"]["content"] == "ok" and rows["f"]["error"] is None
    # The same lines read as OpenAI's keep OpenAI's reading (no DashScope field names there).
    openai_rows = {r["request_id"]: r for r in normalize(path, "openai", "/v1/chat/completions")}
    assert openai_rows["a"]["error_code"] == "Throttling" and openai_rows["c"]["error_code"] is None


# --- Gemini: usage of thinking models ------------------------------------------------------------------


@pytest.mark.slow
def test_gemini_output_tokens_count_thoughts(emulator: EmulatorHandle, tmp_path: Path) -> None:
    emulator.configure(gemini_thinking_models=["gemini-2.5-*"], gemini_cached_token_fraction=0.5)
    adapter = adapter_for(emulator, "gemini")
    shard = write_shard(
        tmp_path,
        "gemini",
        [
            gemini_line("think", "Ticket 1"),
            gemini_line("plain", "Ticket 2", generationConfig={"thinkingConfig": {"thinkingBudget": 0}}),
        ],
    )
    snap, prepared = create(adapter, "gemini", shard, "job-g")
    assert prepared.kind == InputKind.FILE and snap.results_ready
    (out,) = adapter.stream_results(
        JobRef(snap.provider_batch_id, output_file_id=snap.output_file_id), tmp_path / "raw", "g"
    )
    usage = {
        json.loads(line)["key"]: json.loads(line)["response"]["usageMetadata"]
        for line in out.path.read_text(encoding="utf-8").splitlines()
    }
    rows = {r["request_id"]: r for r in normalize(out.path, "gemini", "generateContent")}
    think = usage["think"]
    assert think["thoughtsTokenCount"] > 0
    assert rows["think"]["output_tokens"] == think["candidatesTokenCount"] + think["thoughtsTokenCount"]
    assert rows["think"]["input_tokens"] == think["promptTokenCount"]
    assert "thoughtsTokenCount" not in usage["plain"]
    assert rows["plain"]["output_tokens"] == usage["plain"]["candidatesTokenCount"]
    # Kept apart too: the thoughts (0 where the service leaves the count out) and the cached prompt tokens.
    assert (rows["think"]["thinking_tokens"], rows["plain"]["thinking_tokens"]) == (think["thoughtsTokenCount"], 0)
    assert rows["think"]["cached_input_tokens"] == think["cachedContentTokenCount"] > 0


# --- OpenAI: reasoning models' usage -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("endpoint", ["/v1/chat/completions", "/v1/responses"])
def test_openai_reasoning_tokens_are_kept_apart_inside_output(
    emulator: EmulatorHandle, tmp_path: Path, endpoint: str
) -> None:
    adapter = adapter_for(emulator, "openai")
    chat = endpoint == "/v1/chat/completions"

    def run(model: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """One single-line batch (a batch holds one model) -> (normalized row, the line's usage)."""
        body = (
            {"model": model, "messages": [{"role": "user", "content": "Ticket 1"}], "max_completion_tokens": 2000}
            if chat
            else {"model": model, "input": "Ticket 1", "max_output_tokens": 2000}
        )
        shard = write_shard(
            tmp_path, f"openai-{model}", [{"custom_id": model, "method": "POST", "url": endpoint, "body": body}]
        )
        job_key = f"job-{model}"
        prepared = adapter.prepare_input(shard, job_key, endpoint, 0)
        result = adapter.create(
            CreateRequest(job_key, endpoint, model, "24h", 1, {JOB_KEY_METADATA: job_key}), prepared
        )
        assert result.outcome == CreateOutcome.CREATED, result
        snap = result.snapshot
        for _ in range(200):
            if snap.results_ready or snap.terminal:
                break
            snap = adapter.poll(JobRef(snap.provider_batch_id), snap.state)
        assert snap.results_ready, snap
        files = adapter.stream_results(
            JobRef(snap.provider_batch_id, output_file_id=snap.output_file_id), tmp_path / "raw", model
        )
        (out,) = [f for f in files if f.kind == "output"]
        (row,) = normalize(out.path, "openai", endpoint)
        (line,) = out.path.read_text(encoding="utf-8").splitlines()
        return row, json.loads(line)["response"]["body"]["usage"]

    row, usage = run("o3-mini")
    reasoning = usage["completion_tokens_details" if chat else "output_tokens_details"]["reasoning_tokens"]
    assert reasoning > 0 and row["thinking_tokens"] == reasoning
    assert row["output_tokens"] > reasoning  # billed output includes the reasoning
    assert row["cached_input_tokens"] == 0
    plain, _ = run("gpt-4o-mini")
    assert (plain["thinking_tokens"], plain["cached_input_tokens"]) == (0, 0)


# --- Gemini: a failed batch's cause, read from the operation as sent ---------------------------------


@pytest.mark.slow
def test_gemini_failed_batch_error_is_read_from_the_raw_operation(emulator: EmulatorHandle, tmp_path: Path) -> None:
    from batch_assets.providers.gemini.formats import CAPACITY_CODES

    adapter = adapter_for(emulator, "gemini")
    emulator.configure(enqueued_token_limit={MODEL["gemini"]: 1})
    snap, _ = create(adapter, "gemini", write_shard(tmp_path, "gemini", [gemini_line("k0", "Ticket 0")]), "job-f")
    assert snap.state == JobState.FAILED and not snap.results_pending
    [error] = snap.errors
    assert error.code == "RESOURCE_EXHAUSTED" and "Enqueued token limit" in error.message
    assert error.code in CAPACITY_CODES  # parse classes the batch's items as rate_or_capacity_error
    polled = adapter.poll(JobRef(snap.provider_batch_id), JobState.SUBMITTED)
    assert polled.errors == snap.errors

    # A request file with a field the service does not know fails the batch: INVALID_ARGUMENT.
    emulator.configure(enqueued_token_limit=None)
    bad = write_shard(tmp_path, "gemini", [gemini_line("k0", "Ticket 0", temperature=0.2)])
    snap, _ = create(adapter, "gemini", bad, "job-v")
    [error] = snap.errors
    assert snap.state == JobState.FAILED and error.code == "INVALID_ARGUMENT" and "temperature" in error.message


# --- Gemini: inline only by opt-in, and never matched by position ------------------------------------------


@pytest.mark.slow
def test_gemini_inline_is_off_by_default_and_unkeyed_responses_are_left_out_and_counted(
    emulator: EmulatorHandle, tmp_path: Path
) -> None:
    from batch_assets.providers.registry import provider_limits

    assert provider_limits("gemini").max_inline_bytes == 0
    adapter = adapter_for(emulator, "gemini")
    shard = write_shard(tmp_path, "gemini", [gemini_line(f"k{i}", f"Ticket {i}") for i in range(20)])
    assert adapter.prepare_input(shard, "job-d", "generateContent", 0).kind == InputKind.FILE

    def inline_answers(job_key: str) -> list[tuple[str, str]]:
        snap, prepared = create(adapter, "gemini", shard, job_key, inline_max_bytes=1 << 20)
        assert prepared.kind == InputKind.INLINE and snap.results_ready
        (out,) = adapter.stream_results(JobRef(snap.provider_batch_id), tmp_path / "raw", job_key)
        lines = [json.loads(line) for line in out.path.read_text(encoding="utf-8").splitlines()]
        return [(line["key"], json.dumps(line["response"]["candidates"])) for line in lines]

    # Opted in: inline. Shuffled responses that all carry their key land by key, not by position.
    ordered = inline_answers("job-o")
    emulator.configure(inline_responses_shuffled=True)
    shuffled = inline_answers("job-s")
    assert [k for k, _ in ordered] == [f"k{i}" for i in range(20)] and shuffled != ordered
    assert sorted(shuffled) == sorted(ordered)

    # Some responses without their key: never matched by position; left out of the file and counted
    # (their requests then have no line and are sent again as a file: test_gemini_unkeyed_inline.py).
    emulator.configure(inline_responses_drop_keys_rate=0.3)
    snap, _ = create(adapter, "gemini", shard, "job-u", inline_max_bytes=1 << 20)
    (out,) = adapter.stream_results(JobRef(snap.provider_batch_id), tmp_path / "raw", "u")
    keys = [json.loads(line)["key"] for line in out.path.read_text(encoding="utf-8").splitlines()]
    assert 0 < out.unmatched_lines < 20 and len(keys) == 20 - out.unmatched_lines
    assert set(keys) < {f"k{i}" for i in range(20)} and len(set(keys)) == len(keys)
    answers = dict(shuffled)
    for line in out.path.read_text(encoding="utf-8").splitlines():  # each by its own key
        row = json.loads(line)
        assert json.dumps(row["response"]["candidates"]) == answers[row["key"]]


# --- Gemini: SUCCEEDED before its results exist ------------------------------------------------------


@pytest.mark.slow
def test_a_job_that_succeeded_before_its_results_exist_is_collected_later(
    emulator: EmulatorHandle, warehouse, tmp_path: Path
) -> None:
    from batch_assets.demo import seed_kb_articles
    from batch_assets.ledger.warehouse import fetch_dicts
    from batch_assets.pipeline.collect.ingest import collect_raw_results
    from batch_assets.pipeline.collect.parse import parse_results
    from batch_assets.pipeline.collect.poll import poll_jobs
    from batch_assets.pipeline.freeze.manifest import freeze_manifest
    from batch_assets.pipeline.send.shards import cut_shards
    from batch_assets.pipeline.send.submit import submit_pending
    from batch_assets.spec.resolve import load_all_tasks

    day = "2026-11-20"
    with warehouse.connect() as conn:
        seed_kb_articles(conn, days=1, per_day=10)
    task = load_all_tasks()["kb_embeddings"]
    task_id = task.task_id(day)
    adapter = adapter_for(emulator, "gemini")
    emulator.configure(succeeded_before_results_s=1e9)
    freeze_manifest(warehouse, task, day)
    cut_shards(warehouse, task, day)
    submit_pending(warehouse, task, day, adapter)
    poll_jobs(warehouse, lambda _p: adapter, task_id=task_id)

    def job() -> dict:
        with warehouse.connect() as conn:
            [row] = fetch_dicts(conn, "SELECT * FROM ledger.provider_job WHERE task_id = ?", [task_id])
            row["raw_files"] = conn.execute(
                "SELECT count(*) FROM ledger.raw_file WHERE job_key = ?", [row["job_key"]]
            ).fetchone()[0]
        return row

    first = job()
    assert (first["state"], first["results_ready"], first["output_file_id"]) == ("COMPLETED", False, None)
    summary = collect_raw_results(warehouse, task, day, adapter)
    assert summary.downloaded_files == 0
    still = job()
    assert still["downloaded_at"] is None and still["raw_files"] == 0 and still["results_ready"] is False
    assert parse_results(warehouse, task, day).parsed == 0  # nothing frozen as done with nothing

    emulator.configure(succeeded_before_results_s=0)  # the results file appears
    summary = collect_raw_results(warehouse, task, day, adapter)
    done = job()
    assert summary.downloaded_files == 1 and done["downloaded_at"] is not None and done["results_ready"] is True
    assert done["output_file_id"] and done["terminal_seq"] == first["terminal_seq"]  # still the same end
    assert summary.lines > 0 and summary.by_status.get("ok", 0) > 0
    with warehouse.connect() as conn:
        events = conn.execute(
            "SELECT to_state FROM ledger.status_event WHERE job_key = ? ORDER BY observed_at", [done["job_key"]]
        ).fetchall()
    assert [e for (e,) in events].count("COMPLETED") == 1


# --- live mode is explicit ------------------------------------------------------------------------


@pytest.fixture
def clean_provider_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    from batch_assets.providers.registry import known_providers

    monkeypatch.delenv("BATCH_ASSETS_PROVIDER_MODE", raising=False)
    for name in known_providers():
        for var in (f"{name.upper()}_API_KEY", f"{name.upper()}_BASE_URL", f"BATCH_ASSETS_{name.upper()}_MODE"):
            monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_a_key_without_live_mode_stays_on_the_emulator(clean_provider_env: pytest.MonkeyPatch) -> None:
    from batch_assets.resources import EMULATOR_API_KEY, default_resources

    clean_provider_env.setenv("OPENAI_API_KEY", "sk-not-used")
    providers = default_resources()["providers"]
    assert not any(providers.is_live(p) for p in ("openai", "anthropic", "gemini", "dashscope"))
    assert providers.settings_for("openai").api_key == EMULATOR_API_KEY
    assert providers.endpoint_of("openai") == ("emulator", "http://127.0.0.1:8765")


def test_live_mode_globally_or_per_provider(clean_provider_env: pytest.MonkeyPatch) -> None:
    from batch_assets.resources import default_resources

    env = clean_provider_env
    env.setenv("OPENAI_API_KEY", "sk-live-secret")
    env.setenv("BATCH_ASSETS_OPENAI_MODE", "live")
    providers = default_resources()["providers"]
    assert providers.is_live("openai") and not providers.is_live("gemini")
    assert providers.settings_for("openai").api_key == "sk-live-secret"
    assert providers.endpoint_of("openai") == ("live", "https://api.openai.com")

    for name in ("openai", "anthropic", "gemini", "dashscope"):
        env.setenv(f"{name.upper()}_API_KEY", f"key-{name}")
    env.setenv("BATCH_ASSETS_PROVIDER_MODE", "live")
    env.setenv("BATCH_ASSETS_GEMINI_MODE", "emulator")  # a provider's own mode wins
    env.setenv("DASHSCOPE_BASE_URL", "https://user:pw@dashscope.aliyuncs.com/compatible-mode/v1?x=1")
    providers = default_resources()["providers"]
    assert [p for p in ("openai", "anthropic", "gemini", "dashscope") if providers.is_live(p)] == [
        "openai",
        "anthropic",
        "dashscope",
    ]
    assert providers.endpoint_of("dashscope") == ("live", "https://dashscope.aliyuncs.com")  # host only
    assert providers.endpoint_of("anthropic") == ("live", "https://api.anthropic.com")
    assert "key-" not in repr(providers)


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {"BATCH_ASSETS_PROVIDER_MODE": "live"},
            "'openai' is in live mode but OPENAI_API_KEY is not set. Fix: set "
            "OPENAI_API_KEY, or run it against the emulator",
        ),
        ({"BATCH_ASSETS_GEMINI_MODE": "live", "OPENAI_API_KEY": "k"}, "GEMINI_API_KEY is not set"),
        (
            {"BATCH_ASSETS_PROVIDER_MODE": "production"},
            "BATCH_ASSETS_PROVIDER_MODE='production' is not a provider mode",
        ),
    ],
)
def test_live_mode_without_a_key_refuses_to_load(
    clean_provider_env: pytest.MonkeyPatch, variables: dict[str, str], message: str
) -> None:
    from batch_assets.definitions import defs
    from batch_assets.resources import ProviderConfigurationError, ProvidersResource

    for name, value in variables.items():
        clean_provider_env.setenv(name, value)
    with pytest.raises(Exception) as raised:  # Dagster wraps what a defs module raises in its own error
        defs()
    causes = []
    error: BaseException | None = raised.value
    while error is not None:
        causes.append(error)
        error = error.__cause__ or error.__context__
    [cause] = [c for c in causes if isinstance(c, ProviderConfigurationError)]
    assert message in str(cause)
    # The resource itself refuses too, whatever builds it.
    with pytest.raises(ProviderConfigurationError, match="ANTHROPIC_API_KEY"):
        ProvidersResource(mode="live").adapter("anthropic")


def test_the_ledger_records_where_each_job_went(warehouse) -> None:
    from batch_assets.ledger.jobs import claim_new_intent, insert_job_intent
    from batch_assets.providers.contract import ClientSettings
    from batch_assets.providers.registry import job_endpoint

    with warehouse.connect() as conn:
        insert_job_intent(
            conn,
            "j1",
            "t_1",
            "s1",
            "openai",
            "/v1/chat/completions",
            endpoint_mode="live",
            endpoint_url="https://api.openai.com/v1?key=secret",
            request_options={"response_format": "json_schema"},
        )
        insert_job_intent(
            conn,
            "j2",
            "t_1",
            "s2",
            "openai",
            "/v1/chat/completions",
            *job_endpoint("openai", ClientSettings("k", "http://127.0.0.1:8765/v1")),
            request_options={},
        )
        # Live without a base URL: the SDK's default host; never the credentials of a URL.
        assert job_endpoint("gemini", ClientSettings("k", mode="live")) == (
            "live",
            "https://generativelanguage.googleapis.com",
        )
        assert claim_new_intent(
            conn,
            "j3",
            "t_1",
            "s3",
            "gemini",
            "generateContent",
            "run-1",
            endpoint_mode="live",
            endpoint_url="https://user:pw@generativelanguage.googleapis.com/v1beta",
            request_options={"structured_output": "response_schema"},
        )
        rows = conn.execute(
            "SELECT job_key, endpoint_mode, endpoint_url, request_options FROM ledger.provider_job ORDER BY 1"
        ).fetchall()
        with pytest.raises(ValueError, match="endpoint_mode"):
            insert_job_intent(conn, "j4", "t_1", "s4", "openai", "/v1/chat/completions", endpoint_mode="production")
    assert rows == [
        ("j1", "live", "https://api.openai.com", '{"response_format": "json_schema"}'),
        ("j2", "emulator", "http://127.0.0.1:8765", "{}"),
        ("j3", "live", "https://generativelanguage.googleapis.com", '{"structured_output": "response_schema"}'),
    ]


# --- Gemini: request lines exactly per the REST requests -----------------------------------------------


def _as_gemini(task, schema_field: str = "response_json_schema"):
    """A demo task sent to Gemini instead (its output kind decides the endpoint)."""
    from dataclasses import replace

    from batch_assets.providers.registry import provider_limits
    from batch_assets.spec.model import ProviderOptionsSpec

    embedding = task.spec.output.kind == "embedding"
    spec = task.spec.model_copy(
        update={
            "provider": "gemini",
            "endpoint": "embedContent" if embedding else "generateContent",
            "model": "gemini-embedding-001" if embedding else MODEL["gemini"],
            "provider_options": ProviderOptionsSpec(gemini_schema_field=schema_field),
        }
    )
    return replace(task, spec=spec, limits=provider_limits("gemini"))


def _rendered_lines(task, n: int = 3) -> list[dict[str, Any]]:
    from batch_assets.pipeline.freeze.render import request_line_sql

    rows = (
        duckdb.connect()
        .execute(
            f"SELECT {request_line_sql(task)} FROM (SELECT 'r' || i AS request_id, 'Prompt ' || i || ' \"quoted\"' "
            f"AS prompt_text FROM range({n}) t(i))"
        )
        .fetchall()
    )
    return [json.loads(line) for (line,) in rows]


@pytest.mark.parametrize("schema_field", ["response_json_schema", "response_schema"])
def test_every_demo_task_renders_gemini_lines_with_only_known_fields(schema_field: str) -> None:
    from google.genai import types

    from batch_assets.providers.gemini.emulator.fields import unknown_field
    from batch_assets.providers.gemini.emulator.requests import EMBED
    from batch_assets.spec.resolve import load_all_tasks

    kinds = set()
    for name, original in sorted(load_all_tasks().items()):
        task = _as_gemini(original, schema_field) if original.spec.provider != "gemini" else original
        for line in _rendered_lines(task):
            assert set(line) == {"key", "request"}, name
            request = line["request"]
            kind = EMBED if task.spec.endpoint == "embedContent" else "generate"
            assert unknown_field(kind, request) is None, (name, unknown_field(kind, request))
            # camelCase throughout (proto JSON takes both; the REST reference writes camelCase).
            assert all("_" not in k for k in request) and all("_" not in k for k in request.get("generationConfig", {}))
            kinds.add(task.spec.output.kind)
            if task.spec.output.kind == "json":
                config = request["generationConfig"]
                wanted, other = (
                    ("responseSchema", "responseJsonSchema")
                    if schema_field == "response_schema"
                    else ("responseJsonSchema", "responseSchema")
                )
                assert wanted in config and other not in config
                if schema_field == "response_schema":  # a valid Schema in the SDK's own model
                    types.Schema.model_validate(config["responseSchema"])
                    assert config["responseSchema"]["type"] == "OBJECT"
                else:
                    assert config["responseJsonSchema"] == task.output_schema
    assert kinds == {"json", "text", "embedding"}


@pytest.mark.slow
@pytest.mark.parametrize("schema_field", ["response_json_schema", "response_schema"])
def test_gemini_structured_output_in_either_schema_field_runs_on_the_strict_emulator(
    schema_field: str, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    from batch_assets.spec.resolve import load_all_tasks

    assert emulator.settings.gemini_strict_request_fields
    task = _as_gemini(load_all_tasks()["ticket_triage"], schema_field)
    shard = write_shard(tmp_path, "gemini", _rendered_lines(task, 4))
    adapter = adapter_for(emulator, "gemini")
    for job_key, inline in (("job-file", 0), ("job-inline", 1 << 20)):
        snap, prepared = create(adapter, "gemini", shard, job_key, inline_max_bytes=inline)
        assert prepared.kind == (InputKind.INLINE if inline else InputKind.FILE)
        assert snap.state == JobState.COMPLETED and not snap.errors, snap
        (out,) = adapter.stream_results(
            JobRef(snap.provider_batch_id, output_file_id=snap.output_file_id), tmp_path / "raw", job_key
        )
        rows = normalize(out.path, "gemini", "generateContent")
        assert len(rows) == 4 and all(r["status_code"] == 200 and json.loads(r["content"]) for r in rows)


def test_provider_options_apply_to_their_provider_only_and_enter_the_input_hash() -> None:
    from pydantic import ValidationError

    from batch_assets.pipeline.freeze.render import input_hash_sql
    from batch_assets.spec.model import TaskSpec
    from batch_assets.spec.resolve import load_all_tasks

    task = load_all_tasks()["ticket_triage"]
    data = task.spec.model_dump(exclude_unset=True)
    with pytest.raises(ValidationError, match="provider_options.gemini_schema_field applies to provider 'gemini' only"):
        TaskSpec.model_validate({**data, "provider_options": {"gemini_schema_field": "response_schema"}})
    default = _as_gemini(task)
    assert default.spec.provider_options.non_default() == {}
    assert input_hash_sql(_as_gemini(task, "response_schema")) != input_hash_sql(default)
    assert "gemini_schema_field" not in input_hash_sql(task)  # tasks on the defaults keep their hashes


@pytest.mark.slow
@pytest.mark.parametrize(
    ("knobs", "code", "failure_class"),
    [
        ({"enqueued_token_limit": {"gemini-embedding-001": 1}}, "RESOURCE_EXHAUSTED", "rate_or_capacity_error"),
        # The service's own fault (google.rpc INTERNAL, code 13): retried with backoff, not a bad input.
        ({"force_batch_status": "failed"}, "INTERNAL", "internal_error"),
    ],
)
def test_a_failed_gemini_batch_classes_its_items_by_the_operation_error(
    emulator: EmulatorHandle, warehouse, knobs: dict, code: str, failure_class: str
) -> None:
    from batch_assets.demo import seed_kb_articles
    from batch_assets.pipeline.collect.ingest import collect_raw_results
    from batch_assets.pipeline.collect.parse import parse_results
    from batch_assets.pipeline.freeze.manifest import freeze_manifest
    from batch_assets.pipeline.send.shards import cut_shards
    from batch_assets.pipeline.send.submit import submit_pending
    from batch_assets.spec.resolve import load_all_tasks

    day = "2026-11-20"
    with warehouse.connect() as conn:
        seed_kb_articles(conn, days=1, per_day=10)
    task = load_all_tasks()["kb_embeddings"]
    adapter = adapter_for(emulator, "gemini")
    assert task.spec.model == "gemini-embedding-001"
    emulator.configure(**knobs)
    freeze_manifest(warehouse, task, day)
    cut_shards(warehouse, task, day)
    submit_pending(warehouse, task, day, adapter)
    with warehouse.connect() as conn:
        [(state, errors)] = conn.execute("SELECT state, provider_errors FROM ledger.provider_job").fetchall()
    assert state == "FAILED" and json.loads(errors)[0]["code"] == code
    collect_raw_results(warehouse, task, day, adapter)
    summary = parse_results(warehouse, task, day)
    assert summary.synthesized > 0 and summary.by_class == {failure_class: summary.synthesized}


# --- OpenAI: what reasoning models refuse ----------------------------------------------------------


@pytest.mark.slow
def test_openai_reasoning_models_refuse_max_tokens_and_temperature(emulator: EmulatorHandle, tmp_path: Path) -> None:
    """The service answers 400 per line: `max_tokens` (unsupported_parameter) and a temperature other
    than 1 (unsupported_value); `max_completion_tokens` without a temperature is answered."""
    adapter = adapter_for(emulator, "openai")
    endpoint = "/v1/chat/completions"
    messages = [{"role": "user", "content": "Ticket 1"}]
    bodies = {
        "old": {"model": "o3-mini", "messages": messages, "max_tokens": 500, "temperature": 0.2},
        "temp": {"model": "o3-mini", "messages": messages, "max_completion_tokens": 500, "temperature": 0},
        "new": {"model": "o3-mini", "messages": messages, "max_completion_tokens": 500},
    }
    shard = write_shard(
        tmp_path,
        "openai-o3",
        [{"custom_id": k, "method": "POST", "url": endpoint, "body": b} for k, b in bodies.items()],
    )
    prepared = adapter.prepare_input(shard, "job-o3", endpoint, 0)
    result = adapter.create(
        CreateRequest("job-o3", endpoint, "o3-mini", "24h", 3, {JOB_KEY_METADATA: "job-o3"}), prepared
    )
    snap = result.snapshot
    for _ in range(200):
        if snap.results_ready or snap.terminal:
            break
        snap = adapter.poll(JobRef(snap.provider_batch_id), snap.state)
    files = adapter.stream_results(
        JobRef(snap.provider_batch_id, output_file_id=snap.output_file_id, error_file_id=snap.error_file_id),
        tmp_path / "raw",
        "o3",
    )
    rows = {r["request_id"]: r for f in files for r in normalize(f.path, "openai", endpoint)}
    assert rows["old"]["status_code"] == 400 and rows["old"]["error_code"] == "unsupported_parameter"
    assert rows["temp"]["status_code"] == 400 and rows["temp"]["error_code"] == "unsupported_value"
    assert rows["new"]["status_code"] == 200


@pytest.mark.slow
def test_a_reasoning_model_task_is_rendered_the_way_the_service_accepts(
    seeded_copy, ticket_task, adapter, run_partition, monkeypatch
) -> None:
    """ticket_triage on o3-mini: lines carry max_completion_tokens and no temperature, so every item is
    answered; the job records that the temperature was left out."""
    import dataclasses

    import batch_assets.pipeline.govern.send_gate as send_gate

    # A deployment that added o3-mini to openai's allow-list (the shipped list does not have it).
    monkeypatch.setattr(send_gate, "allowed_models", lambda provider: ["o3-mini", "gpt-4o-mini*"])
    # o3-mini has no price in prices.yaml: no budget cap to check it against.
    uncapped = ticket_task.spec.budget.model_copy(update={"max_cost_per_partition": None})
    spec = ticket_task.spec.model_copy(update={"model": "o3-mini", "budget": uncapped})
    task = dataclasses.replace(ticket_task, spec=spec)
    r = run_partition(seeded_copy, task, "2026-11-20", adapter)
    with seeded_copy.connect() as conn:
        classes = conn.execute(
            "SELECT error_code, count(*) FROM ledger.parsed_result WHERE error_class IS NOT NULL GROUP BY 1"
        ).fetchall()
        options = {
            json.loads(o)["temperature"]
            for (o,) in conn.execute("SELECT request_options FROM ledger.provider_job").fetchall()
        }
        shard_path = conn.execute("SELECT path FROM ledger.shard LIMIT 1").fetchone()[0]
    body = json.loads(Path(shard_path).read_text(encoding="utf-8").splitlines()[0])["body"]
    assert "temperature" not in body and "max_tokens" not in body and body["max_completion_tokens"] > 0
    assert options == {"omitted (reasoning model)"}
    assert not any(code in ("unsupported_parameter", "unsupported_value") for code, _ in classes), classes
    assert r.submitted_lines > 0 and r.in_flight == 0


# --- Gemini: an unspecified state keeps what we knew ---------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("previous", [JobState.SUBMITTED, JobState.RUNNING, JobState.FINALIZING])
def test_gemini_unspecified_state_read_through_the_sdk_keeps_the_previous_state(
    emulator: EmulatorHandle, tmp_path: Path, previous: JobState
) -> None:
    """A read answering BATCH_STATE_UNSPECIFIED says nothing about the batch: the snapshot keeps the
    state known before (not SUBMITTED by default), offers no results, and the next read moves on."""
    adapter = adapter_for(emulator, "gemini")
    shard = write_shard(tmp_path, "gemini", [gemini_line("a", "Ticket 1"), gemini_line("b", "Ticket 2")])
    snap, _ = create(adapter, "gemini", shard, "job-unspecified")
    assert snap.results_ready  # the instant emulator has finished it already
    emulator.configure(unspecified_state_reads=1)
    held = adapter.poll(JobRef(snap.provider_batch_id), previous)
    assert (held.state, held.results_ready, held.terminal) == (previous, False, False)
    assert emulator.settings.unspecified_state_reads == 0
    again = adapter.poll(JobRef(snap.provider_batch_id), held.state)
    assert again.state == JobState.COMPLETED and again.results_ready
