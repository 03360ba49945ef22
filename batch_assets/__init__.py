"""batch_assets: LLM Batch API work as Dagster software-defined assets."""
