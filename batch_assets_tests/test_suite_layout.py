"""The test suite's own layout: no test module imports another (shared fixtures live in conftest.py,
shared helpers in plain modules beside it), so any test module runs, moves or goes alone."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
PACKAGE = TESTS_DIR.name


def _module_name(path: Path) -> str:
    return ".".join((PACKAGE, *path.relative_to(TESTS_DIR).with_suffix("").parts))


def _imported_modules(source: str, module: str) -> set[str]:
    """Every module an import statement of `module` names (inside functions too), relative ones resolved."""
    package = module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = [*package[: len(package) - node.level + 1], node.module] if node.level else [node.module]
            base = ".".join(p for p in parts if p)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from . import test_x`
    return found


def _test_modules_imported(source: str, module: str) -> list[str]:
    return sorted(
        m
        for m in _imported_modules(source, module)
        if m.startswith(PACKAGE + ".") and m.rsplit(".", 1)[-1].startswith("test_") and m != module
    )


def test_no_test_module_imports_another() -> None:
    offenders = {
        str(path.relative_to(TESTS_DIR)): imported
        for path in sorted(TESTS_DIR.rglob("*.py"))
        if (imported := _test_modules_imported(path.read_text(encoding="utf-8"), _module_name(path)))
    }
    assert offenders == {}, "move what these share into conftest.py (fixtures) or a helper module not named test_*"


def test_the_import_check_sees_relative_absolute_and_local_imports() -> None:
    """The check above can fail: each way of importing a sibling test module is caught, helpers are not."""
    source = (
        "from .test_ui import Stack\n"
        "from .. import test_cli\n"
        "def helper():\n"
        "    import batch_assets_tests.test_sensor\n"
        "from batch_assets_tests import provider_calls\n"
        "from .conftest import x\n"
        "from ..sensor_ticks import tick\n"
    )
    assert _test_modules_imported(source, f"{PACKAGE}.e2e.test_sample") == [
        f"{PACKAGE}.e2e.test_ui",
        f"{PACKAGE}.test_cli",
        f"{PACKAGE}.test_sensor",
    ]
