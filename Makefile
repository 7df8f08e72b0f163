# kafka-sidecar: two commands on a fresh machine.
#   make run    create .venv if missing, install, serve on localhost:9092 with data in ./data
#               (elsewhere: make run LISTEN=localhost:19092 DATA_DIR=/tmp/ks-data)
#   make test   create/update .venv with dev dependencies and test tools, run the whole suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
DATA_DIR ?= ./data
LISTEN ?= localhost:9092

.PHONY: run install dev tools reference reference-if-needed test test-fast lint bench conformance conformance-compose crash-test crash-test-cluster fuzz fuzz-long soak soak-mixed outside outside-franz outside-librdkafka clean

# The reference Apache Kafka (broker, tools, Streams, Connect) that tests and benchmarks compare
# with, assembled from Maven Central into .cache/kafka-$(REFERENCE_KAFKA_VERSION) (needs Java 17+;
# Maven is installed from Debian when missing). KAFKA_HOME or KAFKA_REFERENCE_BOOTSTRAP use
# another one instead. (Not a KAFKA_* name: the server reads KAFKA_* variables as configs.)
REFERENCE_KAFKA_VERSION ?= $(shell cat tests/reference/kafka-version)
export REFERENCE_KAFKA_VERSION

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PIP) install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

dev: $(VENV)/.installed-dev

run: install
	$(VENV)/bin/kafka-sidecar serve --data-dir $(DATA_DIR) --listen $(LISTEN)

# Test tools that are not Python packages: kcat (Debian) and kafkajs (npm).
tools:
	./tests/tools/install-tools.sh

reference:
	./tests/reference/install-maven.sh
	./tests/reference/assemble.sh $(REFERENCE_KAFKA_VERSION)

# `make test` assembles the reference unless one is configured.
reference-if-needed:
	@if [ -z "$$KAFKA_HOME$$KAFKA_REFERENCE_BOOTSTRAP" ]; then $(MAKE) --no-print-directory reference; fi

test: dev tools reference-if-needed
	$(PY) -m pytest -q

test-fast: dev
	$(PY) -m pytest -q tests/unit

lint: dev
	$(VENV)/bin/ruff check .

bench: dev reference-if-needed
	$(PY) -m bench.run

# The conformance suite (tests/conformance, also part of `make test`): each scenario against
# kafka-sidecar and a reference Apache Kafka, compared. The reference is KAFKA_REFERENCE_BOOTSTRAP,
# else KAFKA_HOME, else the one `make reference` assembles, else testcontainers; SIDECAR_BOOTSTRAP
# points the other half at a running kafka-sidecar. Here a missing reference is an error, not a skip.
conformance: dev reference-if-needed
	CONFORMANCE_REQUIRE_REFERENCE=1 $(PY) -m pytest -q tests/conformance

# The same against the two brokers of compose/docker-compose.yml (needs Docker).
COMPOSE ?= docker compose
COMPOSE_FILE := compose/docker-compose.yml
conformance-compose: dev
	$(COMPOSE) -f $(COMPOSE_FILE) up -d --build --wait
	KAFKA_REFERENCE_BOOTSTRAP=127.0.0.1:$${KAFKA_PORT:-19092} SIDECAR_BOOTSTRAP=127.0.0.1:$${SIDECAR_PORT:-29092} \
		CONFORMANCE_REQUIRE_REFERENCE=1 $(PY) -m pytest -q tests/conformance; \
		status=$$?; $(COMPOSE) -f $(COMPOSE_FILE) down -v; exit $$status

# Reliability (README "Reliability"): each runs long, outside `make test` (which runs short versions).
# kill -9 at random points and at crash points inside storage, restart, check every acknowledged record.
# CRASH_JOBS=K runs K independent harnesses at once (tests/crash/parallel.py), the iterations split.
CRASH_ITERATIONS ?= 300
CRASH_SEED ?= 1
CRASH_JOBS ?= 1
crash-test: dev
	$(PY) -m tests.crash.parallel --jobs $(CRASH_JOBS) --iterations $(CRASH_ITERATIONS) --seed $(CRASH_SEED)

# The same over `serve --processes 2`: kill -9 one node or the whole group, with transactions and
# offset commits spanning both nodes (tests/crash/cluster_harness.py).
crash-test-cluster: dev
	$(PY) -m tests.crash.parallel --harness cluster_harness --jobs $(CRASH_JOBS) --iterations $(CRASH_ITERATIONS) --seed $(CRASH_SEED)

# Fuzz the request path: hypothesis (in-process and over TCP, random each run), the schema-valid
# requests of every advertised API and version (SCHEMA_RANDOM drawn ones each), then atheris,
# coverage-guided, for FUZZ_SECONDS (installed on demand; without it, random mutation instead).
FUZZ_EXAMPLES ?= 20000
FUZZ_SECONDS ?= 600
SCHEMA_RANDOM ?= 60
fuzz: dev
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_RANDOM=1 SCHEMA_RANDOM=$(SCHEMA_RANDOM) $(PY) -m pytest -q -p no:cacheprovider -o timeout=0 \
		tests/integration/test_fuzz.py tests/integration/test_schema_requests.py
	if $(PIP) install --quiet 'atheris>=2.3'; then \
		$(PY) -m tests.fuzz.fuzz_long -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=2048 -artifact_prefix=./fuzz-; \
	else \
		$(PY) -m tests.fuzz.fuzz_requests --no-atheris --runs $(FUZZ_EXAMPLES); \
	fi

# Coverage-guided fuzzing (atheris, libFuzzer) of the request path for FUZZ_LONG_SECONDS: raw frames
# and schema-valid requests into dispatch on a real in-process broker, seeded from tests/fuzz/corpus
# and tests/fuzz/crashes; the corpus grows in fuzz-artifacts/corpus, a crash is written to
# fuzz-artifacts/ (copy it to tests/fuzz/crashes/ once fixed: `make test` replays them).
FUZZ_LONG_SECONDS ?= 3600
fuzz-long: dev
	$(PIP) install --quiet 'atheris>=2.3'
	mkdir -p fuzz-artifacts/corpus
	$(PY) -c 'from pathlib import Path; from tests.fuzz.fuzz_requests import seed_corpus; seed_corpus(Path("fuzz-artifacts/corpus"))'
	$(PY) -m tests.fuzz.fuzz_long -max_total_time=$(FUZZ_LONG_SECONDS) -timeout=30 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix=fuzz-artifacts/ fuzz-artifacts/corpus 2>&1 | tee fuzz-artifacts/last-run.log

# Producers and consumers on loopback for SOAK_SECONDS: no error, memory flat, every record accounted for.
# (soak: 600 s by default; soak-mixed: 3600 s.)
SOAK_SECONDS ?= $(if $(filter soak-mixed,$(MAKECMDGOALS)),3600,600)
soak: dev
	$(PY) -m tests.soak.soak --seconds $(SOAK_SECONDS)

# Outside client suites (README "Outside suites", tests/outside/README.md): franz-go's kgo integration
# tests (module zip from the Go module proxy) and librdkafka's test harness (Debian's source package),
# each test against kafka-sidecar and the reference Kafka, side by side. Long; not in `make test`.
# OUTSIDE_ARGS passes more options, e.g. OUTSIDE_ARGS="--broker ours --tests TestGroupETL".
OUTSIDE_ARGS ?=
outside: dev reference-if-needed
	$(PY) -m tests.outside.run --suite all $(OUTSIDE_ARGS)

outside-franz: dev reference-if-needed
	$(PY) -m tests.outside.run --suite franz $(OUTSIDE_ARGS)

outside-librdkafka: dev reference-if-needed
	$(PY) -m tests.outside.run --suite librdkafka $(OUTSIDE_ARGS)

# Every client kind at once for SOAK_SECONDS (tests/soak/mixed.py): librdkafka, kafka-python, aiokafka and
# Kafka's Java clients (classic and KIP-848 consumers, a share consumer, the transactional copier),
# with topic churn, DeleteRecords, retention and compaction; needs Java and the reference's tools.
soak-mixed: dev reference-if-needed
	$(PY) -m tests.soak.mixed --seconds $(SOAK_SECONDS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
