"""Dagster resources: the warehouse (DuckDB file + data folder) and the provider clients.

Which endpoint a provider's adapter talks to is chosen explicitly, never by the presence of a key:
`BATCH_ASSETS_PROVIDER_MODE=emulator|live` (default emulator) for every provider, overridden per
provider by `BATCH_ASSETS_<PROVIDER>_MODE`. In emulator mode the local provider emulator answers
(whatever keys are set); in live mode the provider's service does, with `<PROVIDER>_API_KEY`, and
a live provider without its key refuses to load. Secrets come only from the environment (dg.EnvVar).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import dagster as dg
from pydantic import Field, field_validator

from batch_assets import dev_stack
from batch_assets.ledger.warehouse import Warehouse
from batch_assets.providers.contract import BatchProvider, ClientSettings
from batch_assets.providers.registry import build_adapter, job_endpoint, known_providers, provider_definition

DEFAULT_DATABASE = "data/warehouse.duckdb"
DEFAULT_DATA_DIR = "data"
DEFAULT_EMULATOR_URL = "http://127.0.0.1:8765"
DEFAULT_ACCOUNT = "default"
# Key the SDKs are given when talking to the emulator (it accepts any non-empty bearer token).
EMULATOR_API_KEY = "emulator-no-key"

EMULATOR, LIVE = "emulator", "live"
MODES = (EMULATOR, LIVE)
PROVIDER_MODE_ENV = "BATCH_ASSETS_PROVIDER_MODE"


class ProviderConfigurationError(ValueError):
    """The provider settings cannot work (e.g. live mode without an API key); the message says the fix."""


def provider_mode_env(provider: str) -> str:
    return f"BATCH_ASSETS_{provider.upper()}_MODE"


def api_key_env(provider: str) -> str:
    return f"{provider.upper()}_API_KEY"


def endpoint_host(url: str) -> str:
    """`scheme://host[:port]` of a URL: where a job went, without path, query or credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}" if parts.scheme else f"{host}{port}"


class WarehouseResource(dg.ConfigurableResource):
    """Where the DuckDB warehouse (business tables + ledger) and run-time files live."""

    database: str = DEFAULT_DATABASE
    data_dir: str = DEFAULT_DATA_DIR

    def warehouse(self) -> Warehouse:
        return Warehouse.at(self.database, self.data_dir)


class ProviderConnection(dg.Config):
    """How to reach one provider: its mode (unset: the resource's mode), its API key (from the
    environment: default_resources gives a dg.EnvVar, so the value never lands in run config) and
    live base URL (unset: the provider's live default). The key is left out of repr."""

    mode: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    base_url: str | None = None
    # The provider account behind the key: quota is counted per account (docs/providers.md), with
    # the account's limits where its tier differs from the provider's limits.yaml.
    account: str = DEFAULT_ACCOUNT
    max_concurrent_jobs: int | None = Field(default=None, ge=1)
    max_enqueued_tokens: int | None = Field(default=None, ge=1)
    max_creates_per_minute: int | None = Field(default=None, ge=1)

    def account_settings(self) -> dict:
        return {
            "account": self.account,
            "account_max_concurrent_jobs": self.max_concurrent_jobs,
            "account_max_enqueued_tokens": self.max_enqueued_tokens,
            "account_max_creates_per_minute": self.max_creates_per_minute,
        }

    @field_validator("mode")
    @classmethod
    def _mode(cls, v: str | None) -> str | None:
        return None if v is None else _check_mode(v)


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"provider mode must be emulator or live, got {mode!r}")
    return mode


def _secret(value: str | None) -> str | None:
    """A key as given, or the value of the environment variable a dg.EnvVar names."""
    if isinstance(value, dg.EnvVar):
        return value.get_value()
    return value or None


class ProvidersResource(dg.ConfigurableResource):
    """Provider clients. Every provider talks to the local emulator (under its emulator path, from
    its definition) unless its mode is live (`mode`, or its connection's own); a live provider
    needs its API key. A key alone never makes a provider live."""

    mode: str = EMULATOR
    emulator_url: str = DEFAULT_EMULATOR_URL
    connections: dict[str, ProviderConnection] = {}
    max_retries: int = 4

    @field_validator("mode")
    @classmethod
    def _mode(cls, v: str) -> str:
        return _check_mode(v)

    def _connection(self, provider: str) -> ProviderConnection | None:
        provider_definition(provider)  # refuses an unknown provider, naming the known ones
        return self.connections.get(provider)

    def mode_of(self, provider: str) -> str:
        conn = self._connection(provider)
        return (conn.mode if conn and conn.mode else None) or self.mode

    def is_live(self, provider: str) -> bool:
        return self.mode_of(provider) == LIVE

    def settings_for(self, provider: str) -> ClientSettings:
        definition = provider_definition(provider)
        conn = self._connection(provider)
        account = conn.account_settings() if conn else {"account": DEFAULT_ACCOUNT}
        if not self.is_live(provider):
            return ClientSettings(
                EMULATOR_API_KEY,
                self.emulator_url.rstrip("/") + definition.emulator_path,
                self.max_retries,
                **account,
            )
        api_key = _secret(conn.api_key) if conn else None
        if not api_key:
            raise ProviderConfigurationError(missing_key_message(provider))
        return ClientSettings(
            api_key,
            (conn.base_url if conn else None) or definition.live_base_url,
            self.max_retries,
            mode=LIVE,
            **account,
        )

    def endpoint_of(self, provider: str) -> tuple[str, str]:
        """(mode, `scheme://host[:port]`) of where the provider's jobs go: for the ledger, no secrets."""
        if not self.is_live(provider):
            return EMULATOR, endpoint_host(self.emulator_url)
        conn = self._connection(provider)
        base = (conn.base_url if conn else None) or provider_definition(provider).live_base_url
        mode, url = job_endpoint(provider, ClientSettings("", base, mode=LIVE))
        return mode, endpoint_host(url)

    def adapter(self, provider: str) -> BatchProvider:
        return build_adapter(provider, self.settings_for(provider))


def missing_key_message(provider: str) -> str:
    return (
        f"provider {provider!r} is in live mode but {api_key_env(provider)} is not set. Fix: set "
        f"{api_key_env(provider)}, or run it against the emulator ({provider_mode_env(provider)}=emulator, or "
        f"unset {PROVIDER_MODE_ENV} / set it to emulator)"
    )


def _env_secret(name: str):
    """dg.EnvVar when the variable is set (so the value never lands in config), else None."""
    return dg.EnvVar(name) if os.environ.get(name) else None


def _mode_from_env(variable: str) -> str | None:
    value = os.environ.get(variable, "").strip().lower()
    if not value:
        return None
    if value not in (EMULATOR, LIVE):
        raise ProviderConfigurationError(
            f"{variable}={os.environ[variable]!r} is not a provider mode. "
            f"Fix: set {variable} to emulator or live (or unset it)"
        )
    return value


ACCOUNT_LIMIT_FIELDS = ("max_concurrent_jobs", "max_enqueued_tokens", "max_creates_per_minute")


def connections_from_env() -> dict[str, ProviderConnection]:
    """`BATCH_ASSETS_<PROVIDER>_MODE` / `<PROVIDER>_API_KEY` / `<PROVIDER>_BASE_URL` / `<PROVIDER>_ACCOUNT`, and the
    account's own limits `<PROVIDER>_MAX_CONCURRENT_JOBS` / `_MAX_ENQUEUED_TOKENS` / `_MAX_CREATES_PER_MINUTE`, per
    known provider, for those with any of them set."""
    connections = {}
    for name in known_providers():
        mode = _mode_from_env(provider_mode_env(name))
        api_key = _env_secret(api_key_env(name))
        base_url = os.environ.get(f"{name.upper()}_BASE_URL") or None
        account = os.environ.get(f"{name.upper()}_ACCOUNT") or None
        limits = {f: _positive_int_env(f"{name.upper()}_{f.upper()}") for f in ACCOUNT_LIMIT_FIELDS}
        limits = {f: v for f, v in limits.items() if v is not None}
        if mode is not None or api_key is not None or base_url is not None or account is not None or limits:
            connections[name] = ProviderConnection(
                mode=mode, api_key=api_key, base_url=base_url, account=account or DEFAULT_ACCOUNT, **limits
            )
    return connections


def _positive_int_env(variable: str) -> int | None:
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ProviderConfigurationError(f"{variable}={raw!r}: expected a whole number of at least 1 (or unset it)")
    return int(raw)


def emulator_url_from_env(data_dir: str | Path | None = None) -> str:
    """$BATCH_ASSETS_EMULATOR_URL; else the emulator of a `batch-assets dev` running over the data
    directory (`data_dir`, else the environment's); else the default port."""
    explicit = os.environ.get("BATCH_ASSETS_EMULATOR_URL")
    if explicit:
        return explicit
    if data_dir is None:
        data_dir = os.environ.get("BATCH_ASSETS_DATA_DIR") or os.path.dirname(
            os.environ.get("BATCH_ASSETS_DATABASE", DEFAULT_DATABASE)
        )
    return dev_stack.recorded_emulator_url(Path(data_dir or ".")) or DEFAULT_EMULATOR_URL


def providers_from_env(data_dir: str | Path | None = None) -> ProvidersResource:
    """The provider clients as the environment sets them (the emulator: see emulator_url_from_env).
    Every live provider must have its API key: a missing one is refused here (at definitions load),
    naming the variable and the fix."""
    resource = ProvidersResource(
        mode=_mode_from_env(PROVIDER_MODE_ENV) or EMULATOR,
        emulator_url=emulator_url_from_env(data_dir),
        connections=connections_from_env(),
    )
    missing = [name for name in known_providers() if resource.is_live(name) and not os.environ.get(api_key_env(name))]
    if missing:
        raise ProviderConfigurationError("; ".join(missing_key_message(name) for name in missing))
    return resource


def database_from_env() -> str:
    """$BATCH_ASSETS_DATABASE, else the default warehouse file."""
    return os.environ.get("BATCH_ASSETS_DATABASE", DEFAULT_DATABASE)


def default_resources() -> dict:
    return {
        "warehouse": WarehouseResource(
            database=database_from_env(),
            data_dir=os.environ.get("BATCH_ASSETS_DATA_DIR", DEFAULT_DATA_DIR),
        ),
        "providers": providers_from_env(),
    }
