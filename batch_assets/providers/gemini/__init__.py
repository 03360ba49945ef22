"""Google Gemini Batch: adapter, wire formats, limits and emulator routes."""
