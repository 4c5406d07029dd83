# statekit — the two commands: `make demo` and `make test` (each bootstraps .venv itself).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR := demo
PYTEST_ARGS ?=

.PHONY: demo test test-fast test-oracle test-profile lint docs check-java prometheus chromium tmux venv clean help

help:
	@echo "make demo   build .venv, run the reference pipeline into ./$(DEMO_DIR)/checkpoint, report on it"
	@echo "make test   build .venv and run the whole test suite (lint, contracts, mypy, unit, Spark)"
	@echo "make test-fast    lint and every test that starts no JVM, but the soak (the edit loop)"
	@echo "make test-oracle  every case of every Spark-judged matrix (hours; before a release)"
	@echo "make test-profile the suite's time per tier and its slowest modules, into docs/development.md"
	@echo "make lint   ruff, the import-linter contracts and mypy only"
	@echo "make docs   build the docs site into ./build/site (mkdocs build --strict)"
	@echo "make clean  remove .venv and ./$(DEMO_DIR)"

check-java:
	@$(PYTHON) jobs/java_check.py

# Debian packages some tests need (prometheus: the server and promtool for the metrics tests;
# chromium: the browser tests of `statekit tui --web`; tmux: the soak test's terminal), installed where missing and apt-get
# and root are available. Where one is missing, the tests that need it fail under CI=true or
# STATEKIT_REQUIRE_TOOLS=1 (tests/support/tools.py) and skip elsewhere: so a failed install
# stops a CI run here, at once, naming the package.
# $(call apt_package,PACKAGE,COMMAND IT PROVIDES,WHAT NEEDS IT)
REQUIRE_TOOLS := $(if $(filter 1,$(STATEKIT_REQUIRE_TOOLS)),1,$(if $(filter 0,$(STATEKIT_REQUIRE_TOOLS)),,$(if $(filter true 1 yes,$(CI)),1,)))
define apt_package
	@if command -v $(2) >/dev/null; then exit 0; fi; \
	install="DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(1)"; \
	if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's $(1) package for $(3)"; \
		sh -c "$$install" >/dev/null 2>&1 || { apt-get update -q >/dev/null && \
			sh -c "$$install" >/dev/null; }; \
	fi; \
	if command -v $(2) >/dev/null; then exit 0; fi; \
	if [ -n "$(REQUIRE_TOOLS)" ]; then \
		echo "error: $(2) not found and Debian's $(1) package could not be installed; it is needed by $(3) (required under CI=true or STATEKIT_REQUIRE_TOOLS=1)"; exit 1; \
	fi; \
	echo "note: $(2) not found (apt-get install $(1)); $(3) will skip"
endef

prometheus:
	$(call apt_package,prometheus,promtool,the Prometheus/promtool tests)

chromium:
	$(call apt_package,chromium,chromium,the browser test)

tmux:
	$(call apt_package,tmux,tmux,the soak test of statekit tui --watch)

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

# The suite runs on TEST_WORKERS processes (each its own JVM); tests are handed out one at a
# time, except a module's tests that share a module-scoped fixture, which stay on one worker
# (tests/conftest.py marks them xdist_group). Checkpoints several modules need are built once
# per run and shared (tests/support/shared_build.py). The Spark-judged matrices run a
# fixed-seed covering sample (tests/support/oracle.py); `make test-oracle` runs all of them.
TEST_WORKERS ?= 2
PYTEST_RUN = $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup
test: check-java prometheus chromium tmux lint docs
	$(PYTEST_RUN) --durations=15 $(PYTEST_ARGS)

# every case of the doctor campaign (every checkpoint kind × every generated fault), the
# migrate matrix, the cluster writes and the rollback restarts: hours on 2 cores
test-oracle: check-java prometheus chromium tmux venv
	STATEKIT_ORACLE=full $(PYTEST_RUN) -m spark --durations=30 $(PYTEST_ARGS)

# the suite's profile (time per tier, the ten slowest modules) into docs/development.md
test-profile: check-java prometheus chromium tmux venv
	$(BIN)/python tests/profile_suite.py --write docs/development.md

# the edit loop: lint and every test that starts no JVM
test-fast: lint
	$(BIN)/python -m pytest -m "not spark and not soak" -n auto --dist load --durations=10 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(DEMO_DIR) build
