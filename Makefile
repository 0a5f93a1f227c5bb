# The two commands of the README: `make run` (serve on the embedded SQLite default) and
# `make test` (the whole suite on a real Postgres). Both set themselves up on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench docs docs-serve install pg npm clean

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

# Real MCP servers from npm some tests run (tests/npm/package.json); needs Node.js and npm.
NPM_STAMP := tests/npm/node_modules/.package-lock.json
$(NPM_STAMP): tests/npm/package.json tests/npm/package-lock.json
	npm ci --prefix tests/npm --no-audit --no-fund
npm: $(NPM_STAMP)

test: $(STAMP) pg npm
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP) pg
	$(BIN)/python -m bench

# The manual (docs/) as a static site in site/; --strict fails on a broken link or an unlisted page.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8001

clean:
	rm -rf $(VENV) .quiver .pytest_cache .mypy_cache .ruff_cache site
