"""Collect: provider jobs polled, stuck ones handled, result files downloaded, ingested and parsed."""
