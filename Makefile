# Workbench: `make run` serves the embedded profile, `make test` runs the whole suite.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
PG_URL ?= postgres://postgres@127.0.0.1:5432/workbench
REDIS_TEST_URL ?= redis://127.0.0.1:6379/0

.PHONY: setup run test test-sqlite test-postgres test-browser lint bench services chromium clean

# Idempotent: (re)installs only when the packaging or the C canonicalizer changed since the
# last install. The editable install compiles runs/protocol/_jcs.c in place (optional: without
# a C compiler the pure-Python path is used; `make test` insists on it, see lint).
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt setup.py runs/protocol/_jcs.c
	@test -x $(PY) || $$(scripts/find_python.sh) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	@touch $@

run: setup
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo_data
	$(BIN)/daphne -b 127.0.0.1 -p 8000 workbench.asgi:application

lint: setup
	$(PY) -c "import runs.protocol._jcs" || { echo "runs/protocol/_jcs.c was not built (gcc, libssl-dev?)"; exit 1; }
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	DATABASE_URL=sqlite:///var/check.sqlite3 $(PY) manage.py makemigrations --check --dry-run

services:
	@scripts/ensure_services.sh

test-sqlite: setup
	DATABASE_URL= $(BIN)/pytest -m "not browser" -p no:randomly

test-postgres: setup services
	DATABASE_URL=$(PG_URL) REDIS_TEST_URL=$(REDIS_TEST_URL) $(BIN)/pytest -m "not browser"

chromium:
	@scripts/ensure_chromium.sh

test-browser: setup chromium
	DATABASE_URL= $(BIN)/pytest -m browser tests/browser

test: setup services lint test-sqlite test-postgres test-browser

bench: setup services
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) var
