"""The one daily partitioning every task shares (a partition = one day of source rows)."""

import dagster as dg

from batch_assets.spec.settings import partition_start

# $BATCH_ASSETS_PARTITION_START, checked: a bad value names the variable, not a strptime format.
PARTITION_START = partition_start()

daily_partitions = dg.DailyPartitionsDefinition(start_date=PARTITION_START)
