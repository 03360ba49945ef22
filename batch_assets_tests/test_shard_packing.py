"""Shard packing: greedy in line order within requests, bytes and tokens, the same however the
running totals are chunked (the shards stage streams them in chunks to bound memory)."""

from __future__ import annotations

import random

import polars as pl
import pytest

from batch_assets.pipeline.send.shards import shard_starts


def _greedy(sizes: list[tuple[int, int]], max_bytes: int, max_tokens: int, max_requests: int) -> list[int]:
    """The plain definition, a line at a time: open a new shard when the next line does not fit."""
    starts, count, b, t = [], 0, 0, 0
    for i, (lb, lt) in enumerate(sizes):
        if not starts or count == max_requests or b + lb > max_bytes or t + lt > max_tokens:
            starts.append(i)
            count, b, t = 0, 0, 0
        count, b, t = count + 1, b + lb, t + lt
    return starts


def _chunks(sizes: list[tuple[int, int]], chunk: int):
    cum_b = pl.Series([s[0] for s in sizes], dtype=pl.Int64).cum_sum()
    cum_t = pl.Series([s[1] for s in sizes], dtype=pl.Int64).cum_sum()
    for k in range(0, len(sizes), chunk):
        yield cum_b.slice(k, chunk), cum_t.slice(k, chunk)


@pytest.mark.parametrize("seed", range(40))
def test_chunked_packing_equals_the_line_by_line_definition(seed):
    rng = random.Random(seed)
    max_bytes, max_tokens, max_requests = rng.randint(50, 400), rng.randint(20, 200), rng.randint(1, 12)
    n = rng.randint(0, 300)
    # every line fits on its own (the quarantine guarantees it); some lines fill a shard alone
    sizes = [
        (rng.choice([rng.randint(1, 40), max_bytes]), rng.choice([rng.randint(0, 15), max_tokens])) for _ in range(n)
    ]
    expected = _greedy(sizes, max_bytes, max_tokens, max_requests)
    for chunk in (1, 2, 3, 7, 64, 1000):
        assert shard_starts(_chunks(sizes, chunk), max_bytes, max_tokens, max_requests) == expected, chunk


def test_a_shard_closing_exactly_at_a_chunk_boundary_or_the_last_line():
    sizes = [(10, 1)] * 8
    # 4 lines of 10 bytes fill 40 bytes exactly: shards at 0 and 4, nothing opened after line 7
    for chunk in (1, 2, 4, 8):
        assert shard_starts(_chunks(sizes, chunk), 40, 100, 100) == [0, 4]
        assert shard_starts(_chunks(sizes, chunk), 1000, 100, 4) == [0, 4]
    assert shard_starts(iter(()), 40, 100, 100) == []
