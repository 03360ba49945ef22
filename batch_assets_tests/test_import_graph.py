"""The package's import graph keeps its layers: no cycles, Dagster only in the wiring, providers
below the pipeline. Imports inside functions count (grimp reads every import statement)."""

from __future__ import annotations

import functools

import grimp
import pytest

PACKAGE = "batch_assets"

# Layers that must not reach a Dagster import, directly or through another module.
DAGSTER_FREE = ["pipeline", "ledger", "spec", "policy", "providers", "emulator", "formatting", "sqltext", "progress"]

# (importer, imported): the importer may not reach the imported package by any chain of imports.
FORBIDDEN = [
    ("providers", "pipeline"),
    ("providers", "ledger"),
    ("providers", "components"),
    ("providers", "defs"),
    ("providers", "cli"),
    ("ledger", "pipeline"),
    ("ledger", "components"),
    ("ledger", "defs"),
    ("ledger", "cli"),
    ("pipeline", "components"),
    ("pipeline", "defs"),
    ("pipeline", "cli"),
    ("pipeline", "demo"),
    ("pipeline", "bench"),
    ("spec", "pipeline"),
    ("policy", "pipeline"),
    ("emulator", "pipeline"),
    ("emulator", "cli"),
]


@functools.cache
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        PACKAGE, include_external_packages=True, exclude_type_checking_imports=True, cache_dir=None
    )


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself): a
    module's component is itself plus every module it both reaches and is reached from."""
    modules = sorted(m for m in graph.modules if m == PACKAGE or m.startswith(PACKAGE + "."))
    seen: set[str] = set()
    found: list[list[str]] = []
    for module in modules:
        if module in seen:
            continue
        both_ways = graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        component = sorted({module} | {m for m in both_ways if m.startswith(PACKAGE)})
        seen.update(component)
        if len(component) > 1 or module in graph.find_modules_directly_imported_by(module):
            found.append(component)
    return found


def test_the_package_has_no_import_cycle() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], (
        "import cycles (break them by moving the shared part into a module both import):\n"
        + "\n".join(" <-> ".join(c) for c in cycles)
    )


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above can fail: a graph with a -> b -> a is reported."""
    graph = grimp.ImportGraph()
    for m in ("batch_assets.a", "batch_assets.b", "batch_assets.c"):
        graph.add_module(m)
    graph.add_import(importer="batch_assets.a", imported="batch_assets.b")
    graph.add_import(importer="batch_assets.b", imported="batch_assets.a")
    graph.add_import(importer="batch_assets.b", imported="batch_assets.c")
    assert _cycles(graph) == [["batch_assets.a", "batch_assets.b"]]


@pytest.mark.parametrize("layer", DAGSTER_FREE)
def test_stages_ledger_and_providers_never_import_dagster(layer: str) -> None:
    graph = _graph()
    importer = f"{PACKAGE}.{layer}"
    assert importer in graph.modules, f"{importer} does not exist: update DAGSTER_FREE"
    chain = graph.find_shortest_chain(importer=importer, imported="dagster", as_packages=True)
    assert chain is None, f"{layer} reaches Dagster: {' -> '.join(chain)}"


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN, ids=[f"{a}-{b}" for a, b in FORBIDDEN])
def test_lower_layers_never_import_higher_ones(importer: str, imported: str) -> None:
    graph = _graph()
    chain = graph.find_shortest_chain(
        importer=f"{PACKAGE}.{importer}", imported=f"{PACKAGE}.{imported}", as_packages=True
    )
    assert chain is None, f"{importer} reaches {imported}: {' -> '.join(chain)}"
