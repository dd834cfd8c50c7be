# Bootstrap .venv once (again whenever pyproject.toml changes), then run the demo or the tests.
#   make demo   -> bench on the bundled scenarios + Gantt SVGs in demo-out/
#   make test   -> the pytest suite
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.gpualloc-installed

.PHONY: demo test bench clean-venv

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

# Later issues: Kafka integration tests (testcontainers) and the CBC/HiGHS MILP checks get
# their own targets here, e.g. `test-kafka` and `test-milp`, so `make test` stays fast.

clean-venv:
	rm -rf $(VENV)
