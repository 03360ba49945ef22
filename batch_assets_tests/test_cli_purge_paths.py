"""`batch-assets purge` shows every path one way, absolute, with --dry-run and without: the file that
is (or would be) touched, also for a ledger row written with a relative path (before the ledger
recorded absolute ones)."""

from __future__ import annotations

import re
from pathlib import Path

from batch_assets.ledger.warehouse import Warehouse

from .cli_calls import run

TASK_ID = "ticket_triage_20261101"
PATH_LINE = re.compile(r"(?:would delete|deleted) shard (\S+)|(?:would compress|compressed) raw file (\S+) -> (\S+)")


def _old_final_partition(tmp_path: Path) -> Warehouse:
    wh = Warehouse.at(tmp_path / "warehouse.duckdb", tmp_path / "data")
    absolute = wh.path("shards", TASK_ID, "a1_s1.jsonl")
    relative = Path("data", "shards", TASK_ID, "a1_s2.jsonl")  # relative to the working directory
    raw = wh.path("raw", TASK_ID, "job1_output.jsonl")
    for path in (absolute, tmp_path / relative, raw):
        path.write_text('{"custom_id": "1"}\n')
    with wh.connect() as conn:
        conn.execute(
            """INSERT INTO ledger.batch_task (task_id, task_name, partition_date, item_type, provider, model,
                   endpoint, prompt_version, output_schema_version, status, final_status, created_at, updated_at,
                   finished_at)
               VALUES (?, 'ticket_triage', DATE '2026-11-01', 'ticket', 'openai', 'gpt-4o-mini',
                   '/v1/chat/completions', 'p1', 'o1', 'DONE', 'SUCCEEDED', TIMESTAMP '2026-11-01 00:00:00',
                   TIMESTAMP '2026-11-01 00:00:00', TIMESTAMP '2026-11-01 00:00:00')""",
            [TASK_ID],
        )
        for no, path in enumerate((absolute, relative), start=1):
            conn.execute(
                """INSERT INTO ledger.shard (shard_id, task_id, provider, endpoint, model, attempt, shard_no, path,
                       line_count, byte_count, est_tokens, created_at)
                   VALUES (?, ?, 'openai', '/v1/chat/completions', 'gpt-4o-mini', 1, ?, ?, 1, 19, 10,
                       TIMESTAMP '2026-11-01 00:00:00')""",
                [f"{TASK_ID}:a1:s{no}", TASK_ID, no, str(path)],
            )
        conn.execute(
            """INSERT INTO ledger.raw_file (file_key, job_key, task_id, kind, path, sha256, byte_count, downloaded_at,
                   ingested_at)
               VALUES ('job1:output', 'job1', ?, 'output', ?, 'x', 19, TIMESTAMP '2026-11-01 00:00:00',
                   TIMESTAMP '2026-11-01 00:00:00')""",
            [TASK_ID, str(raw)],
        )
    return wh


def _paths(out: str) -> list[str]:
    return [p for m in PATH_LINE.finditer(out) for p in m.groups() if p]


def test_dry_run_and_purge_show_the_same_absolute_paths(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    wh = _old_final_partition(tmp_path)
    for name in ("BATCH_ASSETS_DATABASE", "BATCH_ASSETS_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)

    code, dry, _ = run(capsys, "--database", wh.database, "purge", "--older-than", "1d", "--dry-run")
    assert code == 0 and "would purge 2 shard file(s) and compressed 1 raw file(s)" in dry
    shown = _paths(dry)
    assert len(shown) == 4 and all(Path(p).is_absolute() for p in shown), dry
    assert str(tmp_path / "data" / "shards" / TASK_ID / "a1_s2.jsonl") in shown  # the relative row, resolved
    assert all(Path(p).exists() for p in shown[:3])  # nothing touched

    code, done, _ = run(capsys, "--database", wh.database, "purge", "--older-than", "1d")
    assert code == 0 and "purged 2 shard file(s) and compressed 1 raw file(s)" in done
    assert _paths(done) == shown
    assert not any(Path(p).exists() for p in shown[:3]) and Path(shown[3]).is_file()
