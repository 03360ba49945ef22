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
    """Strongly connected components of more than one module (or a module importing itself)."""
    modules = sorted(m for m in graph.modules if m == PACKAGE or m.startswith(PACKAGE + "."))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        # Iterative Tarjan: (module, iterator over its imports).
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if not child.startswith(PACKAGE):
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1 or node in graph.find_modules_directly_imported_by(node):
                    found.append(sorted(component))
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
