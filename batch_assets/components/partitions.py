"""The one daily partitioning every task shares (a partition = one day of source rows)."""

import os

import dagster as dg

PARTITION_START = os.environ.get("BATCH_ASSETS_PARTITION_START", "2026-11-01")

daily_partitions = dg.DailyPartitionsDefinition(start_date=PARTITION_START)
