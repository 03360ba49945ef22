"""Stage 1, the input manifest: frozen once, reused without re-querying, refrozen
explicitly with stable custom_ids; task_id/input_hash/custom_id as documented; bad source rows named,
nothing else lost."""

from __future__ import annotations

import dataclasses
import re

import duckdb
import pytest

from batch_assets.pipeline.errors import SourceQueryError
from batch_assets.pipeline.freeze.frozen import frozen_item_no_sql
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards, verify_shards
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.spec.model import SourceSpec

from .conftest import DAY1, DAY2

TASK_ID1 = "ticket_triage_20261120"
# Per seeded day: 60 rows, one ticket_id twice -> 58 distinct keyable ids, 1 rejected id (2 rows).
ITEMS_PER_DAY = 58


def manifest_rows(wh, task_id: str = TASK_ID1, current_only: bool = True) -> dict[str, dict]:
    """business_id -> manifest row (the current items by default)."""
    with wh.connect() as conn:
        cur = conn.execute(
            "SELECT * FROM ledger.manifest_item WHERE task_id = ?"
            + (" AND superseded_at IS NULL" if current_only else ""),
            [task_id],
        )
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    return {r["business_id"]: r for r in rows} if current_only else rows


def _frozen(wh, conn, task_id: str = TASK_ID1) -> str:
    """The partition's frozen manifest as a local file, as apply hands it to its stale guard."""
    from batch_assets.pipeline.freeze.frozen import frozen_manifest

    return frozen_manifest(conn, wh.files, task_id)


def parquet_rows(path: str) -> dict[str, dict]:
    with duckdb.connect() as conn:
        cur = conn.execute("SELECT * FROM read_parquet(?)", [path])
        cols = [d[0] for d in cur.description]
        return {r[0]: dict(zip(cols, r)) for r in cur.fetchall()}


def duplicated_id(wh, day: str = DAY1) -> str:
    with wh.connect() as conn:
        return conn.execute(
            "SELECT ticket_id FROM support_tickets WHERE created_date = ?::DATE GROUP BY 1 HAVING count(*) > 1", [day]
        ).fetchone()[0]


def with_spec(task, **changes):
    return dataclasses.replace(task, spec=task.spec.model_copy(update=changes))


# --- freezing -------------------------------------------------------------------------------------------


def test_freeze_writes_ledger_rows_and_parquet(seeded_copy, ticket_task):
    wh = seeded_copy
    s = freeze_manifest(wh, ticket_task, DAY1)
    assert (s.task_id, s.manifest_version, s.items, s.new_items, s.reused) == (
        TASK_ID1,
        1,
        ITEMS_PER_DAY,
        ITEMS_PER_DAY,
        False,
    )
    rows = manifest_rows(wh)
    assert len(rows) == ITEMS_PER_DAY
    # The Parquet file at manifest_uri holds the same items with their rendered prompts.
    with wh.connect() as conn:
        uri, status, total, version = conn.execute(
            "SELECT manifest_uri, status, total_items, manifest_version FROM ledger.batch_task WHERE task_id = ?",
            [TASK_ID1],
        ).fetchone()
    assert uri == s.manifest_uri and uri.endswith(".parquet") and uri.startswith(str(wh.data_dir))
    assert (status, total, version) == ("FROZEN", ITEMS_PER_DAY, 1)
    pq = parquet_rows(uri)
    assert set(pq) == {r["custom_id"] for r in rows.values()}
    some = rows["TK-20261120-000001"]
    assert pq[some["custom_id"]]["input_hash"] == some["input_hash"]
    with wh.connect() as conn:
        subject, body, lang = conn.execute(
            "SELECT subject, body, language FROM support_tickets WHERE ticket_id = 'TK-20261120-000001'"
        ).fetchone()
    prompt = pq[some["custom_id"]]["prompt_text"]
    assert f"Subject: {subject}" in prompt and body in prompt and f"Ticket language: {lang}" in prompt
    # Only the partition's rows: day 2 is untouched.
    assert all(b.startswith("TK-20261120-") for b in rows)


def test_identifiers_follow_spec_section_2(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    rows = manifest_rows(wh)
    assert ticket_task.task_id(DAY1) == TASK_ID1
    for bid, r in rows.items():
        assert re.fullmatch(r"[0-9a-f]{64}", r["input_hash"])
        assert r["custom_id"] == f"{TASK_ID1}:ticket:{bid}:{r['input_hash'][:8]}"
        assert (r["task_id"], r["item_type"], r["prompt_version"], r["model"], r["output_schema_version"]) == (
            TASK_ID1,
            "ticket",
            "v1",
            "gpt-4o-mini",
            "v1",
        )
        assert r["params_json"] == ticket_task.params_json
    assert len({r["input_hash"] for r in rows.values()}) == len(rows)


# --- reuse, no live re-query ------------------------------------------------------------------------------


def test_refreezing_without_refreeze_reuses_the_frozen_manifest(seeded_copy, ticket_task):
    wh = seeded_copy
    first = freeze_manifest(wh, ticket_task, DAY1)
    before = manifest_rows(wh, current_only=False)
    pq_before = parquet_rows(first.manifest_uri)
    # The live source changes: a body edited, a row deleted, a row added.
    with wh.connect() as conn:
        conn.execute("UPDATE support_tickets SET body = 'changed' WHERE ticket_id = 'TK-20261120-000001'")
        conn.execute("DELETE FROM support_tickets WHERE ticket_id = 'TK-20261120-000002'")
        conn.execute(
            "INSERT INTO support_tickets (ticket_id, created_date, subject, body, language) "
            "VALUES ('TK-NEW-1', DATE '2026-11-20', 'new', 'a new ticket', 'en')"
        )
    again = freeze_manifest(wh, ticket_task, DAY1)
    assert again.reused and again.manifest_version == 1 and again.manifest_uri == first.manifest_uri
    assert (again.items, again.new_items, again.superseded_items) == (ITEMS_PER_DAY, 0, 0)
    assert manifest_rows(wh, current_only=False) == before
    assert parquet_rows(first.manifest_uri) == pq_before


def frozen_numbers(path: str) -> dict[str, int]:
    """custom_id -> item number, as the shards read it from the frozen Parquet."""
    with duckdb.connect() as conn:
        return dict(
            conn.execute(
                f"SELECT custom_id, {frozen_item_no_sql('p')} FROM read_parquet(?, file_row_number = true) p", [path]
            ).fetchall()
        )


def test_refreeze_keeps_unchanged_custom_ids_supersedes_changed_and_adds_new(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    before = manifest_rows(wh)
    with wh.connect() as conn:
        conn.execute("UPDATE support_tickets SET body = body || ' (edited)' WHERE ticket_id = 'TK-20261120-000001'")
        conn.execute(
            "INSERT INTO support_tickets (ticket_id, created_date, subject, body, language) "
            "VALUES ('TK-NEW-1', DATE '2026-11-20', 'Refund', 'please refund my invoice', 'en')"
        )
    s = freeze_manifest(wh, ticket_task, DAY1, refreeze=True)
    assert (s.reused, s.manifest_version, s.items, s.new_items, s.superseded_items) == (
        False,
        2,
        ITEMS_PER_DAY + 1,
        2,
        1,
    )
    after = manifest_rows(wh)
    unchanged = set(before) - {"TK-20261120-000001"}
    assert all(after[b]["custom_id"] == before[b]["custom_id"] for b in unchanged)
    assert all(after[b]["manifest_version"] == 1 for b in unchanged)  # rows not rewritten
    old, new = before["TK-20261120-000001"], after["TK-20261120-000001"]
    assert new["custom_id"] != old["custom_id"] and new["input_hash"] != old["input_hash"]
    assert new["manifest_version"] == 2
    everything = {r["custom_id"]: r for r in manifest_rows(wh, current_only=False)}
    assert everything[old["custom_id"]]["superseded_at"] is not None
    assert "TK-NEW-1" in after and after["TK-NEW-1"]["manifest_version"] == 2
    # The new Parquet file holds exactly the current items.
    assert s.manifest_uri.endswith("v2.parquet")
    assert set(parquet_rows(s.manifest_uri)) == {r["custom_id"] for r in after.values()}
    # Item numbers: 0..N-1 at the first freeze; a kept item keeps its number, the two new items are
    # numbered after the highest, and the Parquet carries each current item's number.
    assert sorted(r["item_no"] for r in before.values()) == list(range(ITEMS_PER_DAY))
    assert all(after[b]["item_no"] == before[b]["item_no"] for b in unchanged)
    assert min(new["item_no"], after["TK-NEW-1"]["item_no"]) >= ITEMS_PER_DAY
    assert len({r["item_no"] for r in manifest_rows(wh, current_only=False)}) == ITEMS_PER_DAY + 2
    assert frozen_numbers(s.manifest_uri) == {r["custom_id"]: r["item_no"] for r in after.values()}


def test_an_input_that_changes_back_revives_its_earlier_custom_id(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    original = manifest_rows(wh)["TK-20261120-000001"]["custom_id"]
    with wh.connect() as conn:
        conn.execute("UPDATE support_tickets SET body = body || ' (edited)' WHERE ticket_id = 'TK-20261120-000001'")
    freeze_manifest(wh, ticket_task, DAY1, refreeze=True)
    assert manifest_rows(wh)["TK-20261120-000001"]["custom_id"] != original
    with wh.connect() as conn:
        conn.execute(
            "UPDATE support_tickets SET body = replace(body, ' (edited)', '') WHERE ticket_id = 'TK-20261120-000001'"
        )
    s = freeze_manifest(wh, ticket_task, DAY1, refreeze=True)
    assert manifest_rows(wh)["TK-20261120-000001"]["custom_id"] == original
    # The revived item is frozen again under its first number.
    assert frozen_numbers(s.manifest_uri)[original] == manifest_rows(wh)["TK-20261120-000001"]["item_no"]
    assert s.items == ITEMS_PER_DAY
    assert len(manifest_rows(wh, current_only=False)) == ITEMS_PER_DAY + 1  # the edited version, superseded


def test_refreeze_after_sharding_still_passes_the_shards_gate_and_balances(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    cut_shards(wh, ticket_task, DAY1)
    assert verify_shards(wh, ticket_task, DAY1)[0] == []
    with wh.connect() as conn:
        conn.execute("UPDATE support_tickets SET body = body || ' (edited)' WHERE ticket_id = 'TK-20261120-000001'")
    freeze_manifest(wh, ticket_task, DAY1, refreeze=True)
    s = cut_shards(wh, ticket_task, DAY1)
    assert (s.lines, s.quarantined) == (1, 0)  # only the changed item is cut anew
    assert verify_shards(wh, ticket_task, DAY1)[0] == []
    assert reconcile(wh, TASK_ID1).problems(require_applied=False) == []


def test_refreeze_with_no_source_change_adds_nothing(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    before = manifest_rows(wh, current_only=False)
    s = freeze_manifest(wh, ticket_task, DAY1, refreeze=True)
    assert (s.new_items, s.superseded_items, s.items) == (0, 0, ITEMS_PER_DAY)
    assert manifest_rows(wh, current_only=False) == before


# --- input_hash: what is sent, and only that ---------------------------------------------------------------


def hashes(wh, task) -> dict[str, str]:
    freeze_manifest(wh, task, DAY1, refreeze=True)
    return {b: r["input_hash"] for b, r in manifest_rows(wh).items()}


@pytest.mark.parametrize(
    ("label", "change", "changes_hash"),
    [
        ("prompt_version", lambda t: with_spec(t, prompt=t.spec.prompt.model_copy(update={"version": "v2"})), True),
        (
            "system_prompt",
            lambda t: with_spec(t, prompt=t.spec.prompt.model_copy(update={"system": "Be brief."})),
            True,
        ),
        ("model", lambda t: with_spec(t, model="gpt-4o"), True),
        ("temperature", lambda t: with_spec(t, params=t.spec.params.model_copy(update={"temperature": 0.5})), True),
        ("max_tokens", lambda t: with_spec(t, params=t.spec.params.model_copy(update={"max_tokens": 300})), True),
        (
            "output_schema_version",
            lambda t: with_spec(t, output=t.spec.output.model_copy(update={"version": "v2"})),
            True,
        ),
        ("description", lambda t: with_spec(t, description="something else"), False),
        ("apply_table", lambda t: with_spec(t, apply=t.spec.apply.model_copy(update={"table": "other_labels"})), False),
        ("max_input_tokens", lambda t: with_spec(t, max_input_tokens=100), False),
        (
            "limits",
            lambda t: dataclasses.replace(t, limits=dataclasses.replace(t.limits, max_requests_per_shard=3)),
            False,
        ),
    ],
)
def test_input_hash_changes_exactly_when_the_request_changes(seeded_copy, ticket_task, label, change, changes_hash):
    wh = seeded_copy
    base = hashes(wh, ticket_task)
    other = hashes(wh, change(ticket_task))
    if changes_hash:
        assert all(other[b] != base[b] for b in base), label
    else:
        assert other == base, label


def test_input_hash_changes_with_the_text_of_that_item_only(seeded_copy, ticket_task):
    wh = seeded_copy
    base = hashes(wh, ticket_task)
    with wh.connect() as conn:
        conn.execute("UPDATE support_tickets SET subject = subject || '!' WHERE ticket_id = 'TK-20261120-000003'")
        # A column the prompt does not use is not part of the request.
        conn.execute(
            "UPDATE support_tickets SET channel = 'phone', customer_name = 'X' WHERE ticket_id = 'TK-20261120-000004'"
        )
    after = hashes(wh, ticket_task)
    changed = {b for b in base if after[b] != base[b]}
    assert changed == {"TK-20261120-000003"}


# --- bad source rows -------------------------------------------------------------------------------------


def test_duplicate_business_id_is_rejected_with_reason_and_others_unaffected(seeded_copy, ticket_task):
    wh = seeded_copy
    dup = duplicated_id(wh)
    s = freeze_manifest(wh, ticket_task, DAY1)
    assert s.rejected_business_ids == 1
    with wh.connect() as conn:
        rejects = conn.execute(
            "SELECT business_id, row_count, reason_code, reason FROM ledger.source_reject WHERE task_id = ?", [TASK_ID1]
        ).fetchall()
        distinct_ids = conn.execute(
            "SELECT count(DISTINCT ticket_id) FROM support_tickets WHERE created_date = ?::DATE", [DAY1]
        ).fetchone()[0]
    assert len(rejects) == 1
    bid, rows, code, reason = rejects[0]
    assert (bid, rows, code) == (dup, 2, "duplicate_business_id")
    assert dup in reason and "2 times" in reason and "Fix: deduplicate the source" in reason and "ticket_id" in reason
    items = manifest_rows(wh)
    assert dup not in items
    assert len(items) == distinct_ids - 1 == ITEMS_PER_DAY


def test_missing_business_id_is_rejected_and_named(seeded_copy, ticket_task):
    wh = seeded_copy
    with wh.connect() as conn:
        conn.execute(
            "INSERT INTO support_tickets (ticket_id, created_date, subject, body, language) VALUES "
            "(NULL, DATE '2026-11-20', 's', 'b', 'en'), ('  ', DATE '2026-11-20', 's', 'b', 'en')"
        )
    s = freeze_manifest(wh, ticket_task, DAY1)
    assert s.items == ITEMS_PER_DAY
    with wh.connect() as conn:
        rows = conn.execute(
            "SELECT reason_code, sum(row_count), any_value(reason) FROM ledger.source_reject "
            "WHERE task_id = ? AND reason_code = 'missing_business_id' GROUP BY 1",
            [TASK_ID1],
        ).fetchall()
    assert rows and rows[0][1] == 2, rows
    assert "ticket_id" in rows[0][2] and "fix the source data" in rows[0][2]


def test_unicode_business_ids_and_text_are_frozen_verbatim(seeded_copy, ticket_task):
    wh = seeded_copy
    with wh.connect() as conn:
        conn.execute(
            "INSERT INTO support_tickets (ticket_id, created_date, subject, body, language) VALUES "
            "('工单-7', DATE '2026-11-20', '退款', '请退款 \"引号\" \\ 反斜杠 👨‍👩‍👧', 'zh')"
        )
    freeze_manifest(wh, ticket_task, DAY1)
    row = manifest_rows(wh)["工单-7"]
    assert row["custom_id"] == f"{TASK_ID1}:ticket:工单-7:{row['input_hash'][:8]}"
    with wh.connect() as conn:
        uri = conn.execute("SELECT manifest_uri FROM ledger.batch_task WHERE task_id = ?", [TASK_ID1]).fetchone()[0]
    assert '请退款 "引号" \\ 反斜杠 👨‍👩‍👧' in parquet_rows(uri)[row["custom_id"]]["prompt_text"]


def test_source_query_missing_a_column_names_the_column_and_the_task_file(seeded_copy, ticket_task):
    wh = seeded_copy
    bad = with_spec(
        ticket_task,
        source=SourceSpec(
            sql="SELECT ticket_id, subject, body FROM support_tickets WHERE created_date = $partition_date",
            business_id="ticket_id",
        ),
    )
    with pytest.raises(SourceQueryError) as info:
        freeze_manifest(wh, bad, DAY1)
    message = str(info.value)
    assert "'language'" in message and str(ticket_task.yaml_path) in message and "Fix:" in message
    with wh.connect() as conn:
        assert conn.execute("SELECT count(*) FROM ledger.manifest_item").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM ledger.batch_task").fetchone()[0] == 0


def test_failing_source_query_names_the_task_file(seeded_copy, ticket_task):
    bad = with_spec(
        ticket_task,
        source=SourceSpec(
            sql="SELECT * FROM no_such_table WHERE created_date = $partition_date", business_id="ticket_id"
        ),
    )
    with pytest.raises(SourceQueryError, match=r"source\.sql in .*defs\.yaml.*no_such_table"):
        freeze_manifest(seeded_copy, bad, DAY1)


def test_partitions_are_frozen_independently(seeded_copy, ticket_task):
    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    s2 = freeze_manifest(wh, ticket_task, DAY2)
    assert s2.task_id == "ticket_triage_20261121" and s2.items == ITEMS_PER_DAY and not s2.reused
    assert all(b.startswith("TK-20261121-") for b in manifest_rows(wh, "ticket_triage_20261121"))
    assert len(manifest_rows(wh)) == ITEMS_PER_DAY


def test_business_ids_are_kept_exactly_as_the_source_holds_them(seeded_copy, ticket_task):
    """'SP' and ' SP ' are two records; '  A  ' is frozen (and would be written back) as '  A  '."""
    wh = seeded_copy
    with wh.connect() as conn:
        conn.execute(
            "INSERT INTO support_tickets (ticket_id, created_date, subject, body, language) VALUES "
            "('SP', DATE '2026-11-20', 's', 'first', 'en'), (' SP ', DATE '2026-11-20', 's', 'second', 'en'), "
            "('  A  ', DATE '2026-11-20', 's', 'third', 'en')"
        )
    s = freeze_manifest(wh, ticket_task, DAY1)
    assert s.items == ITEMS_PER_DAY + 3 and s.rejected_business_ids == 1  # only the seeded duplicate
    items = manifest_rows(wh)
    assert {"SP", " SP ", "  A  "} <= set(items) and "A" not in items
    assert items["SP"]["custom_id"] != items[" SP "]["custom_id"]
    assert items["  A  "]["custom_id"].startswith(f"{TASK_ID1}:ticket:  A  :")


@pytest.mark.slow
def test_whitespace_business_ids_reach_the_business_table_unchanged(
    seeded_warehouse, ticket_task, adapter, run_partition
):
    wh = seeded_warehouse
    with wh.connect() as conn:
        conn.execute(
            "INSERT INTO support_tickets (ticket_id, created_date, subject, body, language) VALUES "
            "('SP', DATE '2026-11-20', 's', 'first', 'en'), (' SP ', DATE '2026-11-20', 's', 'second', 'en'), "
            "('  A  ', DATE '2026-11-20', 's', 'third', 'en')"
        )
    rec = run_partition(wh, ticket_task, DAY1, adapter)
    assert not rec.problems(), rec.problems()
    with wh.connect() as conn:
        keys = {r[0] for r in conn.execute("SELECT ticket_id FROM ticket_labels").fetchall()}
        # Provider-safe request ids were used on the wire (spaces are not allowed there) and mapped back.
        sent = dict(
            conn.execute(
                "SELECT m.business_id, l.request_id FROM ledger.shard_line l "
                "JOIN ledger.manifest_item m USING (custom_id) "
                "WHERE m.business_id IN ('SP', ' SP ', '  A  ')"
            ).fetchall()
        )
    assert {"SP", " SP ", "  A  "} <= keys and "A" not in keys
    assert len(set(sent.values())) == 3


# Apply's candidates (`_cand`: item number, attempt, 64-bit hashes of business id and input hash),
# here every manifest item; its `_live` has one row per candidate: is it fresh.
CANDIDATES = (
    "CREATE TEMP TABLE _cand AS SELECT item_no, 1 AS attempt, hash(business_id) AS id_hash, "
    "hash(input_hash) AS input_hash_hash FROM ledger.manifest_item WHERE task_id = ?"
)
FRESH_BY_ID = (
    "SELECT m.business_id, coalesce(l.fresh, false) FROM _live l "
    "JOIN ledger.manifest_item m ON m.item_no = l.item_no AND m.task_id = '" + TASK_ID1 + "'"
)


@pytest.mark.parametrize("candidates", [1, 10**6], ids=["source_read_for_candidates_only", "whole_source_read"])
def test_apply_guard_from_fingerprints_equals_rehashing_every_row(seeded_copy, ticket_task, candidates):
    """Apply's stale guard takes the frozen input hash for rows whose source fingerprint is
    unchanged and re-gates/re-hashes the rest; the verdicts equal re-hashing every row (whether
    the source is read for the candidates' ids only, as with few candidates, or whole)."""
    from batch_assets.pipeline.freeze.render import input_hash_sql
    from batch_assets.pipeline.freeze.source import load_source
    from batch_assets.pipeline.settle.apply import _stale_guard

    wh = seeded_copy
    s = freeze_manifest(wh, ticket_task, DAY1)
    assert "source_fp" in parquet_rows(s.manifest_uri)[next(iter(parquet_rows(s.manifest_uri)))]
    with wh.connect() as conn:
        conn.execute("UPDATE support_tickets SET body = body || ' (edited)' WHERE ticket_id = 'TK-20261120-000001'")
        conn.execute(
            "UPDATE support_tickets SET body = 'mail me at someone@example.com' WHERE ticket_id = 'TK-20261120-000002'"
        )
        conn.execute("INSERT INTO support_tickets SELECT * FROM support_tickets WHERE ticket_id = 'TK-20261120-000003'")
        conn.execute(CANDIDATES, [TASK_ID1])
        assert _stale_guard(conn, ticket_task, DAY1, candidates, _frozen(wh, conn)) == "by_id"
        fast = dict(conn.execute(FRESH_BY_ID).fetchall())
        load_source(conn, ticket_task, DAY1)
        full = dict(
            conn.execute(f"""
            SELECT business_id, CASE WHEN count(*) = 1 THEN any_value({input_hash_sql(ticket_task)}) END
            FROM _src WHERE business_id IN (SELECT business_id FROM ledger.manifest_item) GROUP BY ALL""").fetchall()
        )
        frozen = dict(
            conn.execute(
                "SELECT business_id, input_hash FROM ledger.manifest_item WHERE task_id = ?", [TASK_ID1]
            ).fetchall()
        )
    assert fast == {b: full[b] == h for b, h in frozen.items()} and len(fast) == ITEMS_PER_DAY
    changed = {b for b in frozen if not fast[b]}
    assert changed == {"TK-20261120-000001", "TK-20261120-000002", "TK-20261120-000003"}
    assert full["TK-20261120-000003"] is None  # now twice in the source


def test_apply_guard_rehashes_every_candidate_of_a_manifest_frozen_before_fingerprints(
    seeded_copy, ticket_task, tmp_path
):
    """A manifest Parquet without fingerprints and item numbers (frozen by an older version): every
    candidate is gated and hashed again, with the same verdicts."""
    import os

    from batch_assets.pipeline.settle.apply import _stale_guard

    wh = seeded_copy
    s = freeze_manifest(wh, ticket_task, DAY1)
    old = tmp_path / "old.parquet"
    with wh.connect() as conn:
        conn.execute(
            f"COPY (SELECT * EXCLUDE (source_fp, item_no_base, earlier_no) FROM read_parquet('{s.manifest_uri}')) "
            f"TO '{old}' (FORMAT parquet)"
        )
        os.replace(old, s.manifest_uri)
        conn.execute("UPDATE support_tickets SET body = body || ' (edited)' WHERE ticket_id = 'TK-20261120-000001'")
        conn.execute(CANDIDATES, [TASK_ID1])
        assert _stale_guard(conn, ticket_task, DAY1, ITEMS_PER_DAY, _frozen(wh, conn)) == "rehashed"
        fresh = dict(conn.execute(FRESH_BY_ID).fetchall())
    assert len(fresh) == ITEMS_PER_DAY
    assert [b for b, ok in fresh.items() if not ok] == ["TK-20261120-000001"]


@pytest.mark.parametrize("candidates, how", [(2, "by_id"), (ITEMS_PER_DAY, "as_frozen")])
def test_apply_guard_rehashes_a_candidate_that_is_not_its_ids_frozen_row(seeded_copy, ticket_task, candidates, how):
    """The frozen row is found by the candidate's item number; a candidate whose number is not a row
    of the Parquet (an item of an earlier freeze of the same business id) is gated and hashed again,
    so its verdict compares its own input hash with its id's live hash. Also when the source is
    unchanged since the freeze (decided as frozen: such a candidate is left undecided, then re-hashed)."""
    from batch_assets.pipeline.settle.apply import _stale_guard

    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    a = "TK-20261120-000004"
    with wh.connect() as conn:
        # Two earlier items of a's id, numbered after every frozen row: one with a's input then (the
        # same as now), one with another input.
        conn.execute(
            """INSERT INTO ledger.manifest_item
                        SELECT m.* REPLACE (item_no + 1000 + k AS item_no, custom_id || ':earlier' || k AS custom_id,
                                          CASE WHEN k = 1 THEN input_hash ELSE md5('another input') END AS input_hash)
                        FROM ledger.manifest_item m, range(1, 3) r(k) WHERE task_id = $t AND business_id = $a""",
            {"t": TASK_ID1, "a": a},
        )
        conn.execute(
            "CREATE TEMP TABLE _cand AS SELECT item_no, 1 AS attempt, hash(business_id) AS id_hash, "
            "hash(input_hash) AS input_hash_hash FROM ledger.manifest_item WHERE custom_id LIKE '%:earlier%'"
        )
        assert _stale_guard(conn, ticket_task, DAY1, candidates, _frozen(wh, conn)) == how
        fresh = dict(
            conn.execute(
                "SELECT m.custom_id, l.fresh FROM _live l JOIN ledger.manifest_item m USING (item_no) "
                "WHERE m.task_id = ?",
                [TASK_ID1],
            ).fetchall()
        )
    assert {k.rsplit(":", 1)[1]: v for k, v in fresh.items()} == {"earlier1": True, "earlier2": False}


def _rehashed_verdicts(conn, task) -> dict[str, bool]:
    """Each frozen item's verdict by re-hashing every source row: fresh when its id is in the source
    once and renders to its frozen input hash."""
    from batch_assets.pipeline.freeze.render import input_hash_sql
    from batch_assets.pipeline.freeze.source import drop_source, load_source

    load_source(conn, task, DAY1)
    live = dict(
        conn.execute(f"""
        SELECT business_id, CASE WHEN count(*) = 1 THEN any_value({input_hash_sql(task)}) END
        FROM _src GROUP BY ALL""").fetchall()
    )
    drop_source(conn)
    frozen = conn.execute(
        "SELECT business_id, input_hash FROM ledger.manifest_item WHERE task_id = ?", [TASK_ID1]
    ).fetchall()
    return {b: live.get(b) == h for b, h in frozen}


SAME_ROWS_MOVED = (
    "DELETE FROM support_tickets WHERE ticket_id = 'TK-20261120-000005'; "
    "INSERT INTO support_tickets SELECT * FROM _kept"
)
SOURCE_CHANGES = {
    "edited": "UPDATE support_tickets SET body = body || ' (edited)' WHERE ticket_id = 'TK-20261120-000001'",
    "removed": "DELETE FROM support_tickets WHERE ticket_id = 'TK-20261120-000001'",
    "repeated": "INSERT INTO support_tickets SELECT * FROM _kept",
    "added": "INSERT INTO support_tickets SELECT * REPLACE ('TK-NEW' AS ticket_id) FROM _kept",
    # Two edits whose row hashes could cancel out in a plain sum: one row's text moved to another id.
    "swapped": "UPDATE support_tickets SET body = (SELECT body FROM _kept) WHERE ticket_id = 'TK-20261120-000001'",
}


@pytest.mark.parametrize("change", [None, "moved", "blank_id_added"] + list(SOURCE_CHANGES))
def test_apply_guard_decides_from_the_frozen_rows_only_when_the_source_holds_exactly_them(
    seeded_copy, ticket_task, change
):
    """With most items as candidates the guard first compares the whole source with the frozen
    Parquet. The same rows (also in another order, or with a row that has no id, which no item
    is) are decided from the frozen rows; any added, removed, repeated or edited row makes the guard
    group the source by id. Either way the verdicts equal re-hashing every row."""
    from batch_assets.pipeline.settle.apply import _stale_guard

    wh = seeded_copy
    freeze_manifest(wh, ticket_task, DAY1)
    with wh.connect() as conn:
        conn.execute("CREATE TEMP TABLE _kept AS SELECT * FROM support_tickets WHERE ticket_id = 'TK-20261120-000005'")
        if change == "moved":
            conn.execute(SAME_ROWS_MOVED)
        elif change == "blank_id_added":
            conn.execute("INSERT INTO support_tickets SELECT * REPLACE ('  ' AS ticket_id) FROM _kept")
        elif change:
            conn.execute(SOURCE_CHANGES[change])
        conn.execute(CANDIDATES, [TASK_ID1])
        how = _stale_guard(conn, ticket_task, DAY1, ITEMS_PER_DAY, _frozen(wh, conn))
        verdicts = dict(conn.execute(FRESH_BY_ID).fetchall())
        expected = _rehashed_verdicts(conn, ticket_task)
    assert how == ("by_id" if change in SOURCE_CHANGES else "as_frozen")
    assert verdicts == expected and len(verdicts) == ITEMS_PER_DAY
    assert all(verdicts.values()) == (change in (None, "moved", "blank_id_added", "added"))


@pytest.mark.parametrize("fixed", [False, True], ids=["still_repeated", "deduplicated_since"])
def test_apply_guard_leaves_out_the_ids_the_freeze_rejected(seeded_copy, ticket_task, fixed):
    """A business id held twice at the freeze is rejected: its rows are not in the Parquet and no
    candidate is of it, so the comparison leaves its rows out, whether the source still holds it
    twice or once since; the rest is the frozen rows."""
    from batch_assets.pipeline.settle.apply import _stale_guard

    wh = seeded_copy
    with wh.connect() as conn:
        conn.execute("CREATE TABLE _kept AS SELECT * FROM support_tickets WHERE ticket_id = 'TK-20261120-000005'")
        conn.execute("INSERT INTO support_tickets SELECT * FROM _kept")
    freeze_manifest(wh, ticket_task, DAY1)
    with wh.connect() as conn:
        if fixed:
            conn.execute("DELETE FROM support_tickets WHERE ticket_id = 'TK-20261120-000005'")
            conn.execute("INSERT INTO support_tickets SELECT * FROM _kept")
        conn.execute(CANDIDATES, [TASK_ID1])
        assert _stale_guard(conn, ticket_task, DAY1, ITEMS_PER_DAY, _frozen(wh, conn)) == "as_frozen"
        verdicts = dict(conn.execute(FRESH_BY_ID).fetchall())
    assert "TK-20261120-000005" not in verdicts and len(verdicts) == ITEMS_PER_DAY - 1 and all(verdicts.values())


@pytest.mark.parametrize("tail", [";", "; -- the day's tickets", "\n-- the day's tickets"])
def test_apply_guard_nests_a_source_query_with_a_trailing_semicolon_or_comment(seeded_copy, ticket_task, tail):
    from batch_assets.pipeline.settle.apply import _stale_guard

    task = with_spec(
        ticket_task,
        source=ticket_task.spec.source.model_copy(update={"sql": ticket_task.spec.source.sql.rstrip() + tail}),
    )
    wh = seeded_copy
    freeze_manifest(wh, task, DAY1)
    with wh.connect() as conn:
        conn.execute("UPDATE support_tickets SET body = body || ' (edited)' WHERE ticket_id = 'TK-20261120-000001'")
        conn.execute(CANDIDATES, [TASK_ID1])
        _stale_guard(conn, task, DAY1, ITEMS_PER_DAY, _frozen(wh, conn))
        changed = [
            r[0]
            for r in conn.execute(
                FRESH_BY_ID.replace("SELECT m.business_id, coalesce(l.fresh, false)", "SELECT m.business_id")
                + " WHERE NOT coalesce(l.fresh, false)"
            ).fetchall()
        ]
    assert changed == ["TK-20261120-000001"]
