# Every target bootstraps .venv itself (re-installs when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UI_PORT ?= 3000
EMULATOR_PORT ?= 8765

.PHONY: demo test test-fast lint dev dev-distributed bench emulator emulator-bench e2e soak clean services services-stop

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/batch-assets demo

# Two worker processes (pytest-xdist; each test has its own DuckDB file, data dir and emulator port):
# the suite is CPU-bound, and one process used ~1 of the 2 cores. `TEST_WORKERS=0` runs it in one process.
# The suite runs under `services run`: a throwaway PostgreSQL on a free 127.0.0.1 port for the tests that
# need one (BATCH_ASSETS_TEST_PG_URL), stopped and deleted afterwards, also on failure or Ctrl-C.
TEST_WORKERS ?= 2
test: $(STAMP) lint
	$(BIN)/python -m batch_assets.services run -- $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

# The fast lane: everything but the tests marked slow (they start the emulator or Dagster; a guard in
# batch_assets_tests/slow_guard.py fails an unmarked one that does).
test-fast: $(STAMP) lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not slow and not e2e"

# ruff is pinned in the dev extras: its rules and formatter change between releases.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# PostgreSQL and an S3 server (moto) on free 127.0.0.1 ports, state under data/services (Debian's
# postgresql, installed when missing); prints the environment lines to export. Stopped by their PIDs
# with `make services-stop`.
services: $(STAMP)
	@$(BIN)/python -m batch_assets.services start

services-stop: $(STAMP)
	@$(BIN)/python -m batch_assets.services stop

dev: $(STAMP)
	$(BIN)/batch-assets dev --ui-port $(UI_PORT) --emulator-port $(EMULATOR_PORT)

# `make dev` on the distributed backend: throwaway PostgreSQL + S3, Dagster with deploy/dagster.local.yaml
# (queued runs, tag limits, pools), the demo tasks submitted through the run queue and carried to final.
dev-distributed: $(STAMP)
	$(BIN)/batch-assets dev --distributed --ui-port $(UI_PORT) --emulator-port $(EMULATOR_PORT)

# The UI end to end in a headless Chromium (Debian's package; Playwright drives it, downloads no browser):
# emulator + `dg dev` on free ports over a seeded temporary data dir, stopped also on failure.
# Screenshots and the stack's log land in data/e2e/; E2E_UPDATE_DOCS=1 also refreshes docs/images/e2e_*.png.
CHROMIUM = $(shell command -v chromium || command -v chromium-browser)
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)

e2e: $(STAMP)
	@if [ -z "$(CHROMIUM)" ]; then \
		echo "installing chromium (apt)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; \
	fi
	E2E_CHROMIUM="$$(command -v chromium || command -v chromium-browser)" E2E_UPDATE_DOCS=$(E2E_UPDATE_DOCS) \
		$(BIN)/python -m pytest -q -m e2e --durations=0 batch_assets_tests/e2e

bench: $(STAMP)
	$(BIN)/batch-assets bench $(if $(ITEMS),--items $(ITEMS),) $(if $(REPEAT),--repeat $(REPEAT),)

# Not part of `make test`: every provider, 20 partitions, 5 % random faults, driven to final (a few minutes).
soak: $(STAMP)
	$(BIN)/batch-assets soak $(SOAK_ARGS)

emulator: $(STAMP)
	$(BIN)/batch-assets emulator --port $(EMULATOR_PORT)

clean:
	rm -rf data/warehouse.duckdb* data/manifests data/shards data/raw data/emulator data/dagster_home data/bench data/e2e

emulator-bench: $(STAMP)
	$(BIN)/python -m batch_assets.emulator.bench $(if $(PROVIDER),--provider $(PROVIDER),)
