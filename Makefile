# Developer shortcuts. Uses .venv/bin/python when present, else python3 on PATH.
PY ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
PATHS := engine pgwire connectors tests bench

.PHONY: help fmt lint test unit slt e2e bench planner-update

help:
	@echo "targets: fmt lint test unit slt e2e bench planner-update"

fmt:
	$(PY) -m ruff format $(PATHS)
	$(PY) -m ruff check --fix $(PATHS)

lint:
	$(PY) -m ruff check $(PATHS)
	$(PY) -m ruff format --check $(PATHS)

# the whole suite, as CI runs it
test:
	$(PY) -m pytest

# in-process tests only (no server subprocess)
unit:
	$(PY) -m pytest -m "not e2e"

# the sqllogictest files (and the runner's own tests)
slt:
	$(PY) -m pytest tests/slt

# everything that runs against a real server
e2e:
	$(PY) -m pytest -m e2e

bench:
	@if [ -f bench/run.py ]; then $(PY) bench/run.py $(ARGS); \
	else echo "no benchmark harness yet (expected bench/run.py)"; exit 1; fi

planner-update:
	$(PY) -m pytest tests/planner --update
