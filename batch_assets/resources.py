"""Dagster resources: the warehouse (DuckDB file + data folder) and the provider clients.

Secrets come only from the environment (dg.EnvVar); with no key for a provider, its adapter talks
to the local provider emulator instead.
"""

from __future__ import annotations

import os

import dagster as dg
from pydantic import Field

from batch_assets.ledger.warehouse import Warehouse
from batch_assets.providers.contract import BatchProvider, ClientSettings
from batch_assets.providers.registry import build_adapter, known_providers, provider_definition

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


class ProviderConnection(dg.Config):
    """How to reach one provider live: its API key (from the environment: default_resources gives a
    dg.EnvVar, so the value never lands in run config) and base URL (unset: the provider's live
    default). The key is left out of repr."""

    api_key: str | None = Field(default=None, repr=False)
    base_url: str | None = None


class ProvidersResource(dg.ConfigurableResource):
    """Provider clients. A provider with an API key set goes live; otherwise the emulator answers
    (under the provider's emulator path, from its definition)."""

    emulator_url: str = DEFAULT_EMULATOR_URL
    connections: dict[str, ProviderConnection] = {}
    max_retries: int = 4

    def _connection(self, provider: str) -> ProviderConnection | None:
        provider_definition(provider)  # refuses an unknown provider, naming the known ones
        return self.connections.get(provider)

    def is_live(self, provider: str) -> bool:
        conn = self._connection(provider)
        return bool(conn and conn.api_key)

    def settings_for(self, provider: str) -> ClientSettings:
        definition = provider_definition(provider)
        conn = self._connection(provider)
        if conn and conn.api_key:
            return ClientSettings(conn.api_key, conn.base_url or definition.live_base_url, self.max_retries)
        return ClientSettings(EMULATOR_API_KEY, self.emulator_url.rstrip("/") + definition.emulator_path, self.max_retries)

    def adapter(self, provider: str) -> BatchProvider:
        return build_adapter(provider, self.settings_for(provider))


def _env_secret(name: str):
    """dg.EnvVar when the variable is set (so the value never lands in config), else None."""
    return dg.EnvVar(name) if os.environ.get(name) else None


def connections_from_env() -> dict[str, ProviderConnection]:
    """`<PROVIDER>_API_KEY` / `<PROVIDER>_BASE_URL` per known provider, for those with either set."""
    connections = {}
    for name in known_providers():
        api_key = _env_secret(f"{name.upper()}_API_KEY")
        base_url = os.environ.get(f"{name.upper()}_BASE_URL") or None
        if api_key is not None or base_url is not None:
            connections[name] = ProviderConnection(api_key=api_key, base_url=base_url)
    return connections


def default_resources() -> dict:
    return {
        "warehouse": WarehouseResource(
            database=os.environ.get("BATCH_ASSETS_DATABASE", DEFAULT_DATABASE),
            data_dir=os.environ.get("BATCH_ASSETS_DATA_DIR", DEFAULT_DATA_DIR),
        ),
        "providers": ProvidersResource(
            emulator_url=os.environ.get("BATCH_ASSETS_EMULATOR_URL", DEFAULT_EMULATOR_URL),
            connections=connections_from_env(),
        ),
    }
