# Bootstrap .venv once (again whenever pyproject.toml changes), then run the demo or the tests.
#   make demo   -> bench on the bundled scenarios + Gantt SVGs in demo-out/
#   make check  -> the fast tier: no broker, no Docker, nothing slow (well under a minute)
#   make test   -> the pytest suite, every tier
#   make lint   -> ruff (lint and format check), mypy and the layer contracts; settings in pyproject.toml
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.gpualloc-installed

.PHONY: demo check test lint bench kafka-up kafka-down images up status down clean-venv

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/gpualloc demo

check: $(STAMP)
	$(VENV)/bin/python -m pytest -m "not kafka and not docker and not slow"

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
