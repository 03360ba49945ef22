"""Deterministic demo business data for the batch pipeline (see ``seed.py`` for its properties)."""

from batch_assets.demo.seed import demo_partition_dates, seed_support_tickets

__all__ = ["demo_partition_dates", "seed_support_tickets"]

from batch_assets.demo.seed_kb import seed_kb_articles  # noqa: E402
from batch_assets.demo.seed_reviews import seed_product_reviews  # noqa: E402

__all__ += ["seed_kb_articles", "seed_product_reviews"]
