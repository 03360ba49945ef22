"""Fixtures for the browser test (`make e2e`): the running stack and a headless Chromium page."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from batch_assets_tests.e2e.stack import Stack, start_stack

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = PROJECT_ROOT / "data" / "e2e"  # screenshots and the stack's log (gitignored)
# Emulator knobs for the stack: a little faster than real time, no random item faults, so every
# partition's outcome is decided by the test (the failing one by max_requests_per_batch).
E2E_EMULATOR = {"speed": 5.0, "log_requests": False}


def chromium_path() -> str:
    path = os.environ.get("E2E_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("no Chromium found: `apt-get install -y chromium` (make e2e does it) or set E2E_CHROMIUM")
    return path


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    return ARTIFACTS


@pytest.fixture(scope="session")
def stack(artifacts: Path) -> Iterator[Stack]:
    data_dir = Path(tempfile.mkdtemp(prefix="batch_assets_e2e_"))
    running = start_stack(data_dir, E2E_EMULATOR, artifacts / "stack.log")
    try:
        yield running
    finally:
        running.stop()
        if os.environ.get("E2E_KEEP_DATA") != "1":
            shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def browser_page(artifacts: Path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path(), headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        # Dismiss the UI's one-time "Join the Dagster community" dialog before the first page loads.
        context.add_init_script("window.localStorage.setItem('communityNux', '\"1\"')")
        context.set_default_timeout(60_000)
        page = context.new_page()
        try:
            yield page
        finally:
            try:
                page.screenshot(path=str(artifacts / "last_page.png"))
            except Exception:  # the browser may already be gone; the screenshot is a courtesy
                pass
            browser.close()
