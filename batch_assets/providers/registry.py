"""Which providers exist, and what each offers: one folder per provider plus its name here.

Each name in PROVIDERS is the package `batch_assets.providers.<name>`, whose `PROVIDER` is its
ProviderDefinition (adapter reference, wire formats by endpoint, limits file, emulator path, live URL).
"""

from __future__ import annotations

import functools
import importlib

from batch_assets.providers.contract import BatchProvider, ClientSettings, ProviderDefinition
from batch_assets.providers.limits import ProviderLimits
from batch_assets.providers.wire import WireFormat

PROVIDERS = ("openai", "dashscope", "anthropic", "gemini")


def known_providers() -> tuple[str, ...]:
    return PROVIDERS


@functools.cache
def provider_definition(name: str) -> ProviderDefinition:
    if name not in PROVIDERS:
        raise ValueError(f"unknown provider {name!r}; known providers: {', '.join(PROVIDERS)}")
    definition = importlib.import_module(f"batch_assets.providers.{name}").PROVIDER
    if definition.name != name:
        raise ValueError(f"batch_assets.providers.{name} declares provider {definition.name!r}")
    return definition


def job_endpoint(name: str, settings: ClientSettings) -> tuple[str, str]:
    """(mode, base URL) of where an adapter built from `settings` sends its jobs, for the ledger
    (which keeps only `scheme://host[:port]`): the SDK's own default host where no base URL is set."""
    return settings.mode, settings.base_url or provider_definition(name).live_host or ""


def build_adapter(name: str, settings: ClientSettings) -> BatchProvider:
    return provider_definition(name).build_adapter(settings)


def wire_format(name: str, endpoint: str) -> WireFormat:
    formats = provider_definition(name).formats
    try:
        return formats[endpoint]
    except KeyError:
        raise ValueError(f"no wire format for {name} {endpoint}; {name} serves: {', '.join(formats)}") from None


def provider_limits(name: str) -> ProviderLimits:
    return provider_definition(name).limits()
