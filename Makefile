# deid -- the two commands a user needs are `make demo` and `make test`.
# Everything else is installed by this Makefile (scripts/install-deps.sh for
# Debian packages, PGXS for the extension, a venv for the client-side tests).
PG_CONFIG ?= $(firstword $(wildcard /usr/lib/postgresql/15/bin/pg_config) pg_config)
SERVER_PYTHON ?= /usr/bin/python3
VENV := .venv
CLUSTER := sh scripts/cluster.sh
SHARD := sh scripts/shard-cluster.sh
PSQL = psql -X -v ON_ERROR_STOP=1
TEST_DB := deid_test

# The targets share one private cluster and one test database: never run them in parallel.
.NOTPARALLEL:

export PG_BINDIR := $(shell $(PG_CONFIG) --bindir 2>/dev/null)

.PHONY: all deps install start stop url psql demo demo-cluster stop-cluster test typecheck unit integration test-db cluster-test pgtap venv bench bench-distributed bench-eval eval-condensation clean fuzz fuzz-sequences dist pgxn-check

## all: build the extension's SQL scripts, as any user (`pgxn install` runs make, then sudo make install)
all:
	@$(MAKE) -s --no-print-directory -C extension all PG_CONFIG=$(PG_CONFIG) SERVER_PYTHON=$(SERVER_PYTHON)

## deps: Debian packages (root; idempotent)
deps:
	@sh scripts/install-deps.sh

## install: build and install the extension (PGXS; works against any server)
install: deps
	@$(MAKE) -s --no-print-directory -C extension install PG_CONFIG=$(PG_CONFIG) SERVER_PYTHON=$(SERVER_PYTHON)
	@echo "deid installed into $$($(PG_CONFIG) --sharedir)"


## start/stop/url/psql: the private cluster in ./.pgdata
start: install
	@$(CLUSTER) start

stop:
	@$(CLUSTER) stop

url:
	@$(CLUSTER) url

psql: start
	$(PSQL) "$$($(CLUSTER) url)"

## demo: install, start, load a generated sample, print a report; then write each demo
## release's report (deid report: HTML + JSON) into $(DEMO_REPORTS)/ and print their paths
DEMO_REPORTS ?= reports
DEMO_RELEASES := demo_anatomy demo_generalized demo_synthetic demo_dx
demo: start venv
	@$(PSQL) "$$($(CLUSTER) url)" -q -f scripts/demo.sql
	@echo; echo "== 7. The demo releases' reports (deid report; open the .html in a browser) =="
	@for r in $(DEMO_RELEASES); do \
	    $(VENV)/bin/deid report $$r --out $(DEMO_REPORTS) --dbname "$$($(CLUSTER) url)" || exit 1; \
	done

## demo-cluster: a coordinator and 2 nodes (private clusters, DEID_SHARD_PORT and the next two
## ports, data in ./.shard), a sharded sample, each shard-local method run on both nodes at once
demo-cluster: install
	@$(SHARD) start
	@$(SHARD) setup deid_demo 2>&1 | grep -v '^NOTICE' || true
	@$(SHARD) sample deid_demo 20000
	@$(PSQL) "$$($(SHARD) url coord deid_demo)" -f scripts/demo_cluster.sql

stop-cluster:
	@$(SHARD) stop

## venv: the client-side venv: the test requirements and the `deid` command (client/, editable)
$(VENV)/.stamp: tests/requirements.txt tests/requirements-hierarchies.txt client/pyproject.toml
	$(SERVER_PYTHON) -m venv --system-site-packages $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -r tests/requirements-hierarchies.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e client
	touch $@

venv: deps $(VENV)/.stamp

## test: everything CI runs (.ci/run), in this order: typecheck, unit, integration, cluster-test,
## pgtap. pytest.ini's testpaths are the same folders (tests/unit/common/test_layout.py checks it)
test: typecheck unit integration cluster-test pgtap

## typecheck: mypy (a development tool of the venv; the server's Python never imports it),
## strict on the modules mypy.ini lists: the plug-in contract, the pipeline, request/
typecheck: venv
	$(VENV)/bin/mypy

## unit: the pure tests (no server): tests/unit/<method>/, tests/unit/common/, tests/unit/tools/
unit: venv
	$(VENV)/bin/python -m pytest -p no:cacheprovider tests/unit

## integration: a fresh database $(TEST_DB) in the private cluster, then the psycopg suites
## (tests/integration, tests/security, tests/upgrade); one file: see CONTRIBUTING.md
test-db: start venv
	$(PSQL) "$$($(CLUSTER) url postgres)" -q -c "DROP DATABASE IF EXISTS $(TEST_DB) WITH (FORCE)" -c "CREATE DATABASE $(TEST_DB)"

integration: test-db
	DEID_TEST_URL="$$($(CLUSTER) url $(TEST_DB))" \
	    $(VENV)/bin/python -m pytest -p no:cacheprovider tests/integration tests/security tests/upgrade

## cluster-test: a coordinator and 2 nodes of PL/Proxy (./.shard, DEID_SHARD_PORT and the next
## two ports), started and stopped by tests/cluster/conftest.py
cluster-test: install venv
	$(VENV)/bin/python -m pytest -p no:cacheprovider tests/cluster

## pgtap: the SQL surface through pg_prove (tests/pgtap/), on a freshly created extension
pgtap: test-db
	$(PSQL) "$$($(CLUSTER) url $(TEST_DB))" -q -c "SET deid.drop_with_releases = on" -c "DROP EXTENSION IF EXISTS deid CASCADE" -c "CREATE EXTENSION deid CASCADE" -c "CREATE EXTENSION IF NOT EXISTS pgtap"
	pg_prove --ext .sql -r tests/pgtap --dbname "$$($(CLUSTER) url $(TEST_DB))"

## fuzz: FUZZ_N random requests per method against the real server, each success and refusal
## checked by tests/fuzz/checker.py; then FUZZ_SEQUENCES sequences of 2-6 releases of one source
## per method, attacked together by tests/fuzz/check_composition.py (a sequence takes about
## 1.5 s), in chunks of FUZZ_CHUNK per method, each kept (build/fuzz_sequences_<seed>.<start>.json:
## a chunk already there is not run again; delete them to start over); summaries on stdout,
## JSON in FUZZ_OUT and FUZZ_SEQ_OUT
FUZZ_N ?= 10000
FUZZ_SEQUENCES ?= 1000
FUZZ_CHUNK ?= 100
FUZZ_SEQ_OUT ?= build/fuzz_sequences_$(FUZZ_SEED).json
FUZZ_SEED ?= 1
FUZZ_WORKERS ?= 2
FUZZ_OUT ?= build/fuzz_$(FUZZ_SEED).json
fuzz: start venv
	$(PSQL) "$$($(CLUSTER) url postgres)" -q -c "DROP DATABASE IF EXISTS deid_fuzz WITH (FORCE)" -c "CREATE DATABASE deid_fuzz"
	$(VENV)/bin/python -m tests.fuzz.runner --url "$$($(CLUSTER) url deid_fuzz)" --n $(FUZZ_N) \
	    --seed $(FUZZ_SEED) --workers $(FUZZ_WORKERS) --out $(FUZZ_OUT)
	$(VENV)/bin/python -m tests.fuzz.sequences --url "$$($(CLUSTER) url deid_fuzz)" \
	    --n $(FUZZ_SEQUENCES) --chunk $(FUZZ_CHUNK) --seed $(FUZZ_SEED) --out $(FUZZ_SEQ_OUT)

## fuzz-sequences: only the sequences part of fuzz (FUZZ_SEQUENCES per method), at low priority;
## the tallies of the running chunk in its .partial file
fuzz-sequences: start venv
	$(PSQL) "$$($(CLUSTER) url postgres)" -q -c "DROP DATABASE IF EXISTS deid_fuzz WITH (FORCE)" -c "CREATE DATABASE deid_fuzz"
	nice -n 10 $(VENV)/bin/python -m tests.fuzz.sequences --url "$$($(CLUSTER) url deid_fuzz)" \
	    --n $(FUZZ_SEQUENCES) --chunk $(FUZZ_CHUNK) --seed $(FUZZ_SEED) --out $(FUZZ_SEQ_OUT)

## bench: benchmarks (write numbers and PNG plots under bench/results/)
bench: start venv
	$(VENV)/bin/python bench/run_all.py

## bench-distributed: releases over 1, 2 and 4 local nodes (PL/Proxy; coordinator and nodes on
## DEID_SHARD_PORT and the next NODES ports, data in ./.bench_shard), cold and warm, CTAS ratios,
## node peaks, utility against the 1-node release (docs/benchmarks.md); e.g. ROWS=10000000 NODES=2,4
ROWS ?= 1000000
NODES ?= 1,2,4
BENCH_ARGS ?=
bench-distributed: install venv
	$(VENV)/bin/python bench/distributed/bench_distributed.py --rows $(ROWS) --nodes $(NODES) $(BENCH_ARGS)

## bench-eval: the benchmark-only virtualenv (statsmodels, lifelines, scikit-survival, copulas,
## DataSynthesizer, anonymeter) in bench/.venv-eval -- never the server's Python
EVAL_VENV := bench/.venv-eval
$(EVAL_VENV)/.stamp: bench/requirements-eval.txt
	$(SERVER_PYTHON) -m venv $(EVAL_VENV)
	$(EVAL_VENV)/bin/pip install --quiet --disable-pip-version-check -r bench/requirements-eval.txt
	touch $@

bench-eval: $(EVAL_VENV)/.stamp

## eval-condensation: utility + risk of condensation per data set x model beside a bootstrap of
## the original, copulas and DataSynthesizer (004 sec. 3.5, and the k rule beyond it); resumable (cached per
## data set, method, k, seed), at the lowest CPU priority; EVAL_ARGS e.g. --datasets rossi
EVAL_ARGS ?=
eval-condensation: bench-eval
	nice -n 19 $(EVAL_VENV)/bin/python -m bench.eval_condensation.run $(EVAL_ARGS)

## dist: the PGXN distribution deid-<version>.zip of the committed tree (META.json; `pgxn install deid`)
VERSION = $(shell sed -n 's/^EXTVERSION *= *//p' extension/Makefile)
dist:
	git archive --format zip --prefix=deid-$(VERSION)/ -o deid-$(VERSION).zip HEAD

## pgxn-check: `pgxn install` end to end: the `make dist` zip installed by pgxnclient (from PyPI,
## in a throwaway venv under build/) into $(PG_CONFIG)'s server, then CREATE EXTENSION deid in a
## fresh database of the private cluster and one request. PGXN_SUDO: how pgxn elevates for
## `make install` (default env: none, as root or into a server you own; e.g. PGXN_SUDO=sudo)
PGXN_VENV := build/pgxn-venv
PGXN_SUDO ?= env
pgxn-check: dist start
	rm -rf $(PGXN_VENV)
	$(SERVER_PYTHON) -m venv $(PGXN_VENV)
	$(PGXN_VENV)/bin/pip install --quiet --disable-pip-version-check pgxnclient
	cd build && ../$(PGXN_VENV)/bin/pgxn install --unstable --make make --sudo $(PGXN_SUDO) \
	    --pg_config $(PG_CONFIG) ../deid-$(VERSION).zip
	$(PSQL) "$$($(CLUSTER) url postgres)" -q -c "DROP DATABASE IF EXISTS deid_pgxn WITH (FORCE)" -c "CREATE DATABASE deid_pgxn"
	$(PSQL) "$$($(CLUSTER) url deid_pgxn)" -q -f scripts/pgxn_check.sql
	$(PSQL) "$$($(CLUSTER) url postgres)" -q -c "DROP DATABASE deid_pgxn WITH (FORCE)"
	@echo "pgxn-check: deid $(VERSION) installed by pgxn install, created and released"

## clean: stop and delete the private cluster, the sharded ones of the cluster tests and the
## distributed benchmarks (.shard, .bench_shard*), the venv and the built SQL scripts
clean:
	-$(CLUSTER) stop
	if [ -L .pgdata ]; then rm -rf "$$(readlink -f .pgdata)"; fi
	rm -rf .pgdata $(VENV)
	for d in .shard .bench_shard .bench_shard_*; do \
	    if [ -e "$$d" ]; then DEID_SHARD_DIR="$$(pwd)/$$d" $(SHARD) remove || exit 1; fi; \
	done
	$(MAKE) -C extension clean PG_CONFIG=$(PG_CONFIG)
