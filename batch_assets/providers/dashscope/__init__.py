"""Alibaba Bailian / DashScope batch (OpenAI-compatible mode): adapter, wire formats, limits and emulator routes."""
