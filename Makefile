# One obvious command per task, the same locally and in CI (.ci/run ends in `make test`).
# Every target that needs the venv creates it first (.venv/.installed stamp), so `make test`
# works from a fresh clone.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

# pytest exits 5 when a selection holds no test; an empty half of the suite is not a failure.
define pytest_allow_empty
	$(BIN)/pytest $(1); rc=$$?; if [ $$rc -eq 5 ]; then echo "(no tests selected: $(1))"; exit 0; fi; exit $$rc
endef

.PHONY: install kafka-jars up down status test test-unit test-integration lint fmt demo bench helm-lint

$(INSTALLED): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	@touch $@

install: $(INSTALLED)

kafka-jars: $(INSTALLED)
	$(BIN)/python -m runplane.stack jars

up: $(INSTALLED)
	$(BIN)/runplane up

down: $(INSTALLED)
	$(BIN)/runplane down

status: $(INSTALLED)
	$(BIN)/runplane status

# Unit first (no I/O, seconds), then everything that needs the real stack, which the
# integration fixtures start on demand (or reuse: `make up` keeps one running).
test: $(INSTALLED)
	@$(MAKE) --no-print-directory test-unit
	@$(MAKE) --no-print-directory test-integration

test-unit: $(INSTALLED)
	$(call pytest_allow_empty,tests -m "not integration and not e2e and not browser")

test-integration: $(INSTALLED) kafka-jars
	$(call pytest_allow_empty,tests -m "integration or e2e or browser")

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt: $(INSTALLED)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

demo: $(INSTALLED)
	$(BIN)/runplane demo

bench: $(INSTALLED)
	$(BIN)/python -m benchmarks

helm-lint: $(INSTALLED)
	scripts/helm-check.sh
