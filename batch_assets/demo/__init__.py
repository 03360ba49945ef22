"""Deterministic demo business data for the batch pipeline (see each module for its properties)."""

from batch_assets.demo.seed import demo_partition_dates, seed_support_tickets
from batch_assets.demo.seed_kb import seed_kb_articles
from batch_assets.demo.seed_reviews import seed_product_reviews

__all__ = ["demo_partition_dates", "seed_kb_articles", "seed_product_reviews", "seed_support_tickets"]
