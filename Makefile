# Workbench: `make run` serves the embedded profile, `make test` runs the whole suite.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
# The built docs site (make docs), served at /docs/.
DOCS_SITE := workbench/docs_site/index.html
# PostgreSQL and Redis: the machine's own (127.0.0.1:5432 and :6379) when they answer, else servers
# that scripts/services.py provisions under var/services/ on free ports and stops afterwards. It
# hands the command PG_URL, REDIS_TEST_URL & co. (WORKBENCH_SERVICES=self forces the fallback).
WITH_SERVICES := $(PY) scripts/services.py run --

# Let Python cache compiled bytecode even where the shell disables it: without the caches every
# manage.py start compiles the project's sources again (about 0.3 s).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup docs run test test-lanes test-sqlite test-postgres test-browser lint bench bench-peers services services-down chromium clean

# Idempotent: (re)installs only when the packaging or the C canonicalizer changed since the
# last install. The editable install compiles runs/protocol/_jcs.c in place (optional: without
# a C compiler the pure-Python path is used; `make test` insists on it, see lint).
setup: $(VENV)/.installed $(DOCS_SITE)

$(VENV)/.installed: pyproject.toml constraints.txt setup.py runs/protocol/_jcs.c sdk/python/pyproject.toml
	@test -x $(PY) || $$(scripts/find_python.sh) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	$(PY) -m pip install -q -c constraints.txt -e ./sdk/python
	@touch $@

# The docs site (mkdocs.yml, pages in docs/) into workbench/docs_site/, which the server serves at
# /docs/ (`make setup` rebuilds it when a page changed). --strict: any broken link or anchor, or a
# page missing from the nav, fails the build.
$(DOCS_SITE): $(VENV)/.installed mkdocs.yml scripts/mkdocs_csp.py $(shell find docs -type f 2>/dev/null)
	$(MAKE) --no-print-directory docs

docs:
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# `make run HOST=0.0.0.0 PORT=8123`: the embedded profile with DEBUG on (local development only),
# through the `workbench` command (workbench/cli.py): serve = daphne + one task worker.
HOST ?= 127.0.0.1
PORT ?= 8000
URL_HOST = $(if $(filter 0.0.0.0 ::,$(HOST)),127.0.0.1,$(if $(findstring :,$(HOST)),[$(HOST)],$(HOST)))
RUN_ENV = DEBUG=$${DEBUG:-1} ALLOWED_HOSTS=$${ALLOWED_HOSTS:-127.0.0.1,localhost,[::1],$(HOST)}
# Each stage says when it starts and how long it took (bash's EPOCHREALTIME, in microseconds).
run:
	@set -e; t0=$${EPOCHREALTIME/./}; \
	secs() { echo "$$(( $$1 / 1000000 )).$$(( $$1 / 100000 % 10 )) s"; }; \
	stage() { s=$${EPOCHREALTIME/./}; echo "==> $$1 ..."; shift; "$$@"; e=$${EPOCHREALTIME/./}; \
	  echo "==> done in $$(secs $$(( e - s ))) ($$(secs $$(( e - t0 ))) since make run started)"; }; \
	stage "1/4 install (make setup; only when the packaging changed)" $(MAKE) --no-print-directory setup; \
	stage "2/4 migrate the database" env $(RUN_ENV) $(BIN)/workbench migrate --noinput; \
	stage "3/4 demo data" env $(RUN_ENV) $(BIN)/workbench demo --url http://$(URL_HOST):$(PORT)/; \
	echo "==> 4/4 serving http://$(URL_HOST):$(PORT)/ (Ctrl-C stops it), $$(secs $$(( $${EPOCHREALTIME/./} - t0 ))) after make run started"; \
	env $(RUN_ENV) $(BIN)/workbench serve --host $(HOST) --port $(PORT)

# mypy --strict on the pure packages and the host SDK (config: pyproject.toml [tool.mypy]; the
# Django side with django-stubs at mypy's default strictness, config mypy-django.ini).
# radon: no block of cyclomatic complexity E (31+) or worse, apart from the deliberate hot path in
# runs/protocol/canonical.py; the line fails listing the blocks that are.
lint: setup
	$(PY) -c "import runs.protocol._jcs" || { echo "runs/protocol/_jcs.c was not built (gcc, libssl-dev?)"; exit 1; }
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy --strict runs/protocol runs/engine runs/presenters runs/providers review/agreement.py review/rules.py judges/stats.py sdk/python/workbench_sdk
	DATABASE_URL=sqlite:///var/check.sqlite3 $(BIN)/mypy --config-file mypy-django.ini runs playground accounts workbench evals review judges
	set -o pipefail; $(BIN)/radon cc -n E -s runs playground evals review judges accounts workbench --exclude "runs/protocol/canonical.py,*/migrations/*,*/vendored_migrations/*" | (! grep .)
	DATABASE_URL=sqlite:///var/check.sqlite3 $(PY) manage.py makemigrations --check --dry-run
	DATABASE_URL=sqlite:///var/check.sqlite3 $(PY) manage.py check --fail-level WARNING
	$(MAKE) --no-print-directory docs

services: setup
	@$(PY) scripts/services.py up

services-down: setup
	@$(PY) scripts/services.py down

# The suite runs on TEST_WORKERS processes (pytest-xdist; default: the machine's cores, at most 4).
# Each worker has its own test database (pytest-django suffixes its name with the worker's id);
# worksteal keeps both busy to the end although the slow files (daphne, kill -9) are uneven.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
XDIST = -n $(TEST_WORKERS) --dist worksteal

# Which tests run where (markers set by what a test does: tests/conftest.py, tests/markers.py):
# - test-sqlite runs every test but the browser ones on SQLite (the embedded profile's database).
# - test-postgres runs on PostgreSQL only the tests whose behaviour differs by database (marker
#   db_differs): SQL written per vendor (append statements, rollups, search and keyset paths,
#   query plans, JSON fields, NUL bytes, bulk imports, retention), row locks and SKIP LOCKED claims
#   (OTLP queue, import jobs, outbox, review queues, forks, datasets, tokens, invitations) under
#   concurrent writers, connection pools and replicas; and any test module naming PostgreSQL or a
#   vendor. The table with each reason is DB_DIFFERS in tests/markers.py: a test of new SQL or of
#   locking goes there (or names the vendor), so that it keeps running on both databases.
# - slow marks tests that start a process, themselves or through a fixture (found by reading their
#   code): `pytest -m "not slow and not browser"` is the inner loop; make test runs them all.
# SQLITE_PART=a / b: the part of the SQLite suite of make test's first / second lane (tests/lanes.py).
# Each run leaves a junit report in var/test-logs/: `scripts/test_durations.py` makes tests/durations.json
# (which splits the lanes) from test-sqlite-a.xml and test-sqlite-b.xml, or test-sqlite.xml.
SQLITE_PART ?=
SQLITE_DB ?=
SQLITE_MARKS = $(if $(filter a,$(SQLITE_PART)),not browser and not lane2,$(if $(filter b,$(SQLITE_PART)),lane2 and not browser,not browser))
test-sqlite: setup
	DATABASE_URL=$(SQLITE_DB) $(BIN)/pytest -m "$(SQLITE_MARKS)" -p no:randomly $(XDIST) \
	  --junitxml=var/test-logs/test-sqlite$(if $(SQLITE_PART),-$(SQLITE_PART)).xml \
	  || { rc=$$?; [ "$(SQLITE_PART)" = b ] && [ $$rc = 5 ] && echo "(no file of the second lane yet)"; }

test-postgres: setup
	$(WITH_SERVICES) sh -c 'DATABASE_URL="$$PG_URL" $(BIN)/pytest -m "db_differs and not browser" $(XDIST)'

chromium:
	@scripts/ensure_chromium.sh

# Browser files build their data once per module (a 10,000-span run, review queues): loadfile keeps
# each file on one worker, so no module fixture is built twice.
BROWSER_DB ?=
test-browser: setup chromium
	DATABASE_URL=$(BROWSER_DB) $(BIN)/pytest -m browser tests/browser -n $(TEST_WORKERS) --dist loadfile

# make test: lint first (a minute; a lint failure stops here), then two lanes at once, because the
# suites wait more than they compute (daphne and worker starts, Chromium, PostgreSQL round trips):
# measured on this 2-core machine, SQLite and PostgreSQL side by side took 19 min each where SQLite
# alone took 17. Lane 1 runs most of test-sqlite (test-sqlite-a); lane 2 runs test-postgres, then
# test-browser, then the rest of the SQLite suite (test-sqlite-b: its slowest files up to a share of
# its time, from tests/durations.json, so that the lanes end together; tests/lanes.py). Each lane's
# lines carry its name; the whole output of each phase is also kept in var/test-logs/<phase>.log.
# Lane 2's SQLite phases use files of their own (var/browser.sqlite3, var/lane2.sqlite3), so their
# test databases never meet lane 1's (both lanes have xdist workers gw0, gw1). Every phase prints its time, and all of them
# at the end (scripts/phase.sh); `make test-lanes SERIAL=1` runs the phases one after another.
test: setup
	@mkdir -p var/test-logs; rm -f var/test-logs/*.log; phases=$(CURDIR)/var/test-phases.txt; : > $$phases; \
	t0=$${EPOCHREALTIME/./}; \
	PHASES_FILE=$$phases scripts/phase.sh lint $(MAKE) --no-print-directory lint || { cat $$phases; exit 1; }; \
	$(MAKE) --no-print-directory test-lanes PHASES_FILE=$$phases; status=$$?; \
	us=$$(( $${EPOCHREALTIME/./} - t0 )); \
	echo "==> make test phases:"; cat $$phases; \
	grep -hE '^(FAILED|ERROR) ' var/test-logs/*.log | sed 's/^/==> /' | head -40; \
	printf '==> make test: %d.%d s in all, %s\n' $$((us / 1000000)) $$((us / 100000 % 10)) \
	  "$$([ $$status = 0 ] && echo ok || echo FAILED)"; exit $$status

SERIAL ?=
test-lanes: setup chromium
	@set -o pipefail; logs=$(CURDIR)/var/test-logs; mkdir -p $$logs; \
	phase() { PHASES_FILE=$(PHASES_FILE) scripts/phase.sh "$$@" 2>&1 | tee $$logs/$$1.log | sed -u "s/^/[$$1] /"; }; \
	if [ -n "$(SERIAL)" ]; then \
	  phase test-sqlite $(MAKE) --no-print-directory test-sqlite && \
	  phase test-postgres $(MAKE) --no-print-directory test-postgres && \
	  phase test-browser $(MAKE) --no-print-directory test-browser BROWSER_DB=sqlite:///var/browser.sqlite3; \
	  exit $$?; \
	fi; \
	phase test-sqlite-a $(MAKE) --no-print-directory test-sqlite SQLITE_PART=a & lane1=$$!; \
	{ phase test-postgres $(MAKE) --no-print-directory test-postgres; s=$$?; \
	  phase test-browser $(MAKE) --no-print-directory test-browser BROWSER_DB=sqlite:///var/browser.sqlite3 || s=1; \
	  phase test-sqlite-b $(MAKE) --no-print-directory test-sqlite SQLITE_PART=b SQLITE_DB=sqlite:///var/lane2.sqlite3 || s=1; exit $$s; } & lane2=$$!; \
	status=0; wait $$lane1 || status=1; wait $$lane2 || status=1; exit $$status

bench: setup
	$(WITH_SERVICES) $(PY) bench/run_all.py

# The peers bench_otlp measures beside us (issue 31): Arize Phoenix in a side virtualenv of its
# own (its dependencies never meet ours). bench_otlp (in `make bench`) measures Phoenix beside us
# whenever var/peers/phoenix exists.
PEERS := var/peers
bench-peers: $(PEERS)/phoenix/.installed
	@$(PEERS)/phoenix/bin/python -c 'import phoenix; print("arize-phoenix", phoenix.__version__, "in $(PEERS)/phoenix")'

$(PEERS)/phoenix/.installed:
	@test -x $(PEERS)/phoenix/bin/python || $$(scripts/find_python.sh) -m venv $(PEERS)/phoenix
	$(PEERS)/phoenix/bin/python -m pip install -q --upgrade pip
	$(PEERS)/phoenix/bin/python -m pip install -q arize-phoenix
	@touch $@

clean:
	rm -rf $(VENV) var
