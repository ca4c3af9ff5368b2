# ctda developer entry points. Everything installs into .venv; nothing global is touched.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DEV_STAMP := $(VENV)/.dev-installed
RUN_STAMP := $(VENV)/.run-installed
NATIVE_STAMP := $(VENV)/.native-installed
# the Rust toolchain for the native reader (rustup puts it in ~/.cargo/bin, often not on PATH)
CARGO ?= $(shell command -v cargo 2>/dev/null || ls $(HOME)/.cargo/bin/cargo 2>/dev/null)
DEMO_TRACE ?= tests/data/hta/rocm62_mi250_minitoy_train.json.gz
DEMO_DB    ?= .demo/store
PYTEST_ARGS ?=
# The tiers (tests/conftest.py marks every test): the fast one needs no server, browser,
# corpus or download; test-all needs all three and fails, rather than skips, without them.
FAST_TIER := not neo4j and not browser and not corpus and not slow
WORKERS   ?= auto
# numba's compiled functions, kept between runs (and cacheable by CI) instead of beside the code
export NUMBA_CACHE_DIR ?= $(CURDIR)/.cache/numba

.PHONY: demo test test-all lint bench hta-breakdowns clean help

help:
	@echo "make demo     - create .venv, install ctda, analyse a small example trace"
	@echo "make test     - the fast tier: no Neo4j, browser, corpus or download (~3 min on 2 cores)"
	@echo "make test-all - every test; needs Java 17 + Maven, Chromium and the trace corpus"
	@echo "make lint     - ruff and mypy"
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

# The native reader (native/, Rust): built when cargo is found. Without it ctda reads traces
# with its pure-Python reader (about 3x the CPU time); `ctda --version` says which is in use.
$(NATIVE_STAMP): native/pyproject.toml native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs) | $(PY)
ifneq ($(CARGO),)
	PATH="$(dir $(CARGO)):$$PATH" $(PY) -m pip install -q ./native
	touch $@
else
	@echo "cargo not found: ctda will use its pure-Python reader (README: Install)"
endif

demo: $(RUN_STAMP) $(NATIVE_STAMP)
	$(VENV)/bin/ctda ingest $(DEMO_TRACE) --run demo --db $(DEMO_DB) --force
	$(VENV)/bin/ctda opportunities demo --db $(DEMO_DB) --top 5

test: $(DEV_STAMP) $(NATIVE_STAMP)
	$(PY) -m pytest -m "$(FAST_TIER)" -n $(WORKERS) --dist loadgroup $(PYTEST_ARGS)

# loadgroup (groups set in tests/conftest.py): a module's tests run on one worker, so its
# module-scoped fixtures are computed once, and every Neo4j test on one worker: one server.
test-all: $(DEV_STAMP) $(NATIVE_STAMP)
	CTDA_REQUIRE_NEO4J=1 CTDA_REQUIRE_BROWSER=1 CTDA_REQUIRE_CORPUS=1 CTDA_REQUIRE_NATIVE=1 \
	  $(PY) -m pytest -n $(WORKERS) --dist loadgroup $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check ctda tests bench scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy bench scripts

bench: $(DEV_STAMP) $(NATIVE_STAMP)
	$(PY) -m bench.run

hta-breakdowns: $(DEV_STAMP)
	$(PY) -m bench.hta_reference

clean:
	rm -rf $(VENV) .demo .pytest_cache .mypy_cache .ruff_cache
