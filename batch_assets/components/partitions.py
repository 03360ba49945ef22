"""The one daily partitioning every task shares (a partition = one day of source rows)."""

import warnings

import dagster as dg

from batch_assets.spec.settings import partition_start

# $BATCH_ASSETS_PARTITION_START, checked: a bad value names the variable, not a strptime format.
PARTITION_START = partition_start()

daily_partitions = dg.DailyPartitionsDefinition(start_date=PARTITION_START)


def partitioned_check_spec(name: str, asset: dg.AssetKey, **kwargs) -> dg.AssetCheckSpec:
    """An asset check whose results are recorded against each day's partition (the check's Partitions tab)."""
    with warnings.catch_warnings():
        # Partitioned asset checks are a preview API in Dagster 1.13, used on purpose: each day's
        # result is recorded against that day's partition.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetCheckSpec(name, asset=asset, partitions_def=daily_partitions, **kwargs)
