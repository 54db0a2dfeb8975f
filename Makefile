# `make demo` and `make test` each bootstrap .venv on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test typecheck clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/hookbus demo

test: $(STAMP)
	$(BIN)/python -m pytest
	$(BIN)/python -m mypy --strict hookbus plugins

typecheck: $(STAMP)
	$(BIN)/python -m mypy --strict hookbus plugins

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache
