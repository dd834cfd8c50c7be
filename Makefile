# Bootstrap .venv once (again whenever pyproject.toml changes), then run the demo or the tests.
#   make demo   -> bench on the bundled scenarios + Gantt SVGs in demo-out/
#   make test   -> the pytest suite
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.gpualloc-installed

.PHONY: demo test bench kafka-up kafka-down clean-venv

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/gpualloc demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest

bench: $(STAMP)
	$(VENV)/bin/gpualloc bench

# A local single-node Kafka broker (no Docker; Java 17 + Maven), on 127.0.0.1:$KAFKA_PORT (9092).
# The Kafka tests use it through KAFKA_BOOTSTRAP_SERVERS, or start their own: see deploy/kafka/.
kafka-up:
	bash deploy/kafka/kafka.sh up

kafka-down:
	bash deploy/kafka/kafka.sh down

clean-venv:
	rm -rf $(VENV)
