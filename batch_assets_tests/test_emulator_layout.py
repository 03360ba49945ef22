"""The emulator's layout: a shared core in `batch_assets.emulator`, each provider's wire format in
`batch_assets.providers.<name>.emulator`, mounted by the app from its provider list."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from starlette.routing import Route

from batch_assets.emulator.app import EMULATED_PROVIDERS, emulator_package, provider_routes
from batch_assets.emulator.context import EmulatorContext
from batch_assets.emulator.settings import EmulatorSettings, RuntimeSettings
from batch_assets.emulator.store import Store

PACKAGE = Path(__file__).resolve().parents[1] / "batch_assets"
CORE = PACKAGE / "emulator"
# Provider emulators that build on another provider's: DashScope speaks the OpenAI Batch format.
BUILDS_ON = {"dashscope": {"openai"}}


def _imports(path: Path) -> list[str]:
    """Every module `path` imports, anywhere in it, relative imports resolved."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(filter(None, [base, node.module]))
            found += [module, *(f"{module}.{alias.name}" for alias in node.names)]
    return found


def _context(tmp_path: Path) -> EmulatorContext:
    return EmulatorContext(Store(tmp_path), RuntimeSettings(EmulatorSettings()), tmp_path)


@pytest.mark.parametrize("provider", EMULATED_PROVIDERS)
def test_every_emulated_provider_has_an_emulator_package_with_routes(provider: str, tmp_path: Path) -> None:
    package = emulator_package(provider)
    assert package.__name__ == f"batch_assets.providers.{provider}.emulator"
    assert callable(package.routes)
    assert isinstance(package.ROUTE_ORDER, int)
    routes = package.routes(_context(tmp_path))
    assert routes and all(isinstance(route, Route) for route in routes)


def test_the_core_imports_no_provider_module() -> None:
    """Only `app` reaches the providers, and only through its provider list."""
    offenders = {
        f"{path.name}: {module}"
        for path in sorted(CORE.glob("*.py"))
        if path.name != "app.py"
        for module in _imports(path)
        if module.startswith("batch_assets.providers")
    }
    assert not offenders


@pytest.mark.parametrize("provider", EMULATED_PROVIDERS)
def test_a_provider_emulator_imports_only_the_core_and_its_own_folder(provider: str) -> None:
    folders = {provider, *BUILDS_ON.get(provider, ())}
    allowed = ("batch_assets.emulator", *(f"batch_assets.providers.{name}" for name in folders))
    folder = PACKAGE / "providers" / provider / "emulator"
    offenders = {
        f"{path.name}: {module}"
        for path in sorted(folder.glob("*.py"))
        for module in _imports(path)
        if module.startswith("batch_assets") and not module.startswith(allowed)
    }
    assert not offenders


def test_gemini_routes_come_before_openai_routes_whatever_the_list_order(tmp_path: Path) -> None:
    """Gemini's routes on the /v1 paths both serve claim only Gemini requests; mounted after
    OpenAI's, they would never be reached."""
    ctx = _context(tmp_path)
    for providers in (EMULATED_PROVIDERS, tuple(reversed(EMULATED_PROVIDERS))):
        routes = provider_routes(ctx, providers)
        on_v1_files = [type(route).__name__ for route in routes if route.path == "/v1/files"]
        assert on_v1_files == ["GeminiRoute", "Route", "Route"], providers
