"""Provider adapters behind one interface, and the provider limits configuration."""
