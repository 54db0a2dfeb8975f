# `make demo` and `make test` each bootstrap .venv on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The contrib distributions (hookbus-http, hookbus-sqlite, hookbus-otel): installed beside
# hookbus, as a user would pip install them, and tested with it.
CONTRIB := $(wildcard contrib/hookbus-*)
TYPED := hookbus plugins $(foreach dist,$(CONTRIB),$(dist)/$(subst -,_,$(notdir $(dist))))

.PHONY: demo test stress bench typecheck clean

$(STAMP): pyproject.toml $(foreach dist,$(CONTRIB),$(dist)/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]" $(foreach dist,$(CONTRIB),-e $(dist))
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/hookbus demo

# The suite runs on $(WORKERS) pytest-xdist workers: most tests wait (on hooks, servers,
# timeouts), so more workers than cores keeps the CPUs busy; tests that must not share a
# worker's process with others carry an xdist_group mark (--dist loadgroup). compileall first:
# every test that starts `python -m hookbus` then reads bytecode instead of compiling hookbus
# anew (PYTHONDONTWRITEBYTECODE=1 keeps Python from caching it), about half its start-up.
WORKERS ?= 4
PYTEST_PARALLEL = -n $(WORKERS) --dist loadgroup

test: $(STAMP)
	$(BIN)/python -m compileall -q hookbus plugins $(CONTRIB) tests
	$(BIN)/python -m pytest $(PYTEST_PARALLEL)
	$(BIN)/python -m mypy --strict $(TYPED)

# The reliability and attack suites at full size (their fast parts run in `make test`), with
# their figures.
stress: $(STAMP)
	HOOKBUS_STRESS=1 $(BIN)/python -m pytest tests/stress tests/adversarial -p no:cacheprovider

# Not part of `make test`: it prints measured figures, it asserts nothing.
bench: $(STAMP)
	$(BIN)/python bench/bench.py
	@if [ -n "$$CLAUDE_BIN" ]; then $(BIN)/python bench/claude_code_bench.py --runs 15; \
	else echo "bench/claude_code_bench.py (a real Claude Code): skipped; set CLAUDE_BIN, see docs/claude-code.md#what-it-costs-per-call"; fi

typecheck: $(STAMP)
	$(BIN)/python -m mypy --strict $(TYPED)

clean:
	rm -rf $(VENV) build *.egg-info contrib/*/*.egg-info .mypy_cache .pytest_cache
