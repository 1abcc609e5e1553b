# The two commands a new user needs (see README.md):
#   make demo   installs noetlc (its wheel) into .venv, checks and runs an example playbook
#   make test   installs the dev extras and runs ruff, lint-imports, mypy and the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck pytest install install-dev bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# `install` (and so `demo`) installs the package as a user gets it, built into a wheel, not an
# editable link to the source tree: a file the wheel lacks shows here. `install-dev` is
# editable, for working on the code.
install: $(BIN)/python
	$(BIN)/python -m pip install --quiet .

install-dev: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'

demo: install
	$(BIN)/noetlc check examples/hello.yaml
	$(BIN)/noetl-vm run examples/hello.yaml
	@echo
	@echo "Next: put noetlc and noetl-vm on your PATH (this shell only), then try them:"
	@echo "  source $(abspath $(VENV))/bin/activate"
	@echo "  noetl-vm status                       # the executions recorded in .noetl/noetl.db"
	@echo "  noetl-vm run examples/loop.yaml       # more examples in examples/"

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/lint_imports.py

typecheck:
	$(BIN)/python scripts/typecheck.py

pytest:
	$(BIN)/python -m pytest -q

test: install-dev lint typecheck pytest

bench: install-dev
	$(BIN)/python -m bench --quick
