"""Emulator of the OpenAI Batch API (files and batches), and of DashScope's compatible mode."""
