"""Ingest numbers each result line by its place in its own file.

The fast path reads a batch's files in one parallel read_json and counts a file's lines by the
staged table's row ids, so it holds only while DuckDB keeps the read's order in the table. These
files are big enough to be read in several parallel pieces, of uneven lengths, some empty; a
DuckDB upgrade that stopped keeping the order fails here rather than misnumbering the ledger."""

from __future__ import annotations

import json
import random
from pathlib import Path

import duckdb
import pytest

from batch_assets.pipeline.collect import ingest
from batch_assets.providers.registry import wire_format

FMT = wire_format("openai", "/v1/chat/completions")


def _write(path: Path, lines: int, rng: random.Random) -> None:
    with open(path, "w") as f:
        for n in range(1, lines + 1):
            body = {"choices": [{"message": {"content": "x" * rng.randint(0, 2500)}}]}
            f.write(
                json.dumps(
                    {
                        "id": f"{path.stem}/{n}",
                        "custom_id": f"{path.stem}-{n}",
                        "response": {"status_code": 200, "request_id": "r", "body": body},
                        "error": None,
                    }
                )
                + "\n"
            )


def _stage(conn: duckdb.DuckDBPyConnection, files: list[Path]) -> list[tuple]:
    rows = ", ".join(f"({i}, 'k{i}', 'job{i}', '{p}', 's{i}', 1)" for i, p in enumerate(files))
    conn.execute(
        f"CREATE OR REPLACE TEMP TABLE _files AS SELECT * FROM (VALUES {rows}) "
        "AS t(ord, file_key, job_key, path, shard_id, attempt)"
    )
    ingest._stage_batch(conn, [{"path": str(p), "file_key": f"k{i}"} for i, p in enumerate(files)], FMT)
    return conn.execute("SELECT file_key, line_no, line_id, malformed_line FROM _in").fetchall()


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_every_line_gets_its_number_within_its_file(tmp_path: Path, threads: int) -> None:
    rng = random.Random(threads)
    files = []
    for i in range(24):
        files.append(tmp_path / f"f{i:02d}.jsonl")
        _write(files[-1], 0 if i % 7 == 3 else rng.randint(1, 4000), rng)
    conn = duckdb.connect()
    conn.execute(f"SET threads = {threads}")
    staged = _stage(conn, files)
    want = sum(len(p.read_text().splitlines()) for p in files)
    assert len(staged) == want > 20_000
    # line_id is '<file stem>/<number in the file>': every line must carry its own number
    wrong = [(k, n, lid) for k, n, lid, _ in staged if lid != f"{files[int(k[1:])].stem}/{n}"]
    assert wrong == []
    assert {k for k, *_ in staged} == {f"k{i}" for i, p in enumerate(files) if p.stat().st_size}


def test_a_damaged_file_in_the_batch_numbers_every_file_the_same_way(tmp_path: Path) -> None:
    rng = random.Random(7)
    files = [tmp_path / f"f{i}.jsonl" for i in range(3)]
    for p in files:
        _write(p, 50, rng)
    with open(files[1], "a") as f:
        f.write('{"id": "truncated\n')
    conn = duckdb.connect()
    staged = _stage(conn, files)
    good = [(k, n, lid) for k, n, lid, bad in staged if bad is None]
    assert len(good) == 150
    assert all(lid == f"{files[int(k[1:])].stem}/{n}" for k, n, lid in good)
    assert [(k, n) for k, n, _, bad in staged if bad is not None] == [("k1", 51)]
    # the next batch over the same connection stages its own lines only
    assert len(_stage(conn, files[:1])) == 50
