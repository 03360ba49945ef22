"""Anthropic Message Batches: adapter, wire format, limits and emulator routes."""
