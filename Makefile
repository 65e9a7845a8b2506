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
# RELIABILITY_ARGS e.g. --docs 1000 --load-minutes 3 --seed 7 --keep-stack; ten times the load:
# RELIABILITY_ARGS="--docs 10000 --kill-rounds 6 --timeout-min 120 --out reliability_10k.json"
# Soak (issue 30): steady mixed load (new documents, updates, deletes, questions on every route)
# for SOAK_MINUTES (default 30) on each profile, sampled every minute (RSS, open files, PostgreSQL
# connections, lag, query p95), failing on growth after warm-up; the distributed one on the
# reliability suite's own stack, the embedded one on `manifold serve --profile embedded` with its
# own data directory and ports. Results: bench/results/soak_{distributed,embedded}.{json,png}.
# `soak-smoke` is the short run CI does so the harness cannot rot (results under /tmp).
SOAK_MINUTES ?= 30
.PHONY: soak soak-smoke
soak: venv
	$(BIN)/python bench/soak.py --minutes $(SOAK_MINUTES)
	$(BIN)/python bench/soak_embedded.py --minutes $(SOAK_MINUTES)

soak-smoke: venv
	$(BIN)/python bench/soak_embedded.py --smoke --minutes 1 --sample-s 15 --warmup-minutes 0.2 --pg-port 15498 --http-port 18098 --out /tmp/soak-smoke/soak_embedded.json
	$(BIN)/python bench/soak.py --smoke --minutes 1.5 --sample-s 15 --warmup-minutes 0.3 --out /tmp/soak-smoke/soak_distributed.json

# The console's screenshots in docs/console/ (README "Operator console"), taken by its real-browser
# test on the running stack (`manifold stack up`).
.PHONY: console-screenshots
console-screenshots: venv
	CONSOLE_SCREENSHOTS=docs/console $(BIN)/python -m pytest -q -p no:cacheprovider \
	  tests/e2e/test_console_browser.py -k photographed

.PHONY: reliability
reliability: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit/test_fuzz_events.py tests/unit/test_fuzz_dlq.py \
	  tests/unit/test_fuzz_plan.py
	$(BIN)/python bench/reliability.py $(RELIABILITY_ARGS)

# The fault suite on the embedded profile (bench/reliability_embedded.py): `manifold serve
# --profile embedded` on its own data directory and ports, kill -9 of the server and PostgreSQL
# restarts while documents flow, updates and deletes amid them; same summary line. E.g.
# RELIABILITY_EMBEDDED_ARGS="--docs 10000 --kill-rounds 4 --pg-restarts 3 --out reliability_embedded_10k.json"
.PHONY: reliability-embedded reliability-smoke
reliability-embedded: venv
	$(BIN)/python bench/reliability_embedded.py $(RELIABILITY_EMBEDDED_ARGS)

# `reliability-smoke` is the short run CI does so both fault suites cannot rot (results under
# /tmp): the embedded one (60 documents, one kill -9, one PostgreSQL restart, about 2 minutes), then
# the distributed one on its own stack (100 documents, one round of kills, each outage, 30 s of load).
reliability-smoke: venv
	$(BIN)/python bench/reliability_embedded.py --docs 60 --allow-small --kill-rounds 1 --pg-restarts 1 --out /tmp/reliability-smoke/embedded.json
	$(BIN)/python bench/reliability.py --docs 100 --kill-rounds 1 --load-minutes 0.5 --allow-small --out /tmp/reliability-smoke/distributed.json
