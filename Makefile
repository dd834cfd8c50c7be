# Bootstrap .venv once (again whenever pyproject.toml changes), then run the demo or the tests.
#   make demo   -> bench on the bundled scenarios + Gantt SVGs in demo-out/
#   make check  -> the fast tier: no broker, no Docker, nothing slow, a tenth of the property examples (under a minute)
#   make test   -> the pytest suite, every tier
#   make native -> rebuild the compiled heuristic (solvers/native) now
#   make lint   -> ruff (lint and format check), mypy and the layer contracts; settings in pyproject.toml
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.gpualloc-installed
NATIVE := solvers/native
NATIVE_STAMP := $(VENV)/.gpualloc-native-installed

.PHONY: demo check test lint bench native kafka-up kafka-down images up status down clean-venv

$(STAMP): pyproject.toml $(NATIVE_STAMP)
	$(VENV)/bin/pip install -e '.[dev]'
	touch $(STAMP)

# The compiled heuristic (solvers/native: Rust, PyO3, built by maturin), rebuilt only when its
# sources change. Without a Rust toolchain it is left out and the heuristic runs in Python (the
# same plans, slower); `make native` says why it failed.
$(NATIVE_STAMP): $(NATIVE)/Cargo.toml $(NATIVE)/Cargo.lock $(NATIVE)/pyproject.toml $(wildcard $(NATIVE)/src/*.rs)
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	if command -v cargo >/dev/null 2>&1; then \
	  $(VENV)/bin/pip install $(NATIVE); \
	else \
	  echo "make: no Rust toolchain (cargo): the heuristic runs in Python" >&2; \
	fi
	touch $(NATIVE_STAMP)

native:
	rm -f $(NATIVE_STAMP)
	$(MAKE) $(NATIVE_STAMP)

demo: $(STAMP)
	$(VENV)/bin/gpualloc demo

check: $(STAMP)
	$(VENV)/bin/python -m pytest -m "not kafka and not docker and not slow" --hypothesis-profile=check

test: $(STAMP)
	$(VENV)/bin/python -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	mkdir -p build/mypy && ln -sfn ../.. build/mypy/gpualloc  # mypy sees the repository root as the package gpualloc
	$(VENV)/bin/mypy
	PYTHONPATH=build/mypy $(VENV)/bin/lint-imports

bench: $(STAMP)
	$(VENV)/bin/gpualloc bench

# A local single-node Kafka broker (no Docker; Java 17 + Maven), on 127.0.0.1:$KAFKA_PORT (9092).
# The Kafka tests use it through KAFKA_BOOTSTRAP_SERVERS, or start their own: see deploy/kafka/.
kafka-up:
	bash deploy/kafka/kafka.sh up

kafka-down:
	bash deploy/kafka/kafka.sh down

# Containers (deploy/docker-compose.yml) with images built here: a Docker engine must run.
LOCAL_IMAGES := KAFKA_IMAGE=gpualloc-local/kafka:4.1.2 GPUALLOC_IMAGE=gpualloc:latest
COMPOSE := $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

images:
	bash deploy/docker/build-images.sh

up:
	$(LOCAL_IMAGES) $(COMPOSE) -p gpualloc -f deploy/docker-compose.yml up -d --no-build

status:
	$(LOCAL_IMAGES) $(COMPOSE) -p gpualloc -f deploy/docker-compose.yml exec -T agent gpualloc status

down:
	$(LOCAL_IMAGES) $(COMPOSE) -p gpualloc -f deploy/docker-compose.yml down -v

clean-venv:
	rm -rf $(VENV)
