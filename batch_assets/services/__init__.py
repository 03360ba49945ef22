"""Servers the project starts for itself on 127.0.0.1 (PostgreSQL for the `distributed` ledger and the tests)."""
