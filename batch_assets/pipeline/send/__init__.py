"""Send: frozen items cut into provider-sized shards and submitted exactly once."""
