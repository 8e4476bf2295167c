# Two commands do all set-up: `make run` and `make test` (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# Playwright drives Debian's chromium (tests/browser): never download a browser of its own
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1

.PHONY: run test lint typecheck unit system-deps bench clean mutation

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	@touch $(STAMP)

# Debian packages the tests drive for real (rpm to build RPM databases, skopeo/umoci to
# cross-check image formats, docker-registry for registry tests, chromium for the dashboard's
# browser tests). Installed only when missing.
system-deps:
	@bash scripts/system-deps.sh

run: $(STAMP)
	@bash scripts/run.sh

lint: $(STAMP)
	$(BIN)/ruff check gpuprov scanner app tests bench
	$(BIN)/ruff format --check gpuprov scanner app tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) system-deps
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck unit

# Mutation testing of the verification, integrity, containment and token-binding modules
# (docs/mutation.md); separate from `make test`, never a CI gate. MODULES="tlog dsse" for some.
MODULES ?=
mutation: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,mutation]'
	$(BIN)/python scripts/mutation.py $(MODULES)

bench: $(STAMP)
	$(BIN)/python bench/scan.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .mutation
