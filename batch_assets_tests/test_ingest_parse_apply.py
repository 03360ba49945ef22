"""Stages 5-7: results loaded by custom_id whatever their order, re-imports add
nothing, orphan / duplicate / malformed lines recorded, every failure classified, batch-level failure and
expiry accounted for, and the business table written exactly once, never over newer data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from batch_assets.pipeline.collect.ingest import collect_raw_results, download_results, ingest_files
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle import apply as apply_module
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.business_table import ensure_target_table
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.providers.openai.emulator.bodies import respond
from batch_assets.providers.openai.emulator.flavor import OPENAI

from .conftest import DAY1

TASK_ID1 = "ticket_triage_20261120"
ITEMS, QUARANTINED, LINES = 58, 8, 50  # per seeded day (3 quarantined: card numbers blocked by the policy)


def q(wh, sql: str, params=None) -> list[dict]:
    with wh.connect() as conn:
        cur = conn.execute(sql, params or [])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def submit_and_wait(wh, task, adapter, wait_for_jobs, day: str = DAY1) -> None:
    freeze_manifest(wh, task, day)
    cut_shards(wh, task, day)
    submit_pending(wh, task, day, adapter)
    wait_for_jobs(wh, adapter)


def submit_and_parse(wh, task, adapter, wait_for_jobs) -> None:
    """DAY1 frozen, cut, submitted, its results collected and parsed: ready for apply."""
    submit_and_wait(wh, task, adapter, wait_for_jobs)
    collect_raw_results(wh, task, DAY1, adapter)
    parse_results(wh, task, DAY1)


def finish(wh, task, adapter, day: str = DAY1) -> None:
    collect_raw_results(wh, task, day, adapter)
    parse_results(wh, task, day)
    apply_results(wh, task, day)


def output_file(wh, kind: str = "output") -> Path:
    (row,) = q(wh, "SELECT path FROM ledger.raw_file WHERE kind = ?", [kind])
    return Path(row["path"])


def requests_sent(wh) -> dict[str, dict]:
    """request id -> the request line as sent (read back from the shard files)."""
    sent = {}
    for row in q(wh, "SELECT path FROM ledger.shard"):
        for raw in Path(row["path"]).read_text(encoding="utf-8").splitlines():
            line = json.loads(raw)
            sent[line["custom_id"]] = line
    return sent


def expected_content(request: dict) -> str:
    """What the emulator answers this very request (its answers depend on the request body only)."""
    result = respond(OPENAI, request["url"], request["body"], ".", "seed", 0)
    return result.body["choices"][0]["message"]["content"]


def balanced(wh, task_id: str = TASK_ID1):
    r = reconcile(wh, task_id)
    assert r.problems() == [], r.problems()
    return r


# --- stage 5: ingest ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_out_of_order_output_maps_every_answer_to_its_own_request(
    seeded_copy, ticket_task, adapter, emulator, wait_for_jobs
):
    wh = seeded_copy
    assert emulator.settings.shuffle_output
    long_id = "L" * 40  # custom_id over 64 chars: sent as a mapped bx_ request id
    with wh.connect() as conn:
        conn.execute(
            "INSERT INTO support_tickets (ticket_id, created_date, subject, body, language) VALUES "
            "(?, DATE '2026-11-20', 'Invoice', 'charged twice for my invoice', 'en'), "
            "('工单-7', DATE '2026-11-20', '无法登录', '我无法登录账户', 'zh')",
            [long_id],
        )
    submit_and_wait(wh, ticket_task, adapter, wait_for_jobs)
    finish(wh, ticket_task, adapter)

    raw = q(
        wh,
        """SELECT r.line_no AS out_no, r.request_id, r.custom_id, sl.line_no AS in_no, m.business_id,
                          p.output_json, r.body ->> '$.choices[0].message.content' AS content
                   FROM ledger.raw_result r JOIN ledger.shard_line sl USING (custom_id)
                   JOIN ledger.manifest_item m USING (custom_id) JOIN ledger.parsed_result p USING (custom_id)
                   WHERE r.status = 'ok' ORDER BY r.line_no""",
    )
    assert len(raw) == LINES + 2
    assert [r["in_no"] for r in raw] != sorted(r["in_no"] for r in raw), "output was not shuffled"
    sent = requests_sent(wh)
    labels = {r["ticket_id"]: r for r in q(wh, "SELECT * FROM ticket_labels")}
    for r in raw:
        request = sent[r["request_id"]]
        want = expected_content(request)
        assert r["content"] == want
        assert json.loads(r["output_json"]) == json.loads(want)
        label = labels[r["business_id"]]
        assert (label["category"], label["reason"]) == (json.loads(want)["category"], json.loads(want)["reason"])
        assert label["custom_id"] == r["custom_id"]
    by_bid = {r["business_id"]: r for r in raw}
    assert by_bid[long_id]["request_id"].startswith("bx_") and f":{long_id}:" in by_bid[long_id]["custom_id"]
    assert "工单-7" in labels and long_id in labels
    balanced(wh)


@pytest.mark.slow
def test_reimporting_the_same_files_adds_nothing(seeded_copy, ticket_task, adapter, wait_for_jobs):
    wh = seeded_copy
    # The provider keeps the files here (retention off), so the same file can be downloaded twice.
    from dataclasses import replace

    from batch_assets.spec.model import RetentionSpec

    ticket_task = replace(
        ticket_task, spec=ticket_task.spec.model_copy(update={"retention": RetentionSpec(delete_remote_files=False)})
    )
    submit_and_wait(wh, ticket_task, adapter, wait_for_jobs)
    first = collect_raw_results(wh, ticket_task, DAY1, adapter)
    assert (first.downloaded_files, first.lines, first.by_status) == (1, LINES, {"ok": LINES})
    snapshot = q(wh, "SELECT file_key, line_no, custom_id, status FROM ledger.raw_result ORDER BY ALL")
    again = collect_raw_results(wh, ticket_task, DAY1, adapter)
    assert (again.downloaded_files, again.ingested_files, again.lines) == (0, 0, 0)
    assert ingest_files(wh, TASK_ID1) == (0, 0)
    # A restart that downloads the same file again (download recorded as not done) adds nothing either.
    with wh.connect() as conn:
        conn.execute("UPDATE ledger.provider_job SET downloaded_at = NULL")
    redo = collect_raw_results(wh, ticket_task, DAY1, adapter)
    assert (redo.downloaded_files, redo.ingested_files, redo.lines) == (1, 0, 0)
    assert q(wh, "SELECT file_key, line_no, custom_id, status FROM ledger.raw_result ORDER BY ALL") == snapshot
    assert q(wh, "SELECT count(*) AS n FROM ledger.raw_file")[0]["n"] == 1
    parse_results(wh, ticket_task, DAY1)
    apply_results(wh, ticket_task, DAY1)
    balanced(wh)


@pytest.mark.slow
def test_orphan_duplicate_and_malformed_lines_are_recorded_and_nothing_is_lost(
    seeded_copy, ticket_task, adapter, emulator, wait_for_jobs
):
    wh = seeded_copy
    emulator.configure(duplicate_output_lines=0.2)
    submit_and_wait(wh, ticket_task, adapter, wait_for_jobs)
    assert download_results(wh, TASK_ID1, adapter) == 1
    path = output_file(wh)
    lines = path.read_text(encoding="utf-8").splitlines()
    ids = [json.loads(line)["custom_id"] for line in lines]
    duplicates = len(ids) - len(set(ids))
    assert duplicates > 0 and len(set(ids)) == LINES
    orphan = json.loads(lines[0])
    orphan["custom_id"] = f"{TASK_ID1}:ticket:TK-NOBODY:00000000"
    orphan_line = json.dumps(orphan)
    garbage = "{this is not json"
    truncated = lines[1][: len(lines[1]) // 2]  # the file ends mid-line
    path.write_text("\n".join([*lines, orphan_line, garbage, truncated]), encoding="utf-8")

    files, n = ingest_files(wh, TASK_ID1)
    assert (files, n) == (1, len(lines) + 3)
    by_status = {r["status"]: r["n"] for r in q(wh, "SELECT status, count(*) AS n FROM ledger.raw_result GROUP BY 1")}
    assert by_status == {"ok": LINES, "duplicate": duplicates, "orphan": 1, "malformed": 2}
    (o,) = q(wh, "SELECT * FROM ledger.raw_result WHERE status = 'orphan'")
    assert o["request_id"] == orphan["custom_id"] and o["custom_id"] is None and o["body"] is not None
    malformed = sorted(
        r["malformed_line"] for r in q(wh, "SELECT malformed_line FROM ledger.raw_result WHERE status = 'malformed'")
    )
    assert malformed == sorted([garbage, truncated])
    dups = q(wh, "SELECT custom_id FROM ledger.raw_result WHERE status = 'duplicate'")
    assert all(d["custom_id"] is not None for d in dups)

    parse_results(wh, ticket_task, DAY1)
    apply_results(wh, ticket_task, DAY1)
    r = balanced(wh)
    assert (r.succeeded, r.applied, r.missing) == (LINES, LINES, 0)
    assert (r.orphan_lines, r.duplicate_lines, r.malformed_lines) == (1, duplicates, 2)
    assert q(wh, "SELECT count(*) AS n FROM ticket_labels")[0]["n"] == LINES


@pytest.mark.slow
def test_lines_a_second_job_of_the_same_shard_returns_are_duplicates_in_a_later_batch(
    seeded_copy, ticket_task, adapter, wait_for_jobs, monkeypatch
):
    """A shard whose batch ran twice (e.g. an ambiguous create) returns every answer twice, from two
    jobs. Each file its own ingest batch: the second job's lines are duplicates, not answers."""
    from batch_assets.ledger.results import insert_raw_file
    from batch_assets.pipeline.collect import ingest as ingest_module
    from batch_assets.pipeline.files import file_sha256

    wh = seeded_copy
    submit_and_wait(wh, ticket_task, adapter, wait_for_jobs)
    assert download_results(wh, TASK_ID1, adapter) == 1
    first = output_file(wh)
    again = first.with_name("again.jsonl")
    again.write_bytes(first.read_bytes())
    (job,) = q(wh, "SELECT job_key FROM ledger.provider_job")
    with wh.connect() as conn:
        conn.execute(
            "INSERT INTO ledger.provider_job SELECT * REPLACE (job_key || '-again' AS job_key, "
            "provider_batch_id || '-again' AS provider_batch_id) FROM ledger.provider_job"
        )
        insert_raw_file(
            conn,
            file_key=job["job_key"] + "-again:output",
            job_key=job["job_key"] + "-again",
            task_id=TASK_ID1,
            kind="output",
            provider_file_id=None,
            path=str(again),
            sha256=file_sha256(again),
            byte_count=again.stat().st_size,
        )
    monkeypatch.setattr(ingest_module, "INGEST_BATCH_BYTES", 1)  # one file per batch
    assert ingest_files(wh, TASK_ID1) == (2, 2 * LINES)
    by_job = q(wh, "SELECT job_key, status, count(*) AS n FROM ledger.raw_result GROUP BY ALL ORDER BY 1")
    assert [(r["job_key"], r["status"], r["n"]) for r in by_job] == [
        (job["job_key"], "ok", LINES),
        (job["job_key"] + "-again", "duplicate", LINES),
    ]


def test_aligned_prefix_leaves_the_last_row_group_empty_or_more_than_half_full():
    from batch_assets.pipeline.collect.ingest import ROW_GROUP_ROWS as RG
    from batch_assets.pipeline.collect.ingest import aligned_prefix

    half = RG // 2
    assert aligned_prefix([RG + half + 1, 10, 10]) == 3  # each prefix leaves it more than half full: all
    assert aligned_prefix([RG + half + 1, half, 10]) == 1  # two or three files leave it at most half full
    assert aligned_prefix([RG, RG]) == 2  # exactly full row groups
    assert aligned_prefix([10, 10]) == 2  # no such prefix: all


def test_duckdb_merges_only_row_groups_at_most_half_full_at_a_checkpoint(tmp_path):
    """What aligned_prefix relies on: inserts that each end with a row group more than half full
    leave nothing for a checkpoint to merge; inserts that end at most half full are merged (rewritten)."""
    import duckdb

    from batch_assets.pipeline.collect.ingest import ROW_GROUP_ROWS as RG

    def row_groups_before_and_after_a_checkpoint(tail: int) -> tuple[int, int]:
        conn = duckdb.connect(str(tmp_path / f"rg{tail}.duckdb"))
        conn.execute("CREATE TABLE t (i BIGINT)")
        for _ in range(3):
            conn.execute(f"INSERT INTO t SELECT * FROM range({2 * RG + tail})")
        before = conn.execute("SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('t')").fetchone()[0]
        conn.execute("CHECKPOINT")
        after = conn.execute("SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('t')").fetchone()[0]
        conn.close()
        return before, after

    assert row_groups_before_and_after_a_checkpoint(RG // 2 + 1000) == (9, 9)
    before, after = row_groups_before_and_after_a_checkpoint(RG // 2 - 1000)
    assert before == 9 and after < before


def _ingest_counted(wh, monkeypatch, row_group: int, batch_bytes: int) -> tuple[tuple[int, int], list[int], list[str]]:
    """ingest_files with DuckDB's row group taken as `row_group` rows and batches of `batch_bytes`:
    its result, each insert's line count and every file staged, in order (a file twice when a
    batch left it for the next)."""
    from batch_assets.pipeline.collect import ingest as ingest_module

    inserted, staged = [], []
    real_insert, real_stage = ingest_module.insert_raw_results, ingest_module._stage_batch

    def counted_insert(*args, **kwargs):
        inserted.append(real_insert(*args, **kwargs))
        return inserted[-1]

    def counted_stage(conn, batch, fmt):
        staged.extend(f["file_key"] for f in batch)
        return real_stage(conn, batch, fmt)

    monkeypatch.setattr(ingest_module, "insert_raw_results", counted_insert)
    monkeypatch.setattr(ingest_module, "_stage_batch", counted_stage)
    monkeypatch.setattr(ingest_module, "ROW_GROUP_ROWS", row_group)
    monkeypatch.setattr(ingest_module, "PLAN_MARGIN_ROWS", 1)
    monkeypatch.setattr(ingest_module, "INGEST_BATCH_BYTES", batch_bytes)
    return ingest_files(wh, TASK_ID1), inserted, staged


@pytest.mark.slow
@pytest.mark.parametrize("plan", ["right", "wrong"])
def test_batches_end_where_their_inserts_align_and_files_read_twice_change_nothing(
    seeded_copy, ticket_task, adapter, emulator, wait_for_jobs, monkeypatch, plan
):
    """A batch is planned from its shards' line counts to end where its insert leaves the last row
    group more than half full, so no file is staged twice. When the plan is wrong (here: the
    ledger's line counts made up), the batch leaves its last staged files for the next one, which
    stages them again. Either way every insert but the last is aligned and the result is the
    same as in one batch."""
    import dataclasses
    import shutil

    from batch_assets.ledger.warehouse import Warehouse

    wh = seeded_copy
    task = dataclasses.replace(ticket_task, limits=dataclasses.replace(ticket_task.limits, max_requests_per_shard=7))
    emulator.configure(item_error_rate=0.3)  # answers split between output and error files
    submit_and_wait(wh, task, adapter, wait_for_jobs)
    download_results(wh, TASK_ID1, adapter)
    whole = Warehouse.at(wh.database.with_name("whole.duckdb"), wh.data_dir)
    shutil.copy(wh.database, whole.database)
    files = q(wh, "SELECT file_key, byte_count FROM ledger.raw_file")
    assert len(files) > 8
    expected = ingest_files(whole, TASK_ID1)  # one batch: nothing to align
    if plan == "wrong":
        with wh.connect() as conn:
            conn.execute("UPDATE ledger.shard SET line_count = 1")
    result, inserted, staged = _ingest_counted(wh, monkeypatch, 10, 3 * max(f["byte_count"] for f in files))
    assert result == expected
    assert len(inserted) > 2 and all(n % 10 > 5 or n % 10 == 0 for n in inserted[:-1]), inserted
    if plan == "right":
        assert len(staged) == len(set(staged)) == len(files)
    else:
        assert len(staged) > len(set(staged)) == len(files)
    keys = (
        "SELECT file_key, line_no, job_key, attempt, request_id, custom_id, item_no, status, body "
        "FROM ledger.raw_result"
    )
    assert sorted(map(str, q(wh, keys))) == sorted(map(str, q(whole, keys)))
    marked = "SELECT file_key, line_count, ingested_at IS NOT NULL AS done FROM ledger.raw_file ORDER BY 1"
    assert q(wh, marked) == q(whole, marked) and all(r["done"] for r in q(wh, marked))


def test_a_planned_batch_ends_at_a_jobs_end_within_the_byte_limit():
    from batch_assets.pipeline.collect.ingest import expected_lines, planned_batch

    def f(job, size=10, lines=0):
        return {"job_key": job, "byte_count": size, "shard_lines": lines}

    # Jobs of 4 lines (an output and an error file each), row groups of 10 (the module's: monkeypatched below).
    files = [
        f("a", lines=4),
        f("a", lines=4),
        f("b", lines=4),
        f("b", lines=4),
        f("c", lines=4),
        f("c", lines=4),
        f("d", lines=4),
        f("d", lines=4),
    ]
    assert expected_lines(files) == [4, 0, 4, 0, 4, 0, 4, 0]  # a job's lines go to its first file
    import batch_assets.pipeline.collect.ingest as ingest_module

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ingest_module, "ROW_GROUP_ROWS", 10)
        mp.setattr(ingest_module, "PLAN_MARGIN_ROWS", 1)
        # 70 bytes hold seven files; of the job ends among them (4, 8, 12 lines) only 8 leaves the
        # last row group 6..9 full: two jobs.
        assert planned_batch(files, expected_lines(files), limit=70) == 4
        assert planned_batch(files, expected_lines(files), limit=80) == 8  # all fit: the last batch, all
        assert (
            planned_batch(files, expected_lines(files), limit=30) == 3
        )  # no aligned job end fits: every file that fits
        assert planned_batch([f("a", size=99)] + files, [0] + expected_lines(files), limit=5) == 1  # one file at least


# --- stage 6: parse and classify ------------------------------------------------------------------------


@pytest.mark.slow
def test_every_failure_is_classified(seeded_copy, ticket_task, adapter, emulator, wait_for_jobs):
    wh = seeded_copy
    emulator.configure(item_error_rate=0.4, content_filter_rate=0.2, truncate_rate=0.2)
    submit_and_wait(wh, ticket_task, adapter, wait_for_jobs)
    download_results(wh, TASK_ID1, adapter)
    # Three answers that do not match the output schema (the emulator itself always matches it).
    path = output_file(wh)
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    clean = [x for x in lines if x["response"]["body"]["choices"][0]["finish_reason"] == "stop"]
    assert len(clean) >= 3
    bad_answers = {
        clean[0]["custom_id"]: ('{"category":"shipping","confidence":0.5,"reason":"x"}', "answer.category: not one of"),
        clean[1]["custom_id"]: ('{"category":"billing","confidence":0.5,"reason":"x","extra":1}', "not in the schema"),
        clean[2]["custom_id"]: ("Sure! The category is billing.", "not valid JSON"),
    }
    for x in lines:
        if x["custom_id"] in bad_answers:
            x["response"]["body"]["choices"][0]["message"]["content"] = bad_answers[x["custom_id"]][0]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    ingest_files(wh, TASK_ID1)
    parse_results(wh, ticket_task, DAY1)
    apply_results(wh, ticket_task, DAY1)

    rows = q(
        wh,
        """SELECT p.*, r.request_id, r.body ->> '$.choices[0].finish_reason' AS finish
                    FROM ledger.parsed_result p JOIN ledger.raw_result r USING (custom_id)""",
    )
    assert len(rows) == LINES
    seen: dict[str, int] = {}
    for p in rows:
        key = (
            "schema"
            if p["request_id"] in bad_answers
            else str(p["http_status"])
            if p["http_status"] != 200
            else p["finish"]
        )
        seen[key] = seen.get(key, 0) + 1
        expected = {
            "429": ("rate_or_capacity_error", False),
            "500": ("internal_error", False),
            "400": ("validation_error", False),
            "content_filter": ("content_policy_error", True),
            "length": ("parse_error", True),
            "schema": ("parse_error", True),
            "stop": (None, True),
        }[key]
        assert (p["error_class"], p["provider_succeeded"]) == expected, p
        if key == "429":
            assert p["error_code"] == "rate_limit_exceeded" and "Rate limit" in p["error_message"]
        if key == "length":
            assert p["error_code"] == "finish_reason_length" and "max_tokens" in p["error_message"]
        if key == "schema":
            assert bad_answers[p["request_id"]][1] in p["error_message"] and p["output_json"] is None
        if key == "stop":
            assert p["output_json"] is not None and p["input_tokens"] > 0 and p["output_tokens"] > 0
            assert p["provider_request_id"]
    assert set(seen) == {"429", "500", "400", "content_filter", "length", "schema", "stop"}, seen
    r = balanced(wh)
    # A content-filtered answer is a content-policy failure, not an answer that failed to parse.
    assert r.failed == {
        "rate_or_capacity_error": seen["429"],
        "internal_error": seen["500"],
        "validation_error": seen["400"],
        "content_policy_error": seen["content_filter"],
    }
    assert r.failed_to_parse == seen["length"] + 3
    assert r.applied == seen["stop"] == q(wh, "SELECT count(*) AS n FROM ticket_labels")[0]["n"]


@pytest.mark.slow
def test_batch_level_validation_failure_fails_every_item(seeded_copy, ticket_task, adapter, wait_for_jobs):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    (shard,) = q(wh, "SELECT path FROM ledger.shard")
    with open(shard["path"], "a", encoding="utf-8") as f:  # one broken line fails the whole provider batch
        f.write('{"custom_id": "x", "method": "POST"\n')
    submit_pending(wh, ticket_task, DAY1, adapter)
    wait_for_jobs(wh, adapter)
    (job,) = q(wh, "SELECT state, provider_errors FROM ledger.provider_job")
    assert job["state"] == "FAILED" and "invalid_json_line" in job["provider_errors"]
    finish(wh, ticket_task, adapter)
    rows = q(wh, "SELECT * FROM ledger.parsed_result")
    assert len(rows) == LINES
    assert {(p["error_class"], p["error_code"], p["provider_succeeded"]) for p in rows} == {
        ("validation_error", "invalid_json_line", False)
    }
    assert all("rejected the whole batch" in p["error_message"] for p in rows)
    r = balanced(wh)
    assert (r.failed, r.quarantined, r.succeeded, r.applied) == ({"validation_error": LINES}, QUARANTINED, 0, 0)


@pytest.mark.slow
def test_batch_failed_for_enqueued_token_limit_is_a_capacity_error(
    seeded_copy, ticket_task, adapter, emulator, wait_for_jobs
):
    wh = seeded_copy
    emulator.configure(force_batch_status="failed")
    submit_and_wait(wh, ticket_task, adapter, wait_for_jobs)
    (job,) = q(wh, "SELECT state, provider_errors FROM ledger.provider_job")
    assert job["state"] == "FAILED" and "token_limit_exceeded" in job["provider_errors"]
    finish(wh, ticket_task, adapter)
    rows = q(wh, "SELECT error_class, error_code FROM ledger.parsed_result")
    assert len(rows) == LINES
    assert all(p["error_code"] == "token_limit_exceeded" for p in rows)
    balanced(wh)
    assert {p["error_class"] for p in rows} == {"rate_or_capacity_error"}


@pytest.mark.slow
def test_expired_batch_with_partial_output(seeded_copy, ticket_task, adapter, emulator, wait_for_jobs):
    wh = seeded_copy
    emulator.configure(force_batch_status="expired")
    submit_and_wait(wh, ticket_task, adapter, wait_for_jobs)
    (job,) = q(wh, "SELECT state, request_total, request_completed FROM ledger.provider_job")
    assert job["state"] == "EXPIRED" and job["request_total"] == LINES
    finish(wh, ticket_task, adapter)
    assert {r["kind"] for r in q(wh, "SELECT kind FROM ledger.raw_file")} == {"output", "error"}
    r = balanced(wh)
    assert r.succeeded == job["request_completed"] == LINES // 2
    assert r.expired == LINES - LINES // 2
    assert r.succeeded + r.expired == LINES and r.missing == 0
    assert r.applied == LINES // 2 == q(wh, "SELECT count(*) AS n FROM ticket_labels")[0]["n"]
    expired = q(wh, "SELECT error_code FROM ledger.parsed_result WHERE error_class = 'expired'")
    assert {e["error_code"] for e in expired} == {"batch_expired"}


# --- stage 7: apply --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_apply_writes_the_answers_once(seeded_copy, ticket_task, adapter, wait_for_jobs):
    wh = seeded_copy
    submit_and_parse(wh, ticket_task, adapter, wait_for_jobs)
    s = apply_results(wh, ticket_task, DAY1)
    assert (s.applied, s.stale, s.target_table) == (LINES, 0, "ticket_labels")
    table = q(wh, "SELECT * FROM ticket_labels ORDER BY ticket_id")
    parsed = {
        r["custom_id"]: r
        for r in q(
            wh,
            """SELECT p.custom_id, p.output_json, m.business_id, m.input_hash
               FROM ledger.parsed_result p JOIN ledger.manifest_item m USING (custom_id)""",
        )
    }
    assert len(table) == LINES
    for row in table:
        p = parsed[row["custom_id"]]
        answer = json.loads(p["output_json"])
        assert row["ticket_id"] == p["business_id"]
        assert (row["category"], row["reason"]) == (answer["category"], answer["reason"])
        assert row["confidence"] == pytest.approx(answer["confidence"])
        assert (row["output_version"], row["input_hash"], row["task_id"]) == ("v1", p["input_hash"], TASK_ID1)
    ledger = q(wh, "SELECT * FROM ledger.applied_result ORDER BY custom_id")
    assert len(ledger) == LINES and {r["outcome"] for r in ledger} == {"applied"}

    again = apply_results(wh, ticket_task, DAY1)
    assert (again.applied, again.stale) == (0, 0)
    assert q(wh, "SELECT * FROM ticket_labels ORDER BY ticket_id") == table
    assert q(wh, "SELECT * FROM ledger.applied_result ORDER BY custom_id") == ledger
    balanced(wh)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", [None, 7], ids=["one_chunk", "chunks_of_7"])
def test_an_item_with_two_usable_attempts_is_written_once_with_its_latest(
    seeded_copy, ticket_task, adapter, wait_for_jobs, monkeypatch, chunk
):
    """An item can hold a usable answer at two attempts (a batch's output that arrived after its
    items were sent again). Apply writes each item once, with its latest attempt's answer (the
    attempt reconcile counts), instead of failing the chunk on the item's second row every run."""
    if chunk:
        monkeypatch.setattr(apply_module, "APPLY_CHUNK", chunk)
    wh = seeded_copy
    submit_and_parse(wh, ticket_task, adapter, wait_for_jobs)
    with wh.connect() as conn:
        twice = [
            r[0]
            for r in conn.execute("""
            SELECT item_no FROM ledger.parsed_result WHERE provider_succeeded AND error_class IS NULL
            ORDER BY item_no LIMIT 3 OFFSET 10""").fetchall()
        ]
        conn.execute(
            """
            INSERT INTO ledger.parsed_result BY NAME
            SELECT * REPLACE (2 AS attempt, json_object('category', 'billing', 'reason', 'second attempt',
                                                          'confidence', 0.9)::VARCHAR AS output_json)
            FROM ledger.parsed_result WHERE item_no IN (SELECT unnest($1::BIGINT[]))""",
            [twice],
        )
    s = apply_results(wh, ticket_task, DAY1)
    assert (s.applied, s.stale) == (LINES, 0)
    table = q(
        wh,
        """SELECT l.reason, m.item_no FROM ticket_labels l
                     JOIN ledger.manifest_item m ON m.custom_id = l.custom_id""",
    )
    assert len(table) == LINES
    assert sorted(r["item_no"] for r in table if r["reason"] == "second attempt") == twice
    ledger = q(wh, "SELECT item_no FROM ledger.applied_result")
    assert len(ledger) == len({r["item_no"] for r in ledger}) == LINES
    again = apply_results(wh, ticket_task, DAY1)
    assert (again.applied, again.stale) == (0, 0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "chunk, row_group",
    [(None, None), (7, None), (7, 4)],
    ids=["one_chunk", "chunks_of_7", "chunks_aligned_to_row_groups_of_4"],
)
def test_one_apply_overwrites_keys_the_table_holds_and_adds_the_others(
    seeded_copy, ticket_task, adapter, wait_for_jobs, monkeypatch, chunk, row_group
):
    """Keys the business table already holds under the output version take the new answer (their
    rows kept for a revoke); the other keys are added; both in one apply. In chunks too: some
    chunks hold an overwritten key and some none; and chunks that end where the table (3 rows
    before the apply, then only added keys) fills row groups of 4."""
    if chunk:
        monkeypatch.setattr(apply_module, "APPLY_CHUNK", chunk)
    if row_group:
        monkeypatch.setattr(apply_module, "ROW_GROUP_ROWS", row_group)
        real_marks, seen = apply_module._chunk_marks, []

        def recorded(conn, table_rows, any_held):
            seen.append((table_rows, any_held))
            return real_marks(conn, table_rows, any_held)

        monkeypatch.setattr(apply_module, "_chunk_marks", recorded)
    wh = seeded_copy
    submit_and_parse(wh, ticket_task, adapter, wait_for_jobs)
    held = [
        r["business_id"]
        for r in q(
            wh,
            """SELECT m.business_id FROM ledger.parsed_result p
                                               JOIN ledger.manifest_item m USING (custom_id)
                                               WHERE p.provider_succeeded AND p.error_class IS NULL
                                               ORDER BY 1 LIMIT 3""",
        )
    ]
    with wh.connect() as conn:
        ensure_target_table(conn, ticket_task)
        conn.execute(
            "INSERT INTO ticket_labels SELECT unnest(?::VARCHAR[]), 'account', 0.99, 'earlier', 'v1', "
            "'earlier-cid', 'earlier-hash', 'other_task', TIMESTAMP '2030-01-01 00:00:00'",
            [held],
        )
    s = apply_results(wh, ticket_task, DAY1)
    assert (s.applied, s.stale) == (LINES, 0)
    labels = {r["ticket_id"]: r for r in q(wh, "SELECT * FROM ticket_labels")}
    assert len(labels) == LINES
    assert {labels[k]["task_id"] for k in held} == {TASK_ID1} and "earlier" not in {
        r["reason"] for r in labels.values()
    }
    previous = q(
        wh,
        "SELECT business_id, custom_id, previous_custom_id, previous_row FROM ledger.applied_previous "
        "ORDER BY business_id",
    )
    assert [(r["business_id"], r["custom_id"], r["previous_custom_id"]) for r in previous] == [
        (k, labels[k]["custom_id"], "earlier-cid") for k in sorted(held)
    ]
    assert {json.loads(r["previous_row"])["reason"] for r in previous} == {"earlier"}
    if row_group:  # the table's rows as the catalog counts them, and the keys it held
        assert seen == [(3, True)]
    balanced(wh)


@pytest.mark.slow
def test_apply_in_chunks_writes_each_answer_once_and_leaves_a_failed_chunk_to_the_next_run(
    seeded_copy, ticket_task, adapter, wait_for_jobs, monkeypatch
):
    """Large applies commit in chunks by item number: a chunk that fails rolls back whole (no
    business row without its ledger row), the chunks before it stay, and the next run writes the rest."""
    wh = seeded_copy
    submit_and_parse(wh, ticket_task, adapter, wait_for_jobs)
    monkeypatch.setattr(apply_module, "APPLY_CHUNK", 7)
    real, calls = apply_module.insert_applied_results, []

    def second_chunk_fails(conn, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("injected: the second chunk fails before it commits")
        return real(conn, *args, **kwargs)

    monkeypatch.setattr(apply_module, "insert_applied_results", second_chunk_fails)
    with pytest.raises(RuntimeError, match="injected"):
        apply_results(wh, ticket_task, DAY1)
    first = q(wh, "SELECT count(*) AS n FROM ledger.applied_result")[0]["n"]
    assert 0 < first < LINES
    assert q(wh, "SELECT count(*) AS n FROM ticket_labels")[0]["n"] == first  # the failed chunk left nothing
    # A chunk is a range of item numbers: the first one written holds the lowest.
    lowest = q(
        wh,
        f"""SELECT custom_id FROM ledger.parsed_result WHERE provider_succeeded AND error_class IS NULL
                       ORDER BY item_no LIMIT {first}""",
    )
    assert q(wh, "SELECT custom_id FROM ledger.applied_result ORDER BY item_no") == lowest
    assert q(wh, "SELECT custom_id FROM ticket_labels ORDER BY custom_id") == sorted(
        lowest, key=lambda r: r["custom_id"]
    )

    monkeypatch.setattr(apply_module, "insert_applied_results", real)
    s = apply_results(wh, ticket_task, DAY1)
    assert (s.applied, s.stale) == (LINES - first, 0)
    assert q(wh, "SELECT count(*) AS n, count(DISTINCT custom_id) AS d FROM ledger.applied_result") == [
        {"n": LINES, "d": LINES}
    ]
    assert q(wh, "SELECT count(*) AS n, count(DISTINCT ticket_id) AS d FROM ticket_labels") == [
        {"n": LINES, "d": LINES}
    ]
    # The review picks are the task's rule over all answers, whichever chunk wrote them.
    expected = q(
        wh,
        """SELECT custom_id FROM ticket_labels
                        WHERE CAST('0x' || left(md5(custom_id), 8) AS UBIGINT) < 0.05 * 4294967296 OR confidence < 0.5
                        ORDER BY 1""",
    )
    assert q(wh, "SELECT custom_id FROM ledger.review_item ORDER BY 1") == expected
    balanced(wh)


@pytest.mark.slow
@pytest.mark.parametrize("source_order", ["by_business_id", "shuffled"])
def test_apply_chunks_write_their_keys_in_business_id_order(
    seeded_copy, ticket_task, adapter, wait_for_jobs, monkeypatch, source_order
):
    """Items are numbered in the source's order, and a chunk is a range of item numbers. A source
    that lists its rows by business id gives each chunk's keys in order as they are; one that does
    not gets each chunk sorted by business id before it is written (the business table's index
    takes keys in order faster). Every answer is written once either way."""
    import dataclasses

    if source_order == "shuffled":
        source = ticket_task.spec.source
        ticket_task = dataclasses.replace(
            ticket_task,
            spec=ticket_task.spec.model_copy(
                update={"source": source.model_copy(update={"sql": source.sql.rstrip() + "\nORDER BY hash(ticket_id)"})}
            ),
        )
    monkeypatch.setattr(apply_module, "APPLY_CHUNK", 7)
    monkeypatch.setattr(apply_module, "_COUNT_BLOCK", 4)  # so the order check sees several blocks
    real_write, written = apply_module._write_chunk, []

    def recorded(conn, *args, **kwargs):
        written.append([r[0] for r in conn.execute("SELECT business_id FROM _part ORDER BY rowid").fetchall()])
        return real_write(conn, *args, **kwargs)

    monkeypatch.setattr(apply_module, "_write_chunk", recorded)
    wh = seeded_copy
    submit_and_parse(wh, ticket_task, adapter, wait_for_jobs)
    with wh.connect() as conn:
        in_order = apply_module._ids_follow_item_numbers(conn, TASK_ID1)
    assert in_order == (source_order == "by_business_id")
    s = apply_results(wh, ticket_task, DAY1)
    assert (s.applied, s.stale) == (LINES, 0) and len(written) > 2
    assert all(ids == sorted(ids) for ids in written)
    assert sorted(i for ids in written for i in ids) == sorted(
        r["ticket_id"] for r in q(wh, "SELECT ticket_id FROM ticket_labels")
    )
    balanced(wh)


@pytest.mark.slow
def test_an_item_picked_for_review_before_its_apply_keeps_its_row(
    seeded_copy, ticket_task, adapter, wait_for_jobs, monkeypatch
):
    """Apply adds its review picks with a plain INSERT only while the task has no pick at all (its
    first apply); once it has one, an item that already holds a row keeps it, with its decision,
    and the apply goes through (here: a decided row for an item the rule picks, before its apply)."""
    wh = seeded_copy
    submit_and_parse(wh, ticket_task, adapter, wait_for_jobs)
    monkeypatch.setattr(apply_module, "APPLY_CHUNK", 7)
    rule = (
        "(CAST('0x' || left(md5(custom_id), 8) AS UBIGINT) < 0.05 * 4294967296 "
        "OR CAST(output_json ->> '$.confidence' AS DOUBLE) < 0.5)"
    )
    picked = q(
        wh,
        f"""SELECT custom_id FROM ledger.parsed_result WHERE provider_succeeded AND error_class IS NULL
                      AND {rule} ORDER BY item_no DESC LIMIT 1""",
    )[0]["custom_id"]
    with wh.connect() as conn:
        conn.execute(
            "INSERT INTO ledger.review_item VALUES (?, ?, 1, 'rate', 'approved', 'kept', now()::TIMESTAMP, "
            "now()::TIMESTAMP)",
            [picked, TASK_ID1],
        )
    s = apply_results(wh, ticket_task, DAY1)
    assert (s.applied, s.stale) == (LINES, 0)
    rows = q(wh, "SELECT custom_id, state, reason FROM ledger.review_item ORDER BY 1")
    expected = q(
        wh,
        f"SELECT custom_id FROM ledger.parsed_result WHERE provider_succeeded AND error_class IS NULL "
        f"AND {rule} ORDER BY 1",
    )
    assert [r["custom_id"] for r in rows] == [r["custom_id"] for r in expected] and len(rows) > 1
    assert {r["custom_id"]: (r["state"], r["reason"]) for r in rows}[picked] == ("approved", "kept")
    assert {r["state"] for r in rows if r["custom_id"] != picked} == {"pending"}
    balanced(wh)


@pytest.mark.slow
def test_a_chunk_that_reads_back_fewer_answers_than_its_candidates_writes_nothing(
    seeded_copy, ticket_task, adapter, wait_for_jobs, monkeypatch
):
    """Apply counts its outcomes from the candidates and writes each chunk from what it reads back
    from the ledger: a chunk that reads back fewer rows than its candidates fails before it writes
    anything (an answer counted but not written would look applied), and the chunks before it stand."""
    wh = seeded_copy
    submit_and_parse(wh, ticket_task, adapter, wait_for_jobs)
    monkeypatch.setattr(apply_module, "APPLY_CHUNK", 7)
    # The tenth answer in item order: the second chunk (answers 8-14) loses it.
    lost = q(
        wh,
        "SELECT item_no AS n FROM ledger.parsed_result WHERE provider_succeeded AND error_class IS NULL "
        "ORDER BY item_no LIMIT 1 OFFSET 9",
    )[0]["n"]
    real = apply_module._chunk_sql
    monkeypatch.setattr(apply_module, "_chunk_sql", lambda *a: f"SELECT * FROM ({real(*a)}) WHERE item_no <> {lost}")
    with pytest.raises(RuntimeError, match=r"read \d+ answers back for \d+ candidates; nothing of it was written"):
        apply_results(wh, ticket_task, DAY1)
    written = q(wh, "SELECT count(*) AS n FROM ledger.applied_result")[0]["n"]
    assert written == 7  # the first chunk only
    assert q(wh, "SELECT count(*) AS n FROM ticket_labels")[0]["n"] == written
    monkeypatch.setattr(apply_module, "_chunk_sql", real)
    s = apply_results(wh, ticket_task, DAY1)
    assert s.applied == LINES - written
    balanced(wh)


@pytest.mark.slow
def test_stale_results_are_not_applied_and_newer_rows_not_overwritten(seeded_copy, ticket_task, adapter, wait_for_jobs):
    wh = seeded_copy
    submit_and_parse(wh, ticket_task, adapter, wait_for_jobs)
    changed, newer = "TK-20261120-000001", "TK-20261120-000002"
    with wh.connect() as conn:
        # The source moves on after freezing: both tickets get edited ...
        conn.execute(
            "UPDATE support_tickets SET body = body || ' (edited later)' WHERE ticket_id IN (?, ?)", [changed, newer]
        )
        # ... and for one of them a newer answer was already written to the business table.
        ensure_target_table(conn, ticket_task)
        conn.execute(
            "INSERT INTO ticket_labels VALUES (?, 'account', 0.99, 'newer data', 'v1', 'newer-cid', "
            "'newer-hash', 'other_task', TIMESTAMP '2030-01-01 00:00:00')",
            [newer],
        )
    s = apply_results(wh, ticket_task, DAY1)
    assert (s.applied, s.stale) == (LINES - 2, 2)
    outcomes = {r["business_id"]: r["outcome"] for r in q(wh, "SELECT business_id, outcome FROM ledger.applied_result")}
    assert outcomes[changed] == outcomes[newer] == "stale"
    assert sum(o == "applied" for o in outcomes.values()) == LINES - 2
    labels = {r["ticket_id"]: r for r in q(wh, "SELECT * FROM ticket_labels")}
    assert changed not in labels
    assert (labels[newer]["reason"], labels[newer]["custom_id"], labels[newer]["category"]) == (
        "newer data",
        "newer-cid",
        "account",
    )
    assert len(labels) == LINES - 1
    r = balanced(wh)
    assert (r.applied, r.stale) == (LINES - 2, 2)
    # Applying again does not revisit stale decisions.
    assert (apply_results(wh, ticket_task, DAY1).applied, len(q(wh, "SELECT * FROM ticket_labels"))) == (0, LINES - 1)


@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 10, 11])
def test_apply_chunks_are_ranges_of_item_numbers_that_cover_every_candidate_once(monkeypatch, chunk):
    """The chunks of a large apply are ranges of item numbers (marks: where each chunk after the
    first starts): every candidate falls in exactly one, each holds about APPLY_CHUNK candidates,
    also where the numbers have gaps (items not among the candidates: failed, applied before)."""
    import duckdb

    monkeypatch.setattr(apply_module, "APPLY_CHUNK", chunk)
    numbers = [0, 1, 2, 5, 6, 7, 8, 20, 21, 40, 41, 42, 43, 44, 99]
    with duckdb.connect() as conn:
        conn.execute(
            "CREATE TEMP TABLE _live AS SELECT unnest(?::BIGINT[]) AS item_no, 1 AS attempt, true AS fresh", [numbers]
        )
        marks = apply_module._chunk_marks(conn, table_rows=0, any_held=False)
    bounds = [None, *marks, None]
    chunks = [
        [n for n in numbers if (lo is None or n >= lo) and (hi is None or n < hi)] for lo, hi in zip(bounds, bounds[1:])
    ]
    assert sorted(n for c in chunks for n in c) == numbers and all(chunks)
    assert [len(c) for c in chunks[:-1]] == [chunk] * (len(chunks) - 1)
    # The last chunk: what is left, or that and the chunk before when the two fit in 1.5x a chunk.
    cap = chunk + chunk // 2
    left = len(numbers) % chunk or chunk
    assert len(chunks[-1]) == (left + chunk if len(numbers) > chunk and left + chunk <= cap else left)


@pytest.mark.parametrize("candidates, marks", [(25, [10]), (26, [10, 20]), (15, []), (16, [10])])
def test_the_rows_after_the_last_mark_join_the_chunk_before_when_the_two_fit(monkeypatch, candidates, marks):
    """A sliver left after the last mark is not a transaction of its own: with chunks of 10 (at
    most 15 rows), 25 candidates are two chunks (10 and 15), 26 three (10, 10 and 6)."""
    import duckdb

    monkeypatch.setattr(apply_module, "APPLY_CHUNK", 10)
    with duckdb.connect() as conn:
        conn.execute(
            f"CREATE TEMP TABLE _live AS SELECT 3 * i AS item_no, 1 AS attempt, true AS fresh "
            f"FROM range({candidates}) t(i)"
        )
        assert apply_module._chunk_marks(conn, table_rows=0, any_held=False) == [3 * m for m in marks]


def test_apply_chunks_end_where_the_business_table_fills_whole_row_groups(monkeypatch):
    """Each chunk ends where the business table's row count (its rows before the apply plus the
    rows the chunks before appended: applied answers for keys it does not hold; stale answers and
    overwritten keys append none) reaches a multiple of its row group, about every APPLY_CHUNK
    appended rows. Checked against a plain re-count over the candidates in item order, with row
    groups of 100 rows and counting blocks of 64 (so marks fall inside blocks, and blocks without
    any appended row and numbers not among the candidates are met)."""
    import duckdb

    group, table_rows = 100, 1234
    monkeypatch.setattr(apply_module, "ROW_GROUP_ROWS", group)
    monkeypatch.setattr(apply_module, "_COUNT_BLOCK", 64)
    monkeypatch.setattr(apply_module, "APPLY_CHUNK", 590)  # rounds to 6 row groups
    with duckdb.connect() as conn:
        # 4,000 item numbers, every seventh not a candidate; 600-630 stale, 631-660 undecided (NULL:
        # not applied either); every 11th applied candidate's key is held already. Stored in
        # another order than their numbers. No chunk reaches 1.5x APPLY_CHUNK rows (see the next test).
        conn.execute("""CREATE TEMP TABLE _live AS
                        SELECT i AS item_no, 1 AS attempt,
                               CASE WHEN i BETWEEN 600 AND 630 THEN false
                                    WHEN i BETWEEN 631 AND 660 THEN NULL ELSE true END AS fresh
                        FROM range(4000) t(i) WHERE i % 7 <> 3 ORDER BY hash(i)""")
        conn.execute("CREATE TEMP TABLE _held AS SELECT item_no FROM _live WHERE fresh AND hash(item_no) % 11 = 0")
        rows = conn.execute("""SELECT item_no, coalesce(fresh, false) AND item_no NOT IN (SELECT item_no FROM _held)
                               FROM _live ORDER BY item_no""").fetchall()
        marks = apply_module._chunk_marks(conn, table_rows=table_rows, any_held=True)

    appended_before, count = {}, 0
    for item_no, appends in rows:
        appended_before[item_no] = count
        count += appends
    # The oracle: the candidate of each mark (the first appended row past every 600 appended rows,
    # the first chunk 566 rows: 1,234 + 566 = 1,800 fills the table's row groups).
    expected = [
        n for n, appends in rows if appends and appended_before[n] >= 566 and (appended_before[n] - 566) % 600 == 0
    ]
    # ... but the rows after the last one (142 here) join the chunk before: with it, 900 rows at most.
    assert sum(1 for n, _ in rows if n >= expected[-2]) <= 900
    assert marks == expected[:-1] and len(marks) >= 4
    assert all((table_rows + appended_before[m]) % group == 0 for m in marks)


@pytest.mark.parametrize("case", ["all_stale", "all_held"])
def test_apply_chunks_stay_bounded_when_no_answer_appends_a_row(monkeypatch, case):
    """Answers that append nothing to the business table (stale ones, keys it holds and overwrites)
    still fill a chunk: with every answer stale, or every key held, the chunks are cut at the start
    of the counting block where a chunk would pass 1.5x APPLY_CHUNK rows (here 450: blocks of 64
    item numbers, so every 448), not left as one transaction of everything."""
    import duckdb

    monkeypatch.setattr(apply_module, "ROW_GROUP_ROWS", 100)
    monkeypatch.setattr(apply_module, "_COUNT_BLOCK", 64)
    monkeypatch.setattr(apply_module, "APPLY_CHUNK", 290)  # rounds to 300 rows
    with duckdb.connect() as conn:
        conn.execute(
            f"CREATE TEMP TABLE _live AS SELECT i AS item_no, 1 AS attempt, {case == 'all_held'} AS fresh "
            "FROM range(2000) t(i)"
        )
        conn.execute("CREATE TEMP TABLE _held AS SELECT item_no FROM _live")
        marks = apply_module._chunk_marks(conn, table_rows=7, any_held=case == "all_held")
    assert marks == [448, 896, 1344, 1792]


def test_the_row_group_the_apply_chunks_align_to_is_duckdbs():
    """ROW_GROUP_ROWS is the row group of a warehouse table (a DuckDB upgrade that changes it would
    leave the chunks misaligned, which costs time, not correctness)."""
    import duckdb

    group = apply_module.ROW_GROUP_ROWS
    with duckdb.connect() as conn:
        conn.execute(f"CREATE TABLE t AS SELECT i FROM range({group + 1}) r(i)")
        counts = conn.execute(
            "SELECT row_group_id, sum(count) FROM pragma_storage_info('t') "
            "WHERE column_path = '[0]' GROUP BY 1 ORDER BY 1"
        ).fetchall()
    assert [c for _, c in counts] == [group, 1]
