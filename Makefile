# statekit — the two commands: `make demo` and `make test` (each bootstraps .venv itself).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR := demo
PYTEST_ARGS ?=

.PHONY: demo test test-fast lint docs check-java prometheus chromium venv clean help

help:
	@echo "make demo   build .venv, run the reference pipeline into ./$(DEMO_DIR)/checkpoint, report on it"
	@echo "make test   build .venv and run the whole test suite (lint, contracts, mypy, unit, Spark)"
	@echo "make lint   ruff, the import-linter contracts and mypy only"
	@echo "make docs   build the docs site into ./build/site (mkdocs build --strict)"
	@echo "make clean  remove .venv and ./$(DEMO_DIR)"

check-java:
	@$(PYTHON) jobs/java_check.py

# Debian packages some tests need (prometheus: the server and promtool for the metrics tests;
# chromium: the browser test of `statekit tui --web`), installed where missing and apt-get
# and root are available; without them those tests skip with a message (never fatal).
# $(call apt_package,PACKAGE,COMMAND IT PROVIDES,WHAT NEEDS IT)
define apt_package
	@if command -v $(2) >/dev/null; then exit 0; fi; \
	install="DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(1)"; \
	if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's $(1) package for $(3)"; \
		sh -c "$$install" >/dev/null 2>&1 || { apt-get update -q >/dev/null && \
			sh -c "$$install" >/dev/null; } || \
		echo "note: installing $(1) failed; $(3) will skip"; \
	else \
		echo "note: $(2) not found (apt-get install $(1) needs apt-get and root); $(3) will skip"; \
	fi
endef

prometheus:
	$(call apt_package,prometheus,promtool,the Prometheus/promtool tests)

chromium:
	$(call apt_package,chromium,chromium,the browser test)

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
	$(BIN)/statekit growth $(DEMO_DIR)/checkpoint --progress-log $(DEMO_DIR)/progress.jsonl
	$(BIN)/statekit recovery $(DEMO_DIR)/checkpoint --progress-log $(DEMO_DIR)/progress.jsonl --rto 30s
	$(BIN)/statekit doctor $(DEMO_DIR)/checkpoint --file-sink $(DEMO_DIR)/output --progress-log $(DEMO_DIR)/progress.jsonl

lint: venv
	$(BIN)/ruff check .
	$(BIN)/python tests/static_checks.py

# The docs site; --strict turns a broken link, a missing page or a missing sample into a failure.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The suite runs on TEST_WORKERS processes, a test module per worker at a time (each worker
# has its own JVM and builds the session fixtures it needs).
TEST_WORKERS ?= 2
test: check-java prometheus chromium lint docs
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=15 $(PYTEST_ARGS)

# the edit loop: lint and every test that starts no JVM
test-fast: lint
	$(BIN)/python -m pytest -m "not spark" -n auto --dist load --durations=10 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(DEMO_DIR) build
