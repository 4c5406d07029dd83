# statekit — the two commands: `make demo` and `make test` (each bootstraps .venv itself).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR := demo
PYTEST_ARGS ?=

.PHONY: demo test lint check-java venv clean help

help:
	@echo "make demo   build .venv, run the reference pipeline into ./$(DEMO_DIR)/checkpoint, report on it"
	@echo "make test   build .venv and run the whole test suite (lint, contracts, mypy, unit, Spark)"
	@echo "make lint   ruff, the import-linter contracts and mypy only"
	@echo "make clean  remove .venv and ./$(DEMO_DIR)"

check-java:
	@$(PYTHON) jobs/java_check.py

$(STAMP): pyproject.toml constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; statekit needs Python 3.10+"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

demo: check-java venv
	rm -rf $(DEMO_DIR)
	$(BIN)/statekit pipeline generate --landing $(DEMO_DIR)/landing --batches 36 --seed 7
	$(BIN)/statekit pipeline run --landing $(DEMO_DIR)/landing \
		--checkpoint $(DEMO_DIR)/checkpoint --output $(DEMO_DIR)/output \
		--provider hdfs --partitions 8 --maintenance-interval 1s \
		--progress-log $(DEMO_DIR)/progress.jsonl
	$(BIN)/statekit report $(DEMO_DIR)/checkpoint
	$(BIN)/statekit growth $(DEMO_DIR)/checkpoint --progress $(DEMO_DIR)/progress.jsonl
	$(BIN)/statekit recovery $(DEMO_DIR)/checkpoint --progress $(DEMO_DIR)/progress.jsonl --rto 30s
	$(BIN)/statekit doctor $(DEMO_DIR)/checkpoint --file-sink $(DEMO_DIR)/output

lint: venv
	$(BIN)/ruff check .
	$(BIN)/python tests/static_checks.py

test: check-java lint
	$(BIN)/python -m pytest --durations=15 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(DEMO_DIR) build
