# Quick start: `make demo` (set up + run a windowed query on embedded Spark), `make test` (set up + run all tests).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint bench bench-streaming clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/sqlwin run sql_examples/tumble_bids.sql

test: $(STAMP)
	$(BIN)/ruff check sqlwin udtfs tests bench
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=30 tests

lint: $(STAMP)
	$(BIN)/ruff check sqlwin udtfs tests bench

# Nexmark suite (README "Benchmarks"): make bench BENCH_ARGS="--sizes 1M,3M,10M" for scaling
BENCH_ARGS ?= --quick
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# Streaming (README "Benchmarks"): sqlwin streaming tables vs hand-written Spark streaming, replay vs batch,
# then an early/late count trigger; 3 files x 1M rows by default: STREAM_ARGS="--rows 200000 --repeat 1" is quicker
STREAM_ARGS ?=
bench-streaming: $(STAMP)
	$(BIN)/python -m bench.streaming $(STREAM_ARGS)
	$(BIN)/python -m bench.triggers $(STREAM_ARGS)

clean:
	rm -rf $(VENV) spark-warehouse metastore_db derby.log .pytest_cache
