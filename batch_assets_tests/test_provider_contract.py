"""The provider contract: one folder per provider found by the registry, the pipeline reached only
through contract + registry, and each adapter's create / find / poll / results behaviour on its
official SDK over HTTP against the emulator."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import duckdb
import pytest
from google.genai import types as genai_types

import batch_assets.providers as providers_pkg
from batch_assets.providers import registry
from batch_assets.providers.contract import (
    BatchError,
    ClientSettings,
    CreateOutcome,
    FindHints,
    FindOutcome,
    InputKind,
    JobRef,
    JobState,
    PreparedInput,
    ProviderDefinition,
    create_outcome_for_status,
)
from batch_assets.providers.gemini.adapter import snapshot_from_job
from batch_assets.providers.limits import ProviderLimits
from batch_assets.providers.wire import WireFormat
from batch_assets.resources import EMULATOR_API_KEY, ProviderConnection, ProvidersResource

from .provider_calls import ENDPOINT, MODEL, adapter_for, create_request, shard_file, wait_terminal

PROVIDERS_DIR = Path(providers_pkg.__file__).parent


# --- registry: one folder per provider -------------------------------------------------------------


def test_the_registry_finds_each_provider_in_its_own_folder():
    folders = {
        p.parent.name
        for p in PROVIDERS_DIR.glob("*/__init__.py")
        if "PROVIDER = ProviderDefinition(" in p.read_text(encoding="utf-8")
    }
    assert folders == set(registry.PROVIDERS) == {"openai", "dashscope", "anthropic", "gemini"}
    assert registry.known_providers() == registry.PROVIDERS
    for name in registry.PROVIDERS:
        folder = PROVIDERS_DIR / name
        assert {"adapter.py", "formats.py", "limits.yaml", "__init__.py"} <= {p.name for p in folder.iterdir()}
        definition = registry.provider_definition(name)
        assert isinstance(definition, ProviderDefinition) and definition.name == name
        assert definition.limits_path == folder / "limits.yaml"
        assert isinstance(registry.provider_limits(name), ProviderLimits)
        # Every endpoint the limits allow has a wire format, and nothing else does.
        assert set(definition.formats) == set(registry.provider_limits(name).endpoints)
        for endpoint in definition.formats:
            assert isinstance(registry.wire_format(name, endpoint), WireFormat)
        adapter = registry.build_adapter(name, ClientSettings("k", "http://127.0.0.1:9"))
        assert adapter.name == name
    # Limits keep their values (per provider, from its own file).
    assert registry.provider_limits("openai").max_requests_per_shard == 50_000
    assert registry.provider_limits("gemini").max_inline_bytes == 0  # file jobs unless a task opts in
    assert registry.provider_limits("dashscope").max_concurrent_jobs == 1000
    assert registry.provider_limits("anthropic").request_id_pattern == "^[a-zA-Z0-9_-]{1,64}$"
    # Where each lives on the emulator, and its live default.
    assert {n: registry.provider_definition(n).emulator_path for n in registry.PROVIDERS} == {
        "openai": "/v1",
        "dashscope": "/compatible-mode/v1",
        "anthropic": "",
        "gemini": "",
    }
    assert registry.provider_definition("dashscope").live_base_url.startswith("https://dashscope")


@pytest.mark.parametrize(
    "call",
    [
        lambda: registry.provider_definition("mistral"),
        lambda: registry.build_adapter("mistral", ClientSettings("k")),
        lambda: registry.wire_format("mistral", "/v1/chat/completions"),
        lambda: registry.provider_limits("mistral"),
        lambda: ProvidersResource().settings_for("mistral"),
    ],
)
def test_an_unknown_provider_is_refused_naming_the_known_ones(call):
    with pytest.raises(
        ValueError, match="unknown provider 'mistral'; known providers: openai, dashscope, anthropic, gemini"
    ):
        call()


def test_an_endpoint_a_provider_does_not_serve_has_no_wire_format():
    with pytest.raises(ValueError, match="no wire format for anthropic /v1/embeddings"):
        registry.wire_format("anthropic", "/v1/embeddings")


def test_each_provider_classifies_its_own_error_codes():
    """Capacity / content-policy codes live with the provider that emits them."""
    openai_sql = registry.wire_format("openai", "/v1/chat/completions").failure_class_sql
    dashscope_sql = registry.wire_format("dashscope", "/v1/chat/completions").failure_class_sql
    anthropic_sql = registry.wire_format("anthropic", "/v1/messages").failure_class_sql
    gemini_sql = registry.wire_format("gemini", "generateContent").failure_class_sql
    assert "'token_limit_exceeded'" in openai_sql and "'Throttling'" not in openai_sql
    assert "'Throttling'" in dashscope_sql and "'DataInspectionFailed'" in dashscope_sql
    assert "'overloaded_error'" in anthropic_sql and "RESOURCE_EXHAUSTED" not in anthropic_sql
    assert "'RESOURCE_EXHAUSTED'" in gemini_sql and "'SAFETY'" in gemini_sql
    conn = duckdb.connect()

    def classify(sql: str, status, code) -> str:
        return conn.execute(
            f"SELECT {sql} FROM (SELECT {'NULL' if status is None else status}::INTEGER AS status_code, "
            f"{'NULL' if code is None else repr(code)}::VARCHAR AS error_code)"
        ).fetchone()[0]

    assert classify(anthropic_sql, 529, "overloaded_error") == "rate_or_capacity_error"
    assert classify(gemini_sql, 400, "SAFETY") == "content_policy_error"
    assert classify(openai_sql, 400, "SAFETY") == "validation_error"
    assert classify(dashscope_sql, 400, "DataInspectionFailed") == "content_policy_error"
    assert classify(openai_sql, 500, None) == "internal_error"
    assert classify(openai_sql, 409, None) == "internal_error"
    assert classify(anthropic_sql, None, "batch_expired") == "expired"


# --- contract helpers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (400, CreateOutcome.FAILED),
        (401, CreateOutcome.FAILED),
        (404, CreateOutcome.FAILED),
        (413, CreateOutcome.FAILED),
        (408, CreateOutcome.UNKNOWN),
        (409, CreateOutcome.UNKNOWN),
        (429, CreateOutcome.UNKNOWN),
        (500, CreateOutcome.UNKNOWN),
        (503, CreateOutcome.UNKNOWN),
        (529, CreateOutcome.UNKNOWN),
    ],
)
def test_what_an_http_error_to_a_create_call_means(status, outcome):
    assert create_outcome_for_status(status) == outcome


def test_batch_errors_serialize_without_empty_fields():
    assert BatchError("token_limit_exceeded", "too many", line=3).as_dict() == {
        "code": "token_limit_exceeded",
        "message": "too many",
        "line": 3,
    }


def test_provider_settings_come_from_the_definitions_and_keys_stay_out_of_repr():
    res = ProvidersResource(
        emulator_url="http://127.0.0.1:1234/",
        connections={
            "dashscope": ProviderConnection(mode="live", api_key="sk-very-secret"),
            "openai": ProviderConnection(api_key="sk-not-live", base_url="http://proxy.example/v1"),
        },
    )
    assert res.is_live("dashscope") and not res.is_live("openai") and not res.is_live("gemini")
    live = res.settings_for("dashscope")
    assert (live.api_key, live.base_url) == ("sk-very-secret", registry.provider_definition("dashscope").live_base_url)
    # Not live: the emulator answers, under the provider's emulator path (a key or base URL alone never goes live).
    assert res.settings_for("openai").base_url == "http://127.0.0.1:1234/v1"
    assert res.settings_for("openai").api_key == EMULATOR_API_KEY
    assert res.settings_for("anthropic").base_url == "http://127.0.0.1:1234"
    assert "sk-very-secret" not in repr(res) and "sk-very-secret" not in repr(live)


# --- adapters against the emulator -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("provider", sorted(MODEL))
def test_create_is_unknown_on_5xx_and_429_failed_on_400_and_never_retried_by_the_sdk(provider, emulator, tmp_path):
    adapter = adapter_for(emulator, provider, max_retries=3)  # the SDK would retry 5xx/429 3 times ...
    path = shard_file(tmp_path, provider)
    prepared = adapter.prepare_input(path, "job-1", ENDPOINT[provider], inline_max_bytes=0)
    for status, outcome in (
        (503, CreateOutcome.UNKNOWN),
        (500, CreateOutcome.UNKNOWN),
        (429, CreateOutcome.UNKNOWN),
        (400, CreateOutcome.FAILED),
    ):
        emulator.configure(fail_next_requests=2, fail_status=status)
        result = adapter.create(create_request(provider, "job-1"), prepared)
        # ... but the create was tried exactly once: one injected failure is left.
        assert emulator.settings.fail_next_requests == 1, f"{provider} create was retried on {status}"
        emulator.configure(fail_next_requests=0)
        assert (result.outcome, result.status_code, result.snapshot) == (outcome, status, None)
        assert result.error is not None and result.error.message
    assert adapter.find_job("job-1", FindHints(created_after_unix=0, line_count=2)).outcome in (
        FindOutcome.ABSENT,
        FindOutcome.CANNOT_TELL,
    )
    created = adapter.create(create_request(provider, "job-1"), prepared)
    assert created.outcome == CreateOutcome.CREATED and created.snapshot.provider_batch_id
    assert not created.snapshot.terminal and not created.snapshot.results_ready


@pytest.mark.slow
def test_anthropic_create_sends_the_shard_lines_as_they_are(emulator, tmp_path):
    adapter = adapter_for(emulator, "anthropic")
    line = json.loads(shard_file(tmp_path, "anthropic", n=1).read_text(encoding="utf-8"))
    path = tmp_path / "lines.jsonl"
    # A blank line is skipped; the API checks each line (a bad custom_id refuses the whole create).
    path.write_text(json.dumps(line) + "\n\n" + json.dumps({**line, "custom_id": "r:1"}) + "\n", encoding="utf-8")
    prepared = adapter.prepare_input(path, "job-lines", ENDPOINT["anthropic"], inline_max_bytes=0)
    refused = adapter.create(create_request("anthropic", "job-lines"), prepared)
    assert (refused.outcome, refused.status_code) == (CreateOutcome.FAILED, 400)
    assert refused.error.code == "invalid_request_error" and refused.error.message.startswith("requests.1.custom_id")
    # CRLF line ends and no final newline are fine.
    path.write_text(json.dumps(line) + "\r\n" + json.dumps({**line, "custom_id": "r1"}), encoding="utf-8")
    created = adapter.create(create_request("anthropic", "job-lines"), prepared)
    assert created.outcome == CreateOutcome.CREATED and created.snapshot.request_total == 2


@pytest.mark.parametrize("provider", sorted(MODEL))
def test_create_on_a_dropped_connection_is_unknown(provider, tmp_path):
    adapter = registry.build_adapter(provider, ClientSettings("k", "http://127.0.0.1:9", max_retries=0, timeout_s=2))
    prepared = PreparedInput(
        InputKind.REQUEST_BODY
        if provider == "anthropic"
        else InputKind.INLINE
        if provider == "gemini"
        else InputKind.FILE,
        shard_file(tmp_path, provider),
        None if provider in ("anthropic", "gemini") else "file-x",
    )
    result = adapter.create(create_request(provider, "job-1"), prepared)
    assert result.outcome == CreateOutcome.UNKNOWN and result.status_code is None and result.error


@pytest.mark.slow
@pytest.mark.parametrize("provider", sorted(MODEL))
def test_lifecycle_prepare_create_find_poll_results_delete(provider, emulator, tmp_path):
    adapter = adapter_for(emulator, provider)
    path = shard_file(tmp_path, provider, n=3)
    prepared = adapter.prepare_input(path, "job-life", ENDPOINT[provider], inline_max_bytes=0)
    if provider == "anthropic":
        assert (prepared.kind, prepared.file_id) == (InputKind.REQUEST_BODY, None)
    else:
        assert prepared.kind == InputKind.FILE and prepared.file_id
    created = adapter.create(create_request(provider, "job-life", 3), prepared)
    assert created.outcome == CreateOutcome.CREATED
    batch_id = created.snapshot.provider_batch_id
    hints = FindHints(created_after_unix=int(time.time()) - 60, line_count=3, shard_path=path)
    if provider != "anthropic":  # found by its job key at once
        found = adapter.find_job("job-life", hints)
        assert (found.outcome, found.snapshot.provider_batch_id) == (FindOutcome.FOUND, batch_id)
        assert (
            adapter.find_job("job-other", FindHints(created_after_unix=0, line_count=3)).outcome == FindOutcome.ABSENT
        )
    snap = wait_terminal(adapter, batch_id)
    if provider == "anthropic":  # found by the request ids in its results, once it has ended
        found = adapter.find_job("job-life", hints)
        assert (found.outcome, found.snapshot.provider_batch_id) == (FindOutcome.FOUND, batch_id)
    assert snap.state == JobState.COMPLETED and snap.results_ready and not snap.results_pending
    for file_id in (snap.output_file_id, snap.error_file_id):
        assert file_id is None or not file_id.startswith(("local:", "inline:"))
    job = JobRef(
        batch_id, output_file_id=snap.output_file_id, error_file_id=snap.error_file_id, input_file_id=prepared.file_id
    )
    files = adapter.stream_results(job, tmp_path / "raw", "job-life")
    assert [f.kind for f in files] == ["output"]
    (out,) = files
    assert out.path == tmp_path / "raw" / "job-life.output.jsonl" and out.byte_count == out.path.stat().st_size > 0
    assert len(out.path.read_text(encoding="utf-8").splitlines()) == 3
    assert out.provider_file_id == snap.output_file_id
    assert not list((tmp_path / "raw").glob("*.part"))
    deleted = adapter.delete_remote_files(job)
    if provider == "anthropic":
        assert deleted == []
    else:
        assert prepared.file_id in deleted and (snap.output_file_id is None or snap.output_file_id in deleted)


@pytest.mark.slow
def test_gemini_goes_inline_within_the_limit_but_never_for_embeddings(emulator, tmp_path):
    adapter = adapter_for(emulator, "gemini")
    path = shard_file(tmp_path, "gemini")
    inline = adapter.prepare_input(path, "job-g", "generateContent", inline_max_bytes=10_000)
    assert (inline.kind, inline.file_id) == (InputKind.INLINE, None)
    by_file = adapter.prepare_input(path, "job-g", "generateContent", inline_max_bytes=10)
    assert by_file.kind == InputKind.FILE and by_file.file_id.startswith("files/")
    embed = adapter.prepare_input(path, "job-e", "embedContent", inline_max_bytes=10_000)
    assert embed.kind == InputKind.FILE and embed.file_id
    # An inline job's responses are written as {key, response | error} lines.
    created = adapter.create(create_request("gemini", "job-g"), inline)
    snap = wait_terminal(adapter, created.snapshot.provider_batch_id)
    assert snap.results_ready and snap.output_file_id is None
    (out,) = adapter.stream_results(JobRef(snap.provider_batch_id), tmp_path / "raw", "g")
    lines = [json.loads(x) for x in out.path.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["key"] for line in lines) == ["r0", "r1"] and all("response" in line for line in lines)
    assert out.provider_file_id is None


def test_gemini_unspecified_or_missing_state_keeps_the_previous_state():
    for state in ("JOB_STATE_UNSPECIFIED", None):
        job = genai_types.BatchJob(name="batches/b1", state=state)
        for previous in (JobState.RUNNING, JobState.SUBMITTED, JobState.FINALIZING):
            snap = snapshot_from_job(job, previous)
            assert snap.state == previous and not snap.results_ready
    done = genai_types.BatchJob(
        name="batches/b1", state="JOB_STATE_SUCCEEDED", dest=genai_types.BatchJobDestination(file_name="files/out")
    )
    snap = snapshot_from_job(done, JobState.RUNNING)
    assert (snap.state, snap.output_file_id, snap.results_ready) == (JobState.COMPLETED, "files/out", True)
    # Terminal, but nothing to fetch yet: results pending.
    empty = snapshot_from_job(genai_types.BatchJob(name="batches/b1", state="JOB_STATE_SUCCEEDED"), JobState.RUNNING)
    assert empty.terminal and not empty.results_ready and empty.results_pending
    failed = snapshot_from_job(
        genai_types.BatchJob(
            name="batches/b1", state="JOB_STATE_FAILED", error=genai_types.JobError(code=3, message="bad input")
        )
    )
    assert failed.errors == (BatchError("INVALID_ARGUMENT", "bad input"),) and not failed.results_pending


def _end_by_cancel(adapter, batch_id: str):
    """End a batch now (it was created with a long queue delay): cancel it and wait for `ended`."""
    adapter.cancel(JobRef(batch_id))
    return wait_terminal(adapter, batch_id)


@pytest.mark.slow
def test_anthropic_find_job_decides_only_by_request_ids_of_ended_batches(emulator, tmp_path):
    """Batches carry no metadata: time and size only pick candidates. While one has not ended the
    answer is CANNOT_TELL; once all have, the one whose results hold the shard's ids is FOUND."""
    adapter = adapter_for(emulator, "anthropic")
    since = int(time.time()) - 5
    shard_a, shard_b = shard_file(tmp_path, "anthropic", tag="a"), shard_file(tmp_path, "anthropic", tag="b")
    hints_a = FindHints(created_after_unix=since, line_count=2, shard_path=shard_a)
    assert adapter.find_job("job-a", hints_a).outcome == FindOutcome.ABSENT  # no candidate at all
    emulator.configure(queue_delay_s=3600)  # batches created from here on run until cancelled

    def create(tag: str, path, n: int = 2) -> str:
        made = adapter.create(
            create_request("anthropic", f"job-{tag}", n), adapter.prepare_input(path, f"job-{tag}", "/v1/messages", 0)
        )
        return made.snapshot.provider_batch_id

    a, b = create("a", shard_a), create("b", shard_b)
    create("x", shard_file(tmp_path, "anthropic", n=3, tag="x"), 3)  # another size: never a candidate
    waiting = adapter.find_job("job-a", hints_a)
    assert (waiting.outcome, waiting.snapshot) == (FindOutcome.CANNOT_TELL, None)
    assert set(waiting.candidates) == {a, b} and waiting.reason.startswith("waiting for candidate batches")
    # One candidate ended (the right one): still no decision while the other runs.
    _end_by_cancel(adapter, a)
    still = adapter.find_job("job-a", hints_a)
    assert still.outcome == FindOutcome.CANNOT_TELL and f"waiting for candidate batches {b} to end" in still.reason
    _end_by_cancel(adapter, b)
    found = adapter.find_job("job-a", hints_a)
    assert (found.outcome, found.snapshot.provider_batch_id, found.reason) == (
        FindOutcome.FOUND,
        a,
        "matched by the request ids in its results",
    )
    assert adapter.find_job("job-b", dataclasses.replace(hints_a, shard_path=shard_b)).snapshot.provider_batch_id == b
    # A shard of the same size none of whose ids were sent: confirmed absent.
    absent = adapter.find_job(
        "job-c", dataclasses.replace(hints_a, shard_path=shard_file(tmp_path, "anthropic", tag="c"))
    )
    assert absent.outcome == FindOutcome.ABSENT and "holds this shard's request ids" in absent.reason
    # Without the shard file there is nothing to tell the candidates apart by.
    assert adapter.find_job("job-a", dataclasses.replace(hints_a, shard_path=None)).outcome == FindOutcome.CANNOT_TELL
    # The same lines sent twice: two batches hold the ids, a person decides ...
    twin = create("a2", shard_a)
    _end_by_cancel(adapter, twin)
    unsure = adapter.find_job("job-a", hints_a)
    assert unsure.outcome == FindOutcome.CANNOT_TELL and set(unsure.candidates) == {a, twin}
    assert "a person must decide" in unsure.reason
    # ... unless one of them is already recorded for another ledger job.
    claimed = dataclasses.replace(hints_a, known_batch_ids=frozenset({twin}))
    assert adapter.find_job("job-a", claimed).snapshot.provider_batch_id == a
    # Batches created before the intent are not looked at.
    later = dataclasses.replace(hints_a, created_after_unix=int(time.time()) + 3600)
    assert adapter.find_job("job-a", later).outcome == FindOutcome.ABSENT


@pytest.mark.slow
def test_anthropic_results_are_streamed_only_once_they_are_there(emulator, tmp_path):
    adapter = adapter_for(emulator, "anthropic")
    emulator.configure(force_batch_status="stuck")
    created = adapter.create(
        create_request("anthropic", "job-s"),
        adapter.prepare_input(shard_file(tmp_path, "anthropic"), "job-s", "/v1/messages", 0),
    )
    batch_id = created.snapshot.provider_batch_id
    assert adapter.stream_results(JobRef(batch_id), tmp_path / "raw", "s") == []
    assert adapter.cancel(JobRef(batch_id)).cancel_requested
    snap = wait_terminal(adapter, batch_id)
    assert snap.state == JobState.CANCELLED and snap.results_ready
    (out,) = adapter.stream_results(JobRef(batch_id), tmp_path / "raw", "s")
    assert out.provider_file_id is None and out.byte_count > 0


@pytest.mark.slow
def test_openai_batch_errors_are_batch_error_tuples(emulator, tmp_path):
    adapter = adapter_for(emulator, "openai")
    emulator.configure(max_requests_per_batch=1)
    prepared = adapter.prepare_input(shard_file(tmp_path, "openai"), "job-f", ENDPOINT["openai"], 0)
    created = adapter.create(create_request("openai", "job-f"), prepared)
    snap = wait_terminal(adapter, created.snapshot.provider_batch_id)
    assert snap.state == JobState.FAILED and not snap.results_pending
    assert snap.errors and all(isinstance(e, BatchError) and e.message for e in snap.errors)
    assert snap.errors[0].code == "too_many_tasks" or snap.errors[0].code


@pytest.mark.slow
@pytest.mark.parametrize("provider", sorted(MODEL))
def test_find_job_pages_through_the_providers_batch_list(provider, emulator, tmp_path, monkeypatch):
    """One batch a page: the lookup follows the SDK's paging to the oldest batch."""
    adapter = adapter_for(emulator, provider)
    module = {"openai": "openai", "dashscope": "openai", "anthropic": "anthropic", "gemini": "gemini"}[provider]
    monkeypatch.setattr(f"batch_assets.providers.{module}.adapter.LIST_PAGE_SIZE", 1)
    since = int(time.time()) - 5
    paths, ids = {}, {}
    for n, tag in ((2, "old"), (3, "mid"), (4, "new")):
        paths[tag] = shard_file(tmp_path, provider, n=n, tag=tag)
        prepared = adapter.prepare_input(paths[tag], f"job-{tag}", ENDPOINT[provider], inline_max_bytes=0)
        ids[tag] = adapter.create(create_request(provider, f"job-{tag}", n), prepared).snapshot.provider_batch_id
    for batch_id in ids.values():
        wait_terminal(adapter, batch_id)
    found = adapter.find_job("job-old", FindHints(created_after_unix=since, line_count=2, shard_path=paths["old"]))
    assert (found.outcome, found.snapshot.provider_batch_id) == (FindOutcome.FOUND, ids["old"])
    absent = adapter.find_job(
        "job-none",
        FindHints(created_after_unix=since, line_count=5, shard_path=shard_file(tmp_path, provider, n=5, tag="none")),
    )
    assert absent.outcome == FindOutcome.ABSENT
