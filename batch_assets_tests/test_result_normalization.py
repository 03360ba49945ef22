"""Every real recorded provider line (shared/reference/provider_samples) normalizes correctly.

The lines go through the real ingest path (read_json of a file, the wire format's envelope) and the
real parse extraction (the wire format's answer SQL and its provider's failure classification).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb

from batch_assets.pipeline.collect.ingest import stage_result_file
from batch_assets.providers.registry import wire_format

from .conftest import SAMPLES, shared_file


def normalized(tmp_path: Path, sample: str, provider: str, endpoint: str) -> list[dict]:
    shared_file(SAMPLES / sample)
    path = tmp_path / sample
    shutil.copyfile(SAMPLES / sample, path)
    fmt = wire_format(provider, endpoint)
    conn = duckdb.connect()
    stage_result_file(conn, str(path), fmt)
    cur = conn.execute(f"""
        SELECT line_no, request_id, status_code, malformed_line, a.*,
               CASE WHEN coalesce(status_code BETWEEN 200 AND 299, false) THEN NULL
                    ELSE {fmt.failure_class_sql} END AS failure_class
        FROM (SELECT r.line_no, r.request_id, r.status_code, r.malformed_line, {fmt.answer_sql("r")} FROM _in r) a
        ORDER BY line_no
    """)
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    assert len(rows) == len(lines), "every line is read, none dropped"
    return rows


def test_openai_output_lines_all_give_text_or_vector_and_usage(tmp_path: Path) -> None:
    rows = normalized(tmp_path, "openai_output.jsonl", "openai", "/v1/chat/completions")
    chat = [r for r in rows if r["content"] is not None]
    assert len(chat) >= 18
    for r in rows:
        assert r["status_code"] == 200 and r["failure_class"] is None and r["request_id"]
    assert all(r["input_tokens"] > 0 and r["finish_reason"] in ("stop", "length") for r in chat)
    # Usage details kept apart where the line has them: o3-mini's reasoning tokens (inside its
    # completion tokens) and a prompt-cache hit (inside its prompt tokens).
    by_id = {r["request_id"]: r for r in rows}
    assert (by_id["chaining_1"]["thinking_tokens"], by_id["chaining_1"]["output_tokens"]) == (448, 568)
    assert (by_id["expansion_23"]["thinking_tokens"], by_id["expansion_23"]["output_tokens"]) == (2112, 2160)
    assert (by_id["task_157"]["cached_input_tokens"], by_id["task_157"]["input_tokens"]) == (1280, 3509)
    assert (by_id["0"]["thinking_tokens"], by_id["0"]["cached_input_tokens"]) == (0, 0)
    # The responses-API and embeddings lines are read with their own formats.
    responses = normalized(tmp_path, "openai_output.jsonl", "openai", "/v1/responses")
    assert sum(1 for r in responses if r["content"]) == 3
    assert all(
        r["input_tokens"] > 0 and (r["thinking_tokens"], r["cached_input_tokens"]) == (0, 0)
        for r in responses
        if r["content"]
    )
    vectors = normalized(tmp_path, "openai_output.jsonl", "openai", "/v1/embeddings")
    assert sum(1 for r in vectors if r["vector"] is not None) == 1


def test_openai_error_lines_are_classified(tmp_path: Path) -> None:
    rows = normalized(tmp_path, "openai_error.jsonl", "openai", "/v1/chat/completions")
    assert [(r["status_code"], r["error_code"], r["failure_class"]) for r in rows] == [
        (429, "insufficient_quota", "rate_or_capacity_error"),
        (None, "batch_expired", "expired"),
        (None, "batch_expired", "expired"),
    ]
    assert all(r["error_message"] for r in rows)


def test_anthropic_result_lines(tmp_path: Path) -> None:
    rows = normalized(tmp_path, "anthropic_results.jsonl", "anthropic", "/v1/messages")
    by_id = {r["request_id"]: r for r in rows}
    ok = [r for r in rows if r["status_code"] == 200]
    assert len(ok) == 8 and all(r["content"] and r["input_tokens"] > 0 and r["finish_reason"] for r in ok)
    assert "thinking" not in (by_id["1"]["content"] or "").lower()[:20]  # thinking blocks are not the answer
    assert by_id["bad-model"]["status_code"] == 404 and by_id["bad-model"]["failure_class"] == "validation_error"
    assert by_id["23"]["error_code"] == "invalid_request_error" and "max_tokens" in by_id["23"]["error_message"]
    assert by_id["c-1"]["failure_class"] == "canceled"
    # No separate thinking count (extended thinking is in output_tokens); cache reads where reported.
    assert all(r["thinking_tokens"] is None for r in rows)
    assert by_id["0"]["cached_input_tokens"] == 0 and by_id["my-first-request"]["cached_input_tokens"] is None


def test_dashscope_output_lines(tmp_path: Path) -> None:
    rows = normalized(tmp_path, "dashscope_output.jsonl", "dashscope", "/v1/chat/completions")
    assert all(r["status_code"] == 200 and r["content"] and r["output_tokens"] > 0 for r in rows)
    # These lines carry text_tokens details only: no reasoning or cached count to keep.
    assert all(r["thinking_tokens"] is None and r["cached_input_tokens"] is None for r in rows)


def test_gemini_response_and_embedding_lines(tmp_path: Path) -> None:
    rows = normalized(tmp_path, "gemini_responses.jsonl", "gemini", "generateContent")
    assert all(
        r["status_code"] == 200 and r["content"] and r["finish_reason"] == "stop" and r["input_tokens"] > 0
        for r in rows
    )
    # Thoughts are billed output: counted in output_tokens and kept apart; a count the service
    # leaves out (proto3 omits zeros) is 0 where the response reports usage.
    by_id = {r["request_id"]: r for r in rows}
    assert (by_id["request_1"]["thinking_tokens"], by_id["request_1"]["output_tokens"]) == (829, 840)
    assert (by_id["gemini-sample-0"]["thinking_tokens"], by_id["gemini-sample-0"]["cached_input_tokens"]) == (0, 0)
    vectors = normalized(tmp_path, "gemini_embedding_responses.jsonl", "gemini", "embedContent")
    assert [json.loads(r["vector"])[:1] != [] for r in vectors] == [True, True]


def test_other_openai_compatible_producers_are_recorded_not_dropped(tmp_path: Path) -> None:
    """Old vLLM lines (no status wrapper) and ogx error lines still load; none counts as a success."""
    rows = normalized(tmp_path, "openai_compatible_other.jsonl", "openai", "/v1/chat/completions")
    assert all(r["status_code"] is None and r["failure_class"] == "internal_error" for r in rows)


def test_a_truncated_file_keeps_every_good_line(tmp_path: Path) -> None:
    src = shared_file(SAMPLES / "openai_output.jsonl")
    text = src.read_text(encoding="utf-8")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(text + text.splitlines()[0][:80], encoding="utf-8")  # a cut-off last line
    conn = duckdb.connect()
    stage_result_file(conn, str(broken), wire_format("openai", "/v1/chat/completions"))
    good, bad = conn.execute(
        "SELECT count(*) FILTER (malformed_line IS NULL), count(*) FILTER (malformed_line IS NOT NULL) FROM _in"
    ).fetchone()
    assert (good, bad) == (24, 1)
