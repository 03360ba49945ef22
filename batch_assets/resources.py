"""Dagster resources: the warehouse (DuckDB file + data folder) and the provider clients.

Secrets come only from the environment (dg.EnvVar); with no key for a provider, its adapter talks
to the local provider emulator instead.
"""

from __future__ import annotations

import os

import dagster as dg

from batch_assets.ledger.warehouse import Warehouse
from batch_assets.providers.base import BatchAdapter, ClientSettings
from batch_assets.providers.registry import build_adapter

DEFAULT_DATABASE = "data/warehouse.duckdb"
DEFAULT_DATA_DIR = "data"
DEFAULT_EMULATOR_URL = "http://127.0.0.1:8765"
# Key the SDKs are given when talking to the emulator (it accepts any non-empty bearer token).
EMULATOR_API_KEY = "emulator-no-key"


class WarehouseResource(dg.ConfigurableResource):
    """Where the DuckDB warehouse (business tables + ledger) and run-time files live."""

    database: str = DEFAULT_DATABASE
    data_dir: str = DEFAULT_DATA_DIR

    def warehouse(self) -> Warehouse:
        return Warehouse.at(self.database, self.data_dir)


class ProvidersResource(dg.ConfigurableResource):
    """Provider clients. A provider with an API key set goes live; otherwise the emulator answers."""

    emulator_url: str = DEFAULT_EMULATOR_URL
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    max_retries: int = 4

    def settings_for(self, provider: str) -> ClientSettings:
        if provider == "openai":
            if self.openai_api_key:
                return ClientSettings(self.openai_api_key, self.openai_base_url, self.max_retries)
            return ClientSettings(EMULATOR_API_KEY, self.emulator_url.rstrip("/") + "/v1", self.max_retries)
        raise ValueError(f"no client settings for provider {provider!r}")

    def adapter(self, provider: str) -> BatchAdapter:
        return build_adapter(provider, self.settings_for(provider))


def _env_secret(name: str):
    """dg.EnvVar when the variable is set (so the value never lands in config), else None."""
    return dg.EnvVar(name) if os.environ.get(name) else None


def default_resources() -> dict:
    return {
        "warehouse": WarehouseResource(
            database=os.environ.get("BATCH_ASSETS_DATABASE", DEFAULT_DATABASE),
            data_dir=os.environ.get("BATCH_ASSETS_DATA_DIR", DEFAULT_DATA_DIR),
        ),
        "providers": ProvidersResource(
            emulator_url=os.environ.get("BATCH_ASSETS_EMULATOR_URL", DEFAULT_EMULATOR_URL),
            openai_api_key=_env_secret("OPENAI_API_KEY"),
            openai_base_url=os.environ.get("OPENAI_BASE_URL") or None,
        ),
    }
