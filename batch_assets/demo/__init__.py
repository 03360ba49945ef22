"""Deterministic demo business data for the batch pipeline (see ``seed.py`` for its properties)."""

from batch_assets.demo.seed import demo_partition_dates, seed_support_tickets

__all__ = ["demo_partition_dates", "seed_support_tickets"]
