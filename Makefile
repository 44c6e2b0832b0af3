# Two commands work on a fresh machine: `make demo` and `make test`. Both set up what they need.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check setup services serve clean

$(STAMP): pyproject.toml setup.py runner/sandboxes/_clone_into_cgroup.c
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is needed (Python 3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

## Runs the examples with nothing configured (SQLite, no servers) and shows where to look.
demo: $(STAMP)
	@bash examples/demo.sh

## Serves the dashboard on http://127.0.0.1:8000 (the demo's results included).
serve: $(STAMP)
	PROCTOR_HOME="$(CURDIR)/.proctor/demo" $(BIN)/proctor serve

## Installs what the tests need (browser, services), then runs every test.
test: $(STAMP)
	@bash tests/setup/prepare.sh
	@bash tests/setup/run.sh $(ARGS)

check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy proctor evals_app runner dashboard
	$(BIN)/lint-imports --no-cache

clean:
	rm -rf $(VENV) .proctor examples/.proctor test-artifacts
