# manifold: the README's two commands are `make quickstart` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv quickstart test test-unit stack-up stack-down stack-status clean-stack

venv: $(STAMP)

# Exact, locked install (see README "Install size"): --no-deps so that nothing outside the lock
# (such as torch's GPU-only triton) is pulled in.
$(STAMP): deploy/python/requirements.lock pyproject.toml deploy/python/en_core_web_sm/pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-deps -r deploy/python/requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation ./deploy/python/en_core_web_sm
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# The embedded profile end to end: starts PostgreSQL in .manifold/ (MANIFOLD_EMBEDDED__DIR), ingests the
# sample world in-process, answers one question of every class and exits non-zero if any answer is wrong.
# QUICKSTART_ARGS=--reset starts clean.
quickstart: venv
	$(BIN)/manifold quickstart $(QUICKSTART_ARGS)

stack-up: venv
	$(BIN)/manifold stack up

stack-down: venv
	$(BIN)/manifold stack down

stack-status: venv
	$(BIN)/manifold stack status

test-unit: venv
	$(BIN)/python -m pytest -m "unit or contract" -q

# Static checks, no services: ruff (pycodestyle, pyflakes, bugbear, import order) and mypy (strict;
# settings in pyproject.toml). .ci/run runs this before the tests.
.PHONY: lint typecheck
lint: venv
	$(BIN)/ruff check .
	PYTHON=$(BIN)/python .ci/typecheck

typecheck: venv
	PYTHON=$(BIN)/python .ci/typecheck

# Starts the whole stack, shows it, runs every test, and always stops the stack again.
test: venv
	@set -o pipefail; \
	  $(BIN)/manifold stack up || { $(BIN)/manifold stack down; exit 1; }; \
	  CI=$${CI:-} $(BIN)/python -m pytest; rc=$$?; \
	  $(BIN)/manifold stack down; \
	  exit $$rc

# Re-runs the evaluations on the local stack (golden set, BEIR SciFact: stack up and migrated) and
# regenerates BENCHMARKS.md from bench/results/*.json.
.PHONY: bench
bench: venv
	$(BIN)/manifold eval all

# Faults, hostile input and load on the suite's OWN stack (/tmp/relstack, ports 31433/31092/31200/
# 31687; never the dev or CI stack), then verification from the stores; ends with
# `documents N, published N, duplicates 0, lost 0, leaks 0, drift 0`. See SECURITY.md.
# RELIABILITY_ARGS e.g. --docs 1000 --load-minutes 3 --seed 7 --keep-stack
.PHONY: reliability
reliability: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit/test_fuzz_events.py tests/unit/test_fuzz_dlq.py \
	  tests/unit/test_fuzz_plan.py
	$(BIN)/python bench/reliability.py $(RELIABILITY_ARGS)
