"""OpenAI Batch: adapter, wire formats, limits, prices and emulator routes."""
