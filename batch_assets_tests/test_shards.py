"""Stage 2, shards: every line validated on its own and bad ones quarantined with a reason;
shards cut by the provider's limits (requests, bytes, bytes per line); provider-ready JSONL in the
OpenAI batch input format; tampering detected before submission; provider-safe request ids."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
from pathlib import Path

import duckdb
import pytest

from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards, verify_shards

from .conftest import DAY1, DAY2

TASK_ID1 = "ticket_triage_20261120"
ITEMS, QUARANTINED = (
    58,
    8,
)  # per seeded day: 58 keyable tickets; 2 empty + 1 NULL body, 2 over the token budget,
# 3 card numbers blocked by the policy


def limited(task, **limits):
    return dataclasses.replace(task, limits=dataclasses.replace(task.limits, **limits))


def copy_of(wh: Warehouse, path: Path) -> Warehouse:
    """Another warehouse with the same (unfrozen) content."""
    other = Warehouse.at(path / "warehouse.duckdb", path / "data")
    other.database.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(wh.database, other.database)
    return other


def add_ticket(wh, ticket_id: str, body: str, day: str = DAY1, subject: str = "Help") -> None:
    with wh.connect() as conn:
        conn.execute(
            "INSERT INTO support_tickets (ticket_id, created_date, subject, body, language) "
            "VALUES (?, ?::DATE, ?, ?, 'en')",
            [ticket_id, day, subject, body],
        )


def freeze_and_cut(wh, task, day: str = DAY1):
    freeze_manifest(wh, task, day)
    return cut_shards(wh, task, day)


def rows(wh, sql: str, params=None) -> list[dict]:
    with wh.connect() as conn:
        cur = conn.execute(sql, params or [])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def shard_rows(wh, task_id: str = TASK_ID1) -> list[dict]:
    return rows(wh, "SELECT * FROM ledger.shard WHERE task_id = ? ORDER BY shard_no", [task_id])


def file_lines(path: str) -> list[bytes]:
    data = Path(path).read_bytes()
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


def assert_partition_accounted(wh, task_id: str = TASK_ID1) -> None:
    """Every current manifest item is in exactly one place: a shard line or the quarantine."""
    with wh.connect() as conn:
        items = {
            r[0]
            for r in conn.execute(
                "SELECT custom_id FROM ledger.manifest_item WHERE task_id = ? AND superseded_at IS NULL", [task_id]
            ).fetchall()
        }
        lines = [
            r[0]
            for r in conn.execute("SELECT custom_id FROM ledger.shard_line WHERE task_id = ?", [task_id]).fetchall()
        ]
        quarantined = {
            r[0]
            for r in conn.execute("SELECT custom_id FROM ledger.quarantine WHERE task_id = ?", [task_id]).fetchall()
        }
    assert len(lines) == len(set(lines)), "an item is in two shard lines"
    assert not set(lines) & quarantined
    assert set(lines) | quarantined == items


# --- line validation and quarantine ------------------------------------------------------------------


def test_bad_lines_are_quarantined_with_reason_and_fix_the_rest_sharded(seeded_copy, ticket_task):
    wh = seeded_copy
    add_ticket(wh, "BIG-1", "please look at this " + "x" * 5000)  # ~1,300 tokens: within budget, a long line
    task = limited(ticket_task, max_line_bytes=4000)  # normal lines are ~1.2-1.7 kB
    s = freeze_and_cut(wh, task)
    assert (s.lines, s.quarantined) == (ITEMS + 1 - QUARANTINED - 1, QUARANTINED + 1)
    q = {
        r["business_id"]: r
        for r in rows(
            wh,
            """
        SELECT m.business_id, q.reason_code, q.reason
        FROM ledger.quarantine q JOIN ledger.manifest_item m USING (custom_id)
        WHERE q.task_id = ?""",
            [TASK_ID1],
        )
    }
    with wh.connect() as conn:
        blank = {
            r[0]
            for r in conn.execute(
                "SELECT ticket_id FROM support_tickets WHERE created_date = ?::DATE AND trim(coalesce(body, '')) = ''",
                [DAY1],
            ).fetchall()
        }
        null_body = {
            r[0]
            for r in conn.execute(
                "SELECT ticket_id FROM support_tickets WHERE created_date = ?::DATE AND body IS NULL", [DAY1]
            ).fetchall()
        }
        long = {
            r[0]
            for r in conn.execute(
                "SELECT ticket_id FROM support_tickets WHERE created_date = ?::DATE AND length(body) > 40000", [DAY1]
            ).fetchall()
        }
    assert len(blank) == 3 and len(null_body) == 1 and len(long) == 2
    blocked = {b for b, r in q.items() if r["reason_code"] == "blocked_by_policy"}
    assert len(blocked) == 3 and all("card in column body" in q[b]["reason"] for b in blocked)
    assert set(q) == blank | long | {"BIG-1"} | blocked
    for bid in blank:  # empty '' and NULL bodies alike
        assert q[bid]["reason_code"] == "empty_input"
        assert bid in q[bid]["reason"] and "body" in q[bid]["reason"]
        assert "fix the source row or adjust source.required_columns" in q[bid]["reason"]
    for bid in long:
        assert q[bid]["reason_code"] == "over_token_budget"
        assert re.search(r"estimated \d+ input tokens > max_input_tokens 6000", q[bid]["reason"])
        assert "raise max_input_tokens" in q[bid]["reason"]
    assert q["BIG-1"]["reason_code"] == "line_too_large"
    assert re.search(r"request line of \d+ bytes > provider limit 4000 bytes", q["BIG-1"]["reason"])
    assert "override limits.max_line_bytes" in q["BIG-1"]["reason"]
    assert_partition_accounted(wh)
    assert verify_shards(wh, task, DAY1)[0] == []


def test_line_exactly_at_max_line_bytes_is_accepted_one_byte_over_is_quarantined(seeded_copy, tmp_path, ticket_task):
    for day in (DAY1, DAY2):  # the same ticket on both days: lines of the same length
        add_ticket(seeded_copy, "BIG-1", "please look at this " + "x" * 5000, day=day)
    probe = copy_of(seeded_copy, tmp_path / "probe")
    freeze_and_cut(probe, ticket_task, DAY1)
    (size,) = [
        r["line_bytes"]
        for r in rows(probe, "SELECT line_bytes FROM ledger.shard_line WHERE custom_id LIKE '%:BIG-1:%'")
    ]
    normal_max = rows(probe, "SELECT max(line_bytes) AS m FROM ledger.shard_line WHERE custom_id NOT LIKE '%:BIG-1:%'")[
        0
    ]["m"]
    assert size > normal_max

    wh = seeded_copy
    at = freeze_and_cut(wh, limited(ticket_task, max_line_bytes=size), DAY1)
    over = freeze_and_cut(wh, limited(ticket_task, max_line_bytes=size - 1), DAY2)
    assert (at.lines, at.quarantined) == (ITEMS + 1 - QUARANTINED, QUARANTINED)
    assert (over.lines, over.quarantined) == (ITEMS - QUARANTINED, QUARANTINED + 1)
    got = rows(wh, "SELECT task_id, line_bytes FROM ledger.shard_line WHERE custom_id LIKE '%:BIG-1:%'")
    assert [(r["task_id"], r["line_bytes"]) for r in got] == [(TASK_ID1, size)]
    q = rows(
        wh,
        "SELECT reason_code FROM ledger.quarantine WHERE task_id = 'ticket_triage_20261121' "
        "AND custom_id LIKE '%:BIG-1:%'",
    )
    assert q == [{"reason_code": "line_too_large"}]


# --- shard limits ------------------------------------------------------------------------------------


def test_shards_respect_max_requests_per_shard(seeded_copy, ticket_task):
    wh = seeded_copy
    task = limited(ticket_task, max_requests_per_shard=7)
    s = freeze_and_cut(wh, task)
    shards = shard_rows(wh)
    assert len(shards) == s.total_shards == -(-(ITEMS - QUARANTINED) // 7) == 8
    for sh in shards:
        lines = file_lines(sh["path"])
        assert len(lines) == sh["line_count"] <= 7
    assert sum(sh["line_count"] for sh in shards) + s.quarantined == ITEMS
    assert sorted(sh["line_count"] for sh in shards) == [1] + [7] * 7
    assert verify_shards(wh, task, DAY1)[0] == []
    assert_partition_accounted(wh)


def test_shards_respect_max_shard_bytes(seeded_copy, ticket_task):
    wh = seeded_copy
    task = limited(ticket_task, max_shard_bytes=5000)  # 2-4 lines of ~1.2-1.7 kB each
    s = freeze_and_cut(wh, task)
    shards = shard_rows(wh)
    assert len(shards) > 10
    for sh in shards:
        size = Path(sh["path"]).stat().st_size
        assert size == sh["byte_count"] <= 5000
        assert len(file_lines(sh["path"])) == sh["line_count"]
    assert sum(sh["line_count"] for sh in shards) + s.quarantined == ITEMS
    assert verify_shards(wh, task, DAY1)[0] == []
    assert_partition_accounted(wh)


def test_shards_respect_all_limits_together(seeded_copy, ticket_task):
    wh = seeded_copy
    task = limited(ticket_task, max_requests_per_shard=3, max_shard_bytes=4000, max_enqueued_tokens=1200)
    s = freeze_and_cut(wh, task)
    for sh in shard_rows(wh):
        assert sh["line_count"] <= 3 and sh["byte_count"] <= 4000 and sh["est_tokens"] <= 1200
        assert Path(sh["path"]).stat().st_size == sh["byte_count"]
    assert s.lines + s.quarantined == ITEMS
    assert verify_shards(wh, task, DAY1)[0] == []


def test_verify_accepts_a_shard_exactly_at_the_byte_limit(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_and_cut(wh, ticket_task)
    (shard,) = shard_rows(wh)
    exact = limited(ticket_task, max_shard_bytes=shard["byte_count"])
    assert verify_shards(wh, exact, DAY1)[0] == []
    one_less = limited(ticket_task, max_shard_bytes=shard["byte_count"] - 1)
    problems = verify_shards(wh, one_less, DAY1)[0]
    assert len(problems) == 1 and f"limit {shard['byte_count'] - 1}" in problems[0]


def test_lines_fitting_exactly_into_max_shard_bytes_make_one_shard(seeded_copy, tmp_path, ticket_task):
    probe = copy_of(seeded_copy, tmp_path / "probe")
    freeze_and_cut(probe, ticket_task)
    (whole,) = shard_rows(probe)
    wh = seeded_copy
    task = limited(ticket_task, max_shard_bytes=whole["byte_count"])
    s = freeze_and_cut(wh, task)
    assert [(sh["line_count"], sh["byte_count"]) for sh in shard_rows(wh)] == [(s.lines, whole["byte_count"])]


def test_recutting_adds_nothing(seeded_copy, ticket_task):
    wh = seeded_copy
    task = limited(ticket_task, max_requests_per_shard=10)
    first = freeze_and_cut(wh, task)
    before = (
        shard_rows(wh),
        rows(wh, "SELECT * FROM ledger.shard_line ORDER BY shard_id, line_no"),
        rows(wh, "SELECT * FROM ledger.quarantine ORDER BY custom_id"),
    )
    files = {sh["path"]: Path(sh["path"]).read_bytes() for sh in before[0]}
    again = cut_shards(wh, task, DAY1)
    assert (again.new_shards, again.lines, again.quarantined, again.total_shards) == ([], 0, 0, first.total_shards)
    after = (
        shard_rows(wh),
        rows(wh, "SELECT * FROM ledger.shard_line ORDER BY shard_id, line_no"),
        rows(wh, "SELECT * FROM ledger.quarantine ORDER BY custom_id"),
    )
    assert after == before
    assert {p: Path(p).read_bytes() for p in files} == files
    assert len(list(Path(before[0][0]["path"]).parent.iterdir())) == len(files)


def _cut_snapshot(wh) -> tuple:
    shards = [{k: v for k, v in sh.items() if k != "created_at"} for sh in shard_rows(wh)]
    return (
        shards,
        rows(wh, "SELECT * FROM ledger.shard_line ORDER BY shard_id, line_no"),
        rows(wh, "SELECT custom_id, reason_code, reason FROM ledger.quarantine ORDER BY custom_id"),
        {Path(sh["path"]).name: Path(sh["path"]).read_bytes() for sh in shards},
    )


def test_the_cut_is_the_same_however_the_lines_are_batched(seeded_copy, tmp_path, ticket_task, monkeypatch):
    """The lines stream out of DuckDB in batches; shards span batches, start exactly at a batch's
    first line, and quarantined lines fall between good ones. Every batch size gives the same
    files and ledger rows, and the lines keep the frozen Parquet's row order, in the ledger too."""
    from batch_assets.pipeline.send import shards as shards_module

    task = limited(ticket_task, max_requests_per_shard=3, max_shard_bytes=4000, max_enqueued_tokens=1200)
    snapshots = {}
    for batch in (1, 2, 3, 5, 64, 1 << 16):
        wh = copy_of(seeded_copy, tmp_path / f"batch{batch}")
        monkeypatch.setattr(shards_module, "STREAM_BATCH_ROWS", batch)
        s = freeze_and_cut(wh, task)
        assert s.lines + s.quarantined == ITEMS and s.quarantined == QUARANTINED
        assert verify_shards(wh, task, DAY1)[0] == []
        assert_partition_accounted(wh)
        snapshots[batch] = _cut_snapshot(wh)
        uri = rows(wh, "SELECT manifest_uri FROM ledger.batch_task WHERE task_id = ?", [TASK_ID1])[0]["manifest_uri"]
        frozen_order = [r["custom_id"] for r in rows(wh, f"SELECT custom_id FROM read_parquet('{uri}')")]
        quarantined = {q["custom_id"] for q in snapshots[batch][2]}
        assert [line["custom_id"] for line in snapshots[batch][1]] == [c for c in frozen_order if c not in quarantined]
        # Stored shard after shard in the cut's order: a shard's lines are one run of the table,
        # which ingest reads by row range (_line_spans).
        stored = rows(wh, "SELECT shard_id, line_no FROM ledger.shard_line ORDER BY rowid")
        assert stored == rows(
            wh,
            """SELECT l.shard_id, l.line_no FROM ledger.shard_line l JOIN ledger.shard s USING (shard_id)
                                     ORDER BY s.attempt, s.shard_no, l.line_no""",
        ), batch
    assert len(snapshots[1][0]) > 10
    for batch, snapshot in snapshots.items():
        # the shard paths differ by folder only; everything else is identical
        assert [{**sh, "path": Path(sh["path"]).name} for sh in snapshot[0]] == [
            {**sh, "path": Path(sh["path"]).name} for sh in snapshots[1][0]
        ], batch
        assert snapshot[1:] == snapshots[1][1:], batch


# --- the line format ---------------------------------------------------------------------------------


def test_lines_stream_in_batches_of_about_a_fixed_size_in_bytes(tmp_path):
    """A batch of streamed lines costs several times its bytes outside DuckDB's pool, so its line
    count follows the prompts' size: long prompts, fewer lines (repeated texts too, which the
    Parquet stores once)."""
    from batch_assets.pipeline.send import shards as shards_module

    def batch_rows(prompt: str, items: int = 200) -> int:
        path = tmp_path / "m.parquet"
        with duckdb.connect() as conn:
            conn.execute(
                f"COPY (SELECT 'c' || i AS custom_id, {prompt} AS prompt_text FROM range({items}) t(i)) "
                f"TO '{path}' (FORMAT parquet)"
            )
            return shards_module.stream_batch_rows(conn, str(path))

    target, envelope = shards_module.STREAM_BATCH_BYTES, shards_module.LINE_ENVELOPE_BYTES
    assert batch_rows("repeat('x', 100000)") == target // (100_000 + envelope)
    assert batch_rows("repeat('é', 450) || lpad(i::VARCHAR, 3, '0')") == target // (
        900 + 3 + envelope
    )  # bytes, not characters
    assert batch_rows("repeat('x', 900)") < shards_module.STREAM_BATCH_ROWS
    assert batch_rows("repeat('x', 20000000)", items=2) == shards_module.MIN_STREAM_BATCH_ROWS  # a floor
    assert batch_rows("''") == min(shards_module.STREAM_BATCH_ROWS, target // envelope)


def test_the_cut_streams_its_lines_in_batches_sized_by_bytes(seeded_copy, ticket_task, monkeypatch):
    """The cut asks stream_batch_rows how many lines a batch holds: with a target of ten lines'
    bytes, no batch is larger, and the cut is still whole."""
    from batch_assets.pipeline.send import shards as shards_module

    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    sizes, real_write_batch = [], shards_module._write_batch

    def recording_write_batch(packer, files, spool, batch, *args):
        sizes.append(batch.num_rows)
        real_write_batch(packer, files, spool, batch, *args)

    monkeypatch.setattr(shards_module, "_write_batch", recording_write_batch)
    monkeypatch.setattr(shards_module, "MIN_STREAM_BATCH_ROWS", 1)
    monkeypatch.setattr(shards_module, "STREAM_BATCH_BYTES", 10 * shards_module.LINE_ENVELOPE_BYTES)
    s = cut_shards(wh, ticket_task, DAY1)
    assert s.lines + s.quarantined == ITEMS
    assert sum(sizes) == ITEMS and len(sizes) > 1
    assert 1 <= max(sizes) <= 10


def test_every_line_is_an_openai_batch_request(seeded_copy, ticket_task):
    wh = seeded_copy
    task = limited(ticket_task, max_requests_per_shard=20)
    freeze_and_cut(wh, task)
    uri = rows(wh, "SELECT manifest_uri FROM ledger.batch_task WHERE task_id = ?", [TASK_ID1])[0]["manifest_uri"]
    with duckdb.connect() as conn:
        prompts = dict(conn.execute("SELECT custom_id, prompt_text FROM read_parquet(?)", [uri]).fetchall())
    ledger_lines = {(r["shard_id"], r["line_no"]): r for r in rows(wh, "SELECT * FROM ledger.shard_line")}
    seen = 0
    for sh in shard_rows(wh):
        assert hashlib.sha256(Path(sh["path"]).read_bytes()).hexdigest() == sh["sha256"]
        for n, raw in enumerate(file_lines(sh["path"]), start=1):
            line = json.loads(raw)
            rec = ledger_lines[(sh["shard_id"], n)]
            assert len(raw) == rec["line_bytes"]
            assert set(line) == {"custom_id", "method", "url", "body"}
            assert line["custom_id"] == rec["request_id"] == rec["custom_id"]  # short ASCII ids go as they are
            assert (line["method"], line["url"]) == ("POST", "/v1/chat/completions")
            body = line["body"]
            assert body["model"] == "gpt-4o-mini"
            assert (body["temperature"], body["max_completion_tokens"]) == (0.0, 200) and "max_tokens" not in body
            system, user = body["messages"]
            assert system == {"role": "system", "content": ticket_task.spec.prompt.system}
            assert user == {"role": "user", "content": prompts[rec["custom_id"]]}
            assert body["response_format"] == {
                "type": "json_schema",
                "json_schema": {"name": "ticket_triage", "strict": True, "schema": ticket_task.output_schema},
            }
            seen += 1
    assert seen == ITEMS - QUARANTINED


def test_json_hazards_in_the_source_survive_rendering(seeded_copy, ticket_task):
    """Quotes, backslashes, tabs, newlines, emoji, RTL and combining marks round-trip exactly."""
    wh = seeded_copy
    hazard = 'a "quote", a \\ backslash,\ta tab\nnew line 👨‍👩‍👧 ‏שלום e\u0301 end'
    add_ticket(wh, "HZ-1", hazard, subject='say "hi"')
    freeze_and_cut(wh, ticket_task)
    (sh,) = shard_rows(wh)
    (line,) = [json.loads(raw) for raw in file_lines(sh["path"]) if b"HZ-1" in raw]
    assert hazard in line["body"]["messages"][1]["content"]
    assert 'Subject: say "hi"' in line["body"]["messages"][1]["content"]


# --- tamper detection --------------------------------------------------------------------------------


def test_verify_detects_a_tampered_and_a_deleted_shard(seeded_copy, ticket_task):
    wh = seeded_copy
    task = limited(ticket_task, max_requests_per_shard=20)
    freeze_and_cut(wh, task)
    first, second, third = shard_rows(wh)
    assert verify_shards(wh, task, DAY1)[0] == []
    data = bytearray(Path(first["path"]).read_bytes())
    data[100] = ord("X") if data[100] != ord("X") else ord("Y")  # same size, different content
    Path(first["path"]).write_bytes(bytes(data))
    Path(second["path"]).unlink()
    problems, counts = verify_shards(wh, task, DAY1)
    assert any(first["shard_id"] in p and "sha256 mismatch" in p for p in problems), problems
    assert any(second["shard_id"] in p and "is missing" in p for p in problems), problems
    assert not any(third["shard_id"] in p for p in problems)
    assert counts == {
        "manifest_items": ITEMS,
        "shard_lines": ITEMS - QUARANTINED,
        "quarantined": QUARANTINED,
        "shards": 3,
        "retry_lines": 0,
    }


def test_verify_detects_a_truncated_shard(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_and_cut(wh, ticket_task)
    (sh,) = shard_rows(wh)
    lines = file_lines(sh["path"])
    Path(sh["path"]).write_bytes(b"\n".join(lines[:-1]) + b"\n")
    problems = verify_shards(wh, ticket_task, DAY1)[0]
    assert any("sha256 mismatch" in p for p in problems)
    assert any(f"{len(lines) - 1} lines on disk, {len(lines)} recorded" in p for p in problems), problems


# --- provider-safe request ids -------------------------------------------------------------------------


def test_custom_ids_the_provider_rejects_get_a_stored_safe_request_id(seeded_copy, ticket_task):
    wh = seeded_copy
    prefix_len = len(f"{TASK_ID1}:ticket:") + len(":12345678")  # custom_id = prefix + business id + hash
    fits, too_long = "F" * (64 - prefix_len), "L" * (65 - prefix_len)
    for bid in (fits, too_long, "工单-7", "tab\there"):
        add_ticket(wh, bid, f"ticket {bid} cannot log in")
    freeze_and_cut(wh, ticket_task)
    got = {
        r["business_id"]: r
        for r in rows(
            wh,
            """
        SELECT m.business_id, sl.custom_id, sl.request_id, sl.shard_id, sl.line_no
        FROM ledger.shard_line sl JOIN ledger.manifest_item m USING (custom_id) WHERE sl.task_id = ?""",
            [TASK_ID1],
        )
    }
    assert len(got[fits]["custom_id"]) == 64 and got[fits]["request_id"] == got[fits]["custom_id"]
    assert len(got[too_long]["custom_id"]) == 65
    for bid in (too_long, "工单-7", "tab\there"):
        rid = got[bid]["request_id"]
        assert re.fullmatch(r"bx_[0-9a-f]{40}", rid), rid
        assert got[bid]["custom_id"].split(":")[2] == bid  # the mapping keeps the business id
    mapped = [got[b]["request_id"] for b in (too_long, "工单-7", "tab\there")]
    assert len(set(mapped)) == 3
    ordinary = [r for b, r in got.items() if b.startswith("TK-")]
    assert ordinary and all(r["request_id"] == r["custom_id"] for r in ordinary)
    # What is in the file is the request id, and it maps back through shard_line.
    (sh,) = shard_rows(wh)
    sent = {json.loads(raw)["custom_id"] for raw in file_lines(sh["path"])}
    assert set(mapped) <= sent and not any(got[b]["custom_id"] in sent for b in (too_long, "工单-7"))
    assert all(len(x) <= 64 and re.fullmatch(r"[\x20-\x7e]+", x) for x in sent)


def test_a_failed_shard_write_records_nothing_and_a_rerun_cuts_the_same(
    seeded_copy, tmp_path, ticket_task, monkeypatch
):
    """The files are written on a background thread while the lines stream: a write that fails there
    fails the cut, nothing of it reaches the ledger (the partition stays FROZEN, no spool is left
    behind) and running it again cuts exactly what an undisturbed cut does."""
    from batch_assets.pipeline.send import shards as shards_module

    task = limited(ticket_task, max_requests_per_shard=3, max_shard_bytes=4000, max_enqueued_tokens=1200)
    clean = copy_of(seeded_copy, tmp_path / "clean")
    freeze_and_cut(clean, task)
    expected = _cut_snapshot(clean)

    wh = seeded_copy
    freeze_manifest(wh, task, DAY1)
    monkeypatch.setattr(shards_module, "STREAM_BATCH_ROWS", 4)
    real_write, calls = shards_module._ShardFiles._write, []

    def failing_write(self, data):
        calls.append(len(data))
        if len(calls) == 5:
            raise OSError(28, "No space left on device")
        real_write(self, data)

    monkeypatch.setattr(shards_module._ShardFiles, "_write", failing_write)
    with pytest.raises(OSError, match="No space left"):
        cut_shards(wh, task, DAY1)
    assert rows(
        wh,
        "SELECT (SELECT count(*) FROM ledger.shard) AS shards, (SELECT count(*) FROM ledger.shard_line) "
        "AS lines, (SELECT count(*) FROM ledger.quarantine) AS quarantined, "
        "(SELECT status FROM ledger.batch_task) AS status",
    ) == [{"shards": 0, "lines": 0, "quarantined": 0, "status": "FROZEN"}]
    assert not any((wh.data_dir / "tmp").iterdir())

    monkeypatch.setattr(shards_module._ShardFiles, "_write", real_write)
    cut_shards(wh, task, DAY1)
    again = _cut_snapshot(wh)
    assert [{**sh, "path": Path(sh["path"]).name} for sh in again[0]] == [
        {**sh, "path": Path(sh["path"]).name} for sh in expected[0]
    ]
    assert again[1:] == expected[1:]
    assert verify_shards(wh, task, DAY1)[0] == []


def test_a_cut_sweeps_the_spool_of_a_killed_cut_and_leaves_a_live_one(seeded_copy, ticket_task):
    """A cut killed before its cleanup leaves its spool folder behind; the next cut removes it. The
    spool of a process that is alive (another partition being cut now) stays."""
    import os

    wh = seeded_copy
    tmp = wh.data_dir / "tmp"
    dead = tmp / "cut-4194305-0123abcd"  # above Linux's largest pid (2**22): no such process
    live = tmp / f"cut-{os.getppid()}-4567ef01"
    for folder in (dead, live):
        folder.mkdir(parents=True)
        (folder / "lines.parquet").write_bytes(b"partial")
    freeze_and_cut(wh, ticket_task)
    assert not dead.exists() and live.exists()
    assert sorted(p.name for p in tmp.iterdir()) == [live.name]


def test_lines_carry_their_items_numbers_also_from_a_manifest_frozen_before_item_numbers(seeded_copy, ticket_task):
    """Every shard line and quarantined item carries its manifest item's number. A manifest frozen
    before item numbers has no number columns in its Parquet: its lines take the numbers from
    ledger.manifest_item (numbered by the migration)."""
    wh = seeded_copy
    add_ticket(wh, "EMPTY-1", "")  # quarantined: empty input
    s = freeze_manifest(wh, ticket_task, DAY1)
    with duckdb.connect() as conn:  # the Parquet as an older freeze wrote it
        old = s.manifest_uri + ".old"
        conn.execute(
            f"COPY (SELECT * EXCLUDE (item_no_base, earlier_no) FROM read_parquet('{s.manifest_uri}')) "
            f"TO '{old}' (FORMAT parquet)"
        )
    Path(old).replace(s.manifest_uri)
    cut = cut_shards(wh, ticket_task, DAY1)
    assert cut.lines > 0 and cut.quarantined > 0  # the seed's own quarantined items and the empty one
    with wh.connect() as conn:
        for table in ("shard_line", "quarantine"):
            rows = conn.execute(f"""SELECT t.item_no, m.item_no FROM ledger.{table} t
                                    JOIN ledger.manifest_item m USING (custom_id)""").fetchall()
            assert rows and all(a is not None and a == b for a, b in rows), table


def test_lines_carry_their_items_numbers(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    with wh.connect() as conn:
        rows = conn.execute("""SELECT t.item_no, m.item_no FROM ledger.shard_line t
                               JOIN ledger.manifest_item m USING (custom_id)""").fetchall()
        distinct = conn.execute("SELECT count(DISTINCT item_no), count(*) FROM ledger.manifest_item").fetchone()
    assert rows and all(a is not None and a == b for a, b in rows)
    assert distinct[0] == distinct[1]


def test_a_refrozen_manifest_is_cut_by_item_number_each_item_once_with_its_own_text(seeded_copy, ticket_task):
    """The cut finds an item's frozen row by its number: a kept item's row carries its earlier number
    (earlier_no), a new or changed one base + its row. After a refreeze every current item that is
    not quarantined is cut exactly once, under its current custom_id, with its current text."""
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    with wh.connect() as conn:
        conn.execute("UPDATE support_tickets SET body = body || ' (edited)' WHERE ticket_id = 'TK-20261120-000002'")
    add_ticket(wh, "TK-NEW-7", "my parcel never arrived, order 7")
    s = freeze_manifest(wh, ticket_task, DAY1, refreeze=True)
    assert s.manifest_version == 2 and s.new_items == 2
    with duckdb.connect() as conn:  # the Parquet mixes kept numbers and numbers after the base
        kept, numbered_after_base = conn.execute(
            f"SELECT count(earlier_no), count(*) - count(earlier_no) FROM read_parquet('{s.manifest_uri}')"
        ).fetchone()
    assert kept > 0 and numbered_after_base == 2
    cut = cut_shards(wh, ticket_task, DAY1)
    current = rows(
        wh,
        """SELECT custom_id, item_no, business_id FROM ledger.manifest_item
                          WHERE task_id = ? AND superseded_at IS NULL
                            AND custom_id NOT IN (SELECT custom_id FROM ledger.quarantine)""",
        [TASK_ID1],
    )
    lines = rows(
        wh, "SELECT custom_id, item_no, request_id, shard_id FROM ledger.shard_line WHERE task_id = ?", [TASK_ID1]
    )
    assert cut.lines == len(lines) == len(current)
    assert sorted((r["custom_id"], r["item_no"]) for r in lines) == sorted(
        (r["custom_id"], r["item_no"]) for r in current
    )
    sent = {}
    for shard in shard_rows(wh):
        for raw in Path(shard["path"]).read_text(encoding="utf-8").splitlines():
            line = json.loads(raw)
            sent[line["custom_id"]] = json.dumps(line["body"], ensure_ascii=False)
    by_ticket = {r["business_id"]: r["custom_id"] for r in current}
    request_of = {r["custom_id"]: r["request_id"] for r in lines}
    assert "(edited)" in sent[request_of[by_ticket["TK-20261120-000002"]]]
    assert "order 7" in sent[request_of[by_ticket["TK-NEW-7"]]]
    assert "(edited)" not in sent[request_of[by_ticket["TK-20261120-000003"]]]
