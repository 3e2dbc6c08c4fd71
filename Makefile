# One obvious command per task, the same locally and in CI (.ci/run ends in `make test`).
# Every target that needs the venv creates it first (.venv/.installed stamp), and `make demo` /
# `make test` also install the system packages (scripts/install-system-deps.sh: seconds when
# everything is there) and the Kafka jars, so either works first on a fresh clone and machine.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

# pytest exits 5 when a selection holds no test; an empty half of the suite is not a failure.
define pytest_allow_empty
	$(BIN)/pytest $(1); rc=$$?; if [ $$rc -eq 5 ]; then echo "(no tests selected: $(1))"; exit 0; fi; exit $$rc
endef

.PHONY: install system-deps kafka-jars up down status test test-unit test-integration lint fmt demo bench helm-lint chaos chaos-down

# pip's own -q hides everything for the minute a fresh venv takes; this keeps one line per
# package (Collecting/Installing/Successfully), so a long install shows it is moving.
$(INSTALLED): pyproject.toml
	@test -x $(BIN)/python || { echo "== creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "== installing Python packages into $(VENV) (about a minute on a fresh machine)"
	@set -o pipefail; PYTHONUNBUFFERED=1 $(BIN)/python -m pip install --upgrade pip \
		| awk '/^(Collecting|Successfully)/ {print "   " $$0; fflush()}'
	@set -o pipefail; PYTHONUNBUFFERED=1 $(BIN)/python -m pip install -e ".[dev,pydantic-ai,openai-agents]" \
		| awk '/^(Collecting|Installing|Successfully)/ {print "   " $$0; fflush()}'
	@touch $@

install: $(INSTALLED)

# redis-server, maven/JDK, chromium, python3-venv: only the missing ones (apt, needs root).
system-deps:
	@bash scripts/install-system-deps.sh

kafka-jars: $(INSTALLED)
	@$(BIN)/python -m runplane.stack jars

up: $(INSTALLED)
	$(BIN)/runplane up

down: $(INSTALLED)
	$(BIN)/runplane down

status: $(INSTALLED)
	$(BIN)/runplane status

# Unit first (no I/O, seconds), then everything that needs the real stack, which the
# integration fixtures start on demand (or reuse: `make up` keeps one running).
test: system-deps $(INSTALLED)
	@$(MAKE) --no-print-directory test-unit
	@$(MAKE) --no-print-directory test-integration

test-unit: $(INSTALLED)
	$(call pytest_allow_empty,tests -m "not integration and not e2e and not browser")

# A stack that was already up before the tests (`make up`, a second terminal) is reused and
# left alone; one the tests had to start is stopped afterwards, pass or fail, so `make test`
# leaves no broker behind.
test-integration: $(INSTALLED) kafka-jars
	@if $(BIN)/runplane status >/dev/null 2>&1; then was_up=1; else was_up=; fi; \
	$(BIN)/pytest tests -m "integration or e2e or browser"; rc=$$?; \
	if [ -z "$$was_up" ]; then echo "== stopping the stack the tests started"; $(BIN)/runplane down >/dev/null || true; fi; \
	if [ $$rc -eq 5 ]; then echo "(no tests selected)"; exit 0; fi; exit $$rc

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt: $(INSTALLED)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

demo: system-deps $(INSTALLED) kafka-jars
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
