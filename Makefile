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

# Every build-system here requires setuptools>=77 and nothing else: installed in .venv first,
# the four editable installs are built there instead of each in an isolated environment of
# its own (22.7 s -> 16.4 s here).
$(STAMP): pyproject.toml $(foreach dist,$(CONTRIB),$(dist)/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77"
	$(BIN)/python -m pip install --quiet --no-build-isolation -e ".[test]" $(foreach dist,$(CONTRIB),-e $(dist))
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/hookbus demo

# The suite runs on $(WORKERS) pytest-xdist workers: most tests wait (on hooks, servers,
# timeouts), so more workers than cores keeps the CPUs busy; tests that must not share a
# worker's process with others carry an xdist_group mark (--dist loadgroup). Before it:
# - compileall: every test that starts `python -m hookbus` reads bytecode instead of
#   compiling hookbus anew (PYTHONDONTWRITEBYTECODE=1 keeps Python from caching it), about
#   half of its start-up;
# - one collection, beside mypy, writes pytest's cache of the rewritten test modules, which
#   each worker then reads (7 s of CPU each otherwise): pytest writes it only when
#   PYTHONDONTWRITEBYTECODE is not set, hence the empty one there (and there alone).
WORKERS ?= 6
PYTEST_PARALLEL = -n $(WORKERS) --dist loadgroup

test: $(STAMP)
	$(BIN)/python -m compileall -q hookbus plugins $(CONTRIB) tests
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest --collect-only -q >/dev/null & \
	$(BIN)/python -m mypy --strict $(TYPED); typed=$$?; wait; \
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) && exit $$typed

# The reliability and attack suites at full size (their fast parts run in `make test`), with
# their figures.
stress: $(STAMP)
	HOOKBUS_STRESS=1 $(BIN)/python -m pytest tests/stress tests/adversarial -p no:cacheprovider \
	  tests/test_http_serve.py::test_a_client_that_does_not_read_its_answers_is_not_read_from

# Not part of `make test`: it prints measured figures, it asserts nothing.
bench: $(STAMP)
	$(BIN)/python bench/bench.py
	$(BIN)/python bench/policy_bench.py
	@if [ -n "$$CLAUDE_BIN" ]; then $(BIN)/python bench/claude_code_bench.py --runs 15; \
	else echo "bench/claude_code_bench.py (a real Claude Code): skipped; set CLAUDE_BIN, see docs/claude-code.md#what-it-costs-per-call"; fi

typecheck: $(STAMP)
	$(BIN)/python -m mypy --strict $(TYPED)

clean:
	rm -rf $(VENV) build *.egg-info contrib/*/*.egg-info .mypy_cache .pytest_cache
