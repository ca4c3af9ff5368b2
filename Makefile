# ctda developer entry points. Everything installs into .venv; nothing global is touched.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DEV_STAMP := $(VENV)/.dev-installed
RUN_STAMP := $(VENV)/.run-installed
DEMO_TRACE ?= tests/data/hta/rocm62_mi250_minitoy_train.json.gz
DEMO_DB    ?= .demo/store
PYTEST_ARGS ?=

.PHONY: demo test lint bench hta-breakdowns clean help

help:
	@echo "make demo   - create .venv, install ctda, analyse a small example trace"
	@echo "make test   - install dev dependencies and run the whole test suite"
	@echo "make lint   - ruff and mypy"
	@echo "make bench  - speed and memory figures into bench/results/"
	@echo "make hta-breakdowns - regenerate tests/data/hta_breakdowns.json with HTA 0.5.0 (needs the corpus)"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[neo4j,embedded,ui]'
	touch $@

$(DEV_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev,neo4j,embedded,ui]'
	touch $@ $(RUN_STAMP)

demo: $(RUN_STAMP)
	$(VENV)/bin/ctda ingest $(DEMO_TRACE) --run demo --db $(DEMO_DB) --force
	$(VENV)/bin/ctda opportunities demo --db $(DEMO_DB) --top 5

test: $(DEV_STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check ctda tests bench scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy bench scripts

bench: $(DEV_STAMP)
	$(PY) -m bench.run

hta-breakdowns: $(DEV_STAMP)
	$(PY) -m bench.hta_reference

clean:
	rm -rf $(VENV) .demo .pytest_cache .mypy_cache .ruff_cache
