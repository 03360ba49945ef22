"""Object storage for what a run writes and another machine reads (partition stores, next the run files)."""
