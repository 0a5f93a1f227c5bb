# The two commands of the README: `make run` (serve on the embedded SQLite default) and
# `make test` (the whole suite on a real Postgres). Both set themselves up on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench install pg clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/quiver serve

pg:
	@bash scripts/ensure-postgres.sh

test: $(STAMP) pg
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP) pg
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .quiver .pytest_cache .mypy_cache .ruff_cache
