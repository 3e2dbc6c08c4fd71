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

.PHONY: install kafka-jars up down status test test-unit test-integration lint fmt demo bench helm-lint chaos chaos-down

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

# The chaos suite on a three-broker cluster of its own: brokers on CHAOS_PORT, +2, +4
# (controllers +1, +3, +5), Redis on CHAOS_PORT+10, state in .runplane-chaos; writes
# bench/chaos.md. `make chaos CHAOS_RUNS=100` for a shorter one; `make chaos-down` stops it.
CHAOS_PORT ?= 29700
CHAOS_RUNS ?= 1000
CHAOS_ENV = p=$(CHAOS_PORT); export RUNPLANE_KAFKA_BROKERS=3 RUNPLANE_REPLICATION_FACTOR=3 \
	RUNPLANE_BOOTSTRAP_SERVERS=127.0.0.1:$$p,127.0.0.1:$$((p+2)),127.0.0.1:$$((p+4)) \
	RUNPLANE_KAFKA_CONTROLLER_PORT=$$((p+1)) RUNPLANE_REDIS_URL=redis://127.0.0.1:$$((p+10))/0 \
	RUNPLANE_STATE_DIR=$(CURDIR)/.runplane-chaos RUNPLANE_KAFKA_HEAP_OPTS="-Xms256m -Xmx512m"

chaos: $(INSTALLED) kafka-jars
	@$(CHAOS_ENV); $(BIN)/runplane up --brokers 3 && \
	$(BIN)/python -m tests.chaos.chaos --runs $(CHAOS_RUNS)

chaos-down: $(INSTALLED)
	@$(CHAOS_ENV); $(BIN)/runplane down

helm-lint: $(INSTALLED)
	scripts/helm-check.sh
