# Developer shortcuts. Uses .venv/bin/python when present, else python3 on PATH.
PY ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
PATHS := engine pgwire connectors tests bench examples

.PHONY: help fmt lint typecheck typecheck-update test unit slt e2e crash fuzz bench planner-update

# `make help` lists only what works in this checkout: bench and planner-update need their
# harnesses (bench/run.py, tests/planner/) and say so when those are missing.
help:
	@echo "make fmt             ruff format + ruff check --fix"
	@echo "make lint            ruff check + ruff format --check"
	@echo "make typecheck       mypy against its per-module baseline (tests/lint/mypy_baseline.json)"
	@echo "make test            the whole pytest suite, as CI runs it"
	@echo "make unit            in-process tests only (no server subprocess)"
	@echo "make slt             the sqllogictest files under tests/slt"
	@echo "make e2e             everything that runs against a real server"
	@echo "make crash           crash at every barrier point with more seeds (SWELL_CRASH_SEEDS=5)"
	@echo "make fuzz            differential SQL fuzzing against PostgreSQL 15 (SWELL_FUZZ_SECONDS=600, new seed)"
	@if [ -f bench/run.py ]; then echo "make bench           the benchmark harness (bench/run.py; ARGS=...)"; \
	else echo "make bench           (not available: bench/run.py does not exist yet)"; fi
	@if [ -d tests/planner ]; then echo "make planner-update  rewrite the planner snapshot files"; \
	else echo "make planner-update  (not available: tests/planner does not exist yet)"; fi

fmt:
	$(PY) -m ruff format $(PATHS)
	$(PY) -m ruff check --fix $(PATHS)

lint:
	$(PY) -m ruff check $(PATHS)
	$(PY) -m ruff format --check $(PATHS)

# mypy's errors per module may only shrink; `make typecheck-update` lowers the baseline
typecheck:
	$(PY) -m pytest tests/lint/test_mypy.py -q

typecheck-update:
	$(PY) tests/lint/test_mypy.py --update

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

# crash at every barrier point with more seeds and hit counts (a few seconds per case)
crash:
	SWELL_CRASH_SEEDS=$${SWELL_CRASH_SEEDS:-5} $(PY) -m pytest tests/property/test_crash_recovery.py

# the differential SQL fuzzer for longer, with a fresh seed each run (printed on failure)
fuzz:
	SWELL_FUZZ_SECONDS=$${SWELL_FUZZ_SECONDS:-600} SWELL_FUZZ_SEED=$${SWELL_FUZZ_SEED:-$$(date +%s)} \
		$(PY) -m pytest tests/fuzz -q -s

# every benchmark, short sizes (ARGS=--full for full sizes, ARGS="--only copy --profile")
bench:
	$(PY) bench/run.py $(ARGS)

planner-update:
	@if [ -d tests/planner ]; then $(PY) -m pytest tests/planner --update; \
	else echo "no planner snapshot tests yet (expected tests/planner/)"; exit 1; fi
