"""Live smoke tests: one tiny batch per provider, through the real pipeline and the real service.

Opt-in: each runs only when its provider's key is in the environment (OPENAI_API_KEY,
ANTHROPIC_API_KEY, GEMINI_API_KEY, DASHSCOPE_API_KEY) and is skipped with the reason otherwise. A
key alone never goes live: each test sets its provider's live mode (BATCH_ASSETS_<PROVIDER>_MODE).
Provider batches can take hours: the test waits up to BATCH_ASSETS_LIVE_TIMEOUT_S (default 900 s)
for completion and then checks the whole chain; if the batch is still running by then it cancels
it and checks that the cancel was recorded. Costs a few requests per run.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from batch_assets.ledger.warehouse import Warehouse
from batch_assets.pipeline.collect.ingest import collect_raw_results
from batch_assets.pipeline.collect.parse import parse_results
from batch_assets.pipeline.collect.poll import poll_jobs
from batch_assets.pipeline.freeze.manifest import freeze_manifest
from batch_assets.pipeline.send.shards import cut_shards
from batch_assets.pipeline.send.submit import submit_pending
from batch_assets.pipeline.settle.apply import apply_results
from batch_assets.pipeline.settle.reconcile import reconcile
from batch_assets.providers.contract import JobRef
from batch_assets.resources import default_resources
from batch_assets.spec.resolve import load_all_tasks

pytestmark = pytest.mark.live

# One small task per provider, as declared in the project (its model can be overridden per env).
LIVE_TASKS = {
    "openai": ("ticket_triage", "support_tickets"),
    "anthropic": ("ticket_summary", "support_tickets"),
    "gemini": ("kb_embeddings", "kb_articles"),
    "dashscope": ("review_sentiment", "product_reviews"),
}
PARTITION = "2026-11-20"
TIMEOUT_S = float(os.environ.get("BATCH_ASSETS_LIVE_TIMEOUT_S", "900"))


def _tiny_source(wh: Warehouse, table: str) -> None:
    with wh.connect() as conn:
        if table == "support_tickets":
            conn.execute("""CREATE OR REPLACE TABLE support_tickets AS SELECT * FROM (VALUES
                ('TK-1', DATE '2026-11-20', 'Refund',
                 'I was charged twice for my November invoice, please refund one.', 'en'),
                ('TK-2', DATE '2026-11-20', '无法登录', '我修改了手机号以后收不到验证码，无法登录账号。', 'zh'))
                t(ticket_id, created_date, subject, body, language)""")
        elif table == "kb_articles":
            conn.execute("""CREATE OR REPLACE TABLE kb_articles AS SELECT * FROM (VALUES
                ('KB-1', DATE '2026-11-20', 'Reset your password',
                 'Open Settings, choose Security, then Reset password.'),
                ('KB-2', DATE '2026-11-20', '申请退款', '在账单页面选择发票并点击申请退款。'))
                t(article_id, updated_date, title, body)""")
        else:
            conn.execute("""CREATE OR REPLACE TABLE product_reviews AS SELECT * FROM (VALUES
                ('RV-1', DATE '2026-11-20', 'Coffee machine', 5, 'en', 'Great', 'Makes great espresso, a bit loud.'),
                ('RV-2', DATE '2026-11-20', '耳机', 1, 'zh', '差评', '用了两天就坏了，客服也不回复。'))
                t(review_id, review_date, product, rating, language, title, body)""")


@pytest.mark.parametrize("provider", sorted(LIVE_TASKS))
def test_one_tiny_live_batch(provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = f"{provider.upper()}_API_KEY"
    if not os.environ.get(key):
        pytest.skip(f"{key} is not set: live {provider} smoke test skipped")
    monkeypatch.setenv(f"BATCH_ASSETS_{provider.upper()}_MODE", "live")
    providers = default_resources()["providers"]
    assert providers.is_live(provider)
    task_name, table = LIVE_TASKS[provider]
    task = load_all_tasks()[task_name]
    wh = Warehouse.at(tmp_path / "live.duckdb", tmp_path)
    _tiny_source(wh, table)
    adapter = providers.adapter(provider)

    assert freeze_manifest(wh, task, PARTITION).items == 2
    assert cut_shards(wh, task, PARTITION).lines == 2
    assert len(submit_pending(wh, task, PARTITION, adapter).submitted) == 1
    task_id = task.task_id(PARTITION)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        poll_jobs(wh, lambda _p: adapter, task_id=task_id)
        with wh.connect() as conn:
            open_jobs = conn.execute(
                "SELECT count(*) FROM ledger.provider_job WHERE task_id = ? AND terminal_at IS NULL", [task_id]
            ).fetchone()[0]
        if not open_jobs:
            break
        time.sleep(15)
    else:
        with wh.connect() as conn:
            batch_id = conn.execute(
                "SELECT provider_batch_id FROM ledger.provider_job WHERE task_id = ?", [task_id]
            ).fetchone()[0]
        snap = adapter.cancel(JobRef(batch_id))
        assert snap.cancel_requested or snap.terminal
        pytest.skip(
            f"{provider} batch {batch_id} not done within {TIMEOUT_S:.0f}s; "
            "cancelled it (raise BATCH_ASSETS_LIVE_TIMEOUT_S)"
        )
    collect_raw_results(wh, task, PARTITION, adapter)
    parse_results(wh, task, PARTITION)
    apply_results(wh, task, PARTITION)
    recon = reconcile(wh, task_id)
    assert recon.problems() == []
    with wh.connect() as conn:  # where the job went (host only)
        assert conn.execute(
            "SELECT endpoint_mode, endpoint_url FROM ledger.provider_job WHERE task_id = ?", [task_id]
        ).fetchall() == [("live", providers.endpoint_of(provider)[1])]
    assert recon.succeeded + recon.failed_total + recon.expired + recon.canceled == 2
