# Every target bootstraps .venv itself (re-installs when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UI_PORT ?= 3000
EMULATOR_PORT ?= 8765

.PHONY: demo test dev bench soak emulator clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/batch-assets demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

dev: $(STAMP)
	$(BIN)/batch-assets dev --ui-port $(UI_PORT) --emulator-port $(EMULATOR_PORT)

bench: $(STAMP)
	$(BIN)/batch-assets bench $(if $(ITEMS),--items $(ITEMS),)

# Not part of `make test`: every provider, 20 partitions, 5 % random faults, driven to final (a few minutes).
soak: $(STAMP)
	$(BIN)/batch-assets soak $(SOAK_ARGS)

emulator: $(STAMP)
	$(BIN)/batch-assets emulator --port $(EMULATOR_PORT)

clean:
	rm -rf data/warehouse.duckdb* data/manifests data/shards data/raw data/emulator data/dagster_home data/bench
