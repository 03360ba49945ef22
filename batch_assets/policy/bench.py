"""Benchmark of the sensitive-data scan: `bench_scan(n)`; `python -m batch_assets.policy.bench N`.

Synthesizes n rows set-based in DuckDB (mixed Chinese/English ticket text, ~300 characters), about
2 % of them carrying a sensitive value (phone, e-mail, card, resident ID, IBAN drawn from pools of
valid values) and about 5 % carrying order numbers / time stamps that are phone-shaped candidates
but not sensitive. Times `find_sensitive` (scan + confirmation), the redaction, and, as the floor,
a bare `regexp_matches` count of every detector's pattern over the same rows.
"""

from __future__ import annotations

import json
import random
import sys
import time

import duckdb
import pyarrow as pa
from stdnum import luhn

from batch_assets.policy.detectors import DEFAULT_DETECTORS, Detector
from batch_assets.policy.redact import redact
from batch_assets.policy.scan import find_sensitive
from batch_assets.sqltext import sql_literal

_FRAGMENTS = [
    "您好，我的订单一直没有发货，请尽快处理。",
    "The package arrived damaged and the box was open.",
    "请问退款什么时候到账？",
    "I was charged twice for the same subscription this month.",
    "客服电话一直打不通，希望能回电。",
    "Could you update the shipping address before dispatch?",
    "商品和描述不符，颜色也不对。",
    "Please cancel my order, I no longer need it.",
    "物流信息三天没有更新了。",
    "The app crashes when I open the payment page.",
    "发票抬头需要修改为公司名称。",
    "Thanks for the quick reply, the issue is solved.",
]


def _cn_id_check(body17: str) -> str:
    weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    return "10X98765432"[sum(int(c) * w for c, w in zip(body17, weights, strict=True)) % 11]


def _pools(rng: random.Random, size: int = 500) -> pa.Table:
    kinds, values = [], []
    for k in range(size):
        kinds.append("phone")
        values.append(f"1{rng.choice('3456789')}{rng.randrange(10**9):09d}")
        kinds.append("email")
        values.append(f"user.{k}@example{k % 7}.cn")
        base = f"4{rng.randrange(10**14):014d}"
        card = base + luhn.calc_check_digit(base)
        kinds.append("card")
        values.append(" ".join(card[i : i + 4] for i in range(0, 16, 4)))
        birth = f"{rng.randrange(1950, 2005)}{rng.randrange(1, 13):02d}{rng.randrange(1, 29):02d}"
        body = f"110105{birth}{rng.randrange(1000):03d}"
        kinds.append("cn_id")
        values.append(body + _cn_id_check(body))
        kinds.append("iban")
        values.append("GB82 WEST 1234 5698 7654 32" if k % 2 else "DE89 3704 0044 0532 0130 00")
    return pa.table({"k": list(range(len(values))), "kind": kinds, "value": values})


def synthesize(conn: duckdb.DuckDBPyConnection, n: int, *, table: str = "bench_texts", seed: int = 7) -> None:
    pools = _pools(random.Random(seed))
    conn.register("bench_pool_arrow", pools)
    frags = "[" + ", ".join(sql_literal(f) for f in _FRAGMENTS) + "]"
    nf = len(_FRAGMENTS)
    conn.execute(f"""
        CREATE OR REPLACE TABLE {table} AS
        WITH r AS (SELECT i, CAST(hash(i, {seed}) >> 1 AS BIGINT) AS h FROM range({n}) AS t(i))
        SELECT i AS id,
               {frags}[1 + h % {nf}] || ' ' || {frags}[1 + (h >> 8) % {nf}] || ' ticket ' || i || ' '
               || CASE WHEN h % 100 < 2 THEN '联系方式 ' || p.value || ' 。'
                       WHEN h % 100 < 5 THEN 'order ' || (1000000000 + (h >> 16) % 8999999999) || ' placed'
                       WHEN h % 100 < 7 THEN 'at 2026-11-' || lpad(CAST(1 + (h >> 20) % 28 AS VARCHAR), 2, '0')
                                             || ' 12:' || lpad(CAST((h >> 24) % 60 AS VARCHAR), 2, '0') || ':05'
                       ELSE '' END
               || ' ' || {frags}[1 + (h >> 32) % {nf}] AS body
        FROM r LEFT JOIN bench_pool_arrow AS p ON p.k = (h >> 40) % {pools.num_rows}
    """)
    conn.unregister("bench_pool_arrow")


def bench_scan(
    n: int = 1_000_000, *, threads: int | None = None, detectors: tuple[Detector, ...] = DEFAULT_DETECTORS
) -> dict:
    """Synthesize n rows and time the scan; returns a dict of timings (seconds) and counts."""
    conn = duckdb.connect()
    conn.execute("SET enable_progress_bar = false")
    if threads:
        conn.execute(f"SET threads = {int(threads)}")
    try:
        t0 = time.perf_counter()
        synthesize(conn, n)
        synth_s = time.perf_counter() - t0

        combined = "|".join(f"(?:{d.pattern})" for d in detectors)
        t0 = time.perf_counter()
        floor_rows = conn.execute(
            "SELECT count(*) FROM bench_texts WHERE regexp_matches(body, ?)", [combined]
        ).fetchone()[0]
        floor_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        conn.execute(
            "SELECT "
            + ", ".join(f"count(*) FILTER (WHERE regexp_matches(body, {sql_literal(d.pattern)}))" for d in detectors)
            + " FROM bench_texts"
        ).fetchone()
        floor_per_detector_s = time.perf_counter() - t0

        calls = {"n": 0}

        def counted(d: Detector) -> Detector:
            def confirm(candidate: str):
                calls["n"] += 1
                return d.confirm(candidate)

            return Detector(d.name, d.label, d.pattern, confirm, d.precedence)

        t0 = time.perf_counter()
        findings = find_sensitive(conn, "bench_texts", "id", ["body"], [counted(d) for d in detectors])
        scan_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        red = redact(conn, "bench_texts", "id", ["body"], findings)
        redact_s = time.perf_counter() - t0
        by_det = dict(conn.execute(f"SELECT detector, count(*) FROM {findings} GROUP BY ALL ORDER BY ALL").fetchall())
        item_count = conn.execute(f"SELECT count(DISTINCT id) FROM {findings}").fetchone()[0]
        redacted_rows = conn.execute(f"SELECT count(*) FROM {red.table}").fetchone()[0]
        return {
            "rows": n,
            "threads": conn.execute("SELECT current_setting('threads')").fetchone()[0],
            "synth_s": round(synth_s, 3),
            "floor_combined_regexp_matches_s": round(floor_s, 3),
            "floor_rows_with_candidates": floor_rows,
            "floor_per_detector_regexp_matches_s": round(floor_per_detector_s, 3),
            "find_sensitive_s": round(scan_s, 3),
            "redact_s": round(redact_s, 3),
            "validator_calls": calls["n"],
            "items_with_findings": item_count,
            "findings_by_detector": by_det,
            "redacted_rows": redacted_rows,
            "rows_per_s_scan": round(n / scan_s) if scan_s else None,
        }
    finally:
        conn.close()


if __name__ == "__main__":
    print(json.dumps(bench_scan(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000), indent=2))
