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


# Where each provider lives on the emulator, and its live default base URL (None: the SDK's own).
EMULATOR_PATHS = {"openai": "/v1", "dashscope": "/compatible-mode/v1", "anthropic": "", "gemini": ""}
LIVE_BASE_URLS = {"dashscope": "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"}


class ProvidersResource(dg.ConfigurableResource):
    """Provider clients. A provider with an API key set goes live; otherwise the emulator answers."""

    emulator_url: str = DEFAULT_EMULATOR_URL
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    gemini_api_key: str | None = None
    gemini_base_url: str | None = None
    dashscope_api_key: str | None = None
    dashscope_base_url: str | None = None
    max_retries: int = 4

    def is_live(self, provider: str) -> bool:
        return bool(getattr(self, f"{provider}_api_key"))

    def settings_for(self, provider: str) -> ClientSettings:
        if provider not in EMULATOR_PATHS:
            raise ValueError(f"no client settings for provider {provider!r}; known: {', '.join(EMULATOR_PATHS)}")
        if self.is_live(provider):
            base_url = getattr(self, f"{provider}_base_url") or LIVE_BASE_URLS.get(provider)
            return ClientSettings(getattr(self, f"{provider}_api_key"), base_url, self.max_retries)
        return ClientSettings(EMULATOR_API_KEY, self.emulator_url.rstrip("/") + EMULATOR_PATHS[provider], self.max_retries)

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
            **{f"{p}_api_key": _env_secret(f"{p.upper()}_API_KEY") for p in EMULATOR_PATHS},
            **{f"{p}_base_url": os.environ.get(f"{p.upper()}_BASE_URL") or None for p in EMULATOR_PATHS},
        ),
    }
