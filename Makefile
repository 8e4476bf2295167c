# Two commands do all set-up: `make run` and `make test` (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# Playwright drives Debian's chromium (tests/browser): never download a browser of its own
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1

.PHONY: run stop test lint typecheck unit system-deps bench clean mutation lock sbom wheelhouse image-check oidc-provider

# The service's dependencies come at the versions requirements.lock pins (what the image ships),
# given to pip as constraints without their hashes (an editable install cannot be hashed).
$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	sed -e '/--hash=/d' -e 's/ \\$$//' requirements.lock >$(VENV)/constraints.txt
	$(BIN)/python -m pip install -q -c $(VENV)/constraints.txt -e '.[test]'
	@touch $(STAMP)

# Re-resolve the hash-pinned locks (needs the package index; docs/deploy.md#dependency-locks):
# requirements.lock from pyproject's dependencies, requirements-build.lock from its build-system.
UV_COMPILE = $(BIN)/uv pip compile --generate-hashes --python-version 3.11 \
	--python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" -q
lock: $(STAMP)
	$(BIN)/python -m pip install -q 'uv>=0.5'
	$(UV_COMPILE) --no-emit-package gpuprov pyproject.toml -o requirements.lock
	$(BIN)/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")' \
		| $(UV_COMPILE) - -o requirements-build.lock

# The locks' wheels, hash-checked, for this machine: tests/deploy/test_image.py runs the
# Dockerfile's build stage with them (offline, as the tests are).
WHEELHOUSE := build/wheelhouse
wheelhouse: $(WHEELHOUSE)/.complete
$(WHEELHOUSE)/.complete: requirements.lock requirements-build.lock | $(STAMP)
	PIP_CONFIG_FILE=/dev/null $(BIN)/python -m pip download -q --require-hashes --no-deps \
		--only-binary=:all: -r requirements.lock -r requirements-build.lock -d $(WHEELHOUSE)
	@touch $@

# The project's own CycloneDX SBOM (the locked service dependencies), validated: build/gpuprov.cdx.json
SBOM ?= build/gpuprov.cdx.json
sbom: $(STAMP)
	$(BIN)/python scripts/sbom.py -o $(SBOM)

# Debian packages the tests drive for real (rpm to build RPM databases, skopeo/umoci to
# cross-check image formats, docker-registry for registry tests, chromium for the dashboard's
# browser tests). Installed only when missing.
system-deps:
	@bash scripts/system-deps.sh

# The single sign-on tests' OpenID Provider (tests/fixtures/oidc_provider): panva's oidc-provider
# from the npm registry at the versions package-lock.json pins (`npm ci`, no install scripts),
# installed once into build/ and again only when the lock changes.
OIDC_PROVIDER := build/oidc-provider
oidc-provider: $(OIDC_PROVIDER)/.installed
$(OIDC_PROVIDER)/.installed: tests/fixtures/oidc_provider/package.json tests/fixtures/oidc_provider/package-lock.json | system-deps
	mkdir -p $(OIDC_PROVIDER)
	cp tests/fixtures/oidc_provider/package.json tests/fixtures/oidc_provider/package-lock.json $(OIDC_PROVIDER)/
	cd $(OIDC_PROVIDER) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@

run: $(STAMP)
	@bash scripts/run.sh

# Stops the service `make run` left running (the pid it recorded, only if it is that service).
stop:
	@bash scripts/run.sh stop

lint: $(STAMP)
	$(BIN)/ruff check gpuprov scanner app tests bench
	$(BIN)/ruff format --check gpuprov scanner app tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) system-deps wheelhouse oidc-provider
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck unit

# Mutation testing of the code that verifies (signatures, integrity, containment, whiteouts,
# tokens) and of the code that decides (policy, gate, compliance, dashboard sessions, runtime
# findings, the spool); docs/mutation.md. Separate from `make test`, never a CI gate.
# Incremental: only the modules changed since their last figures run. MODULES="tlog dsse" for
# some; MUTATION_ARGS="--shard 2/4", "--budget 60" (minutes) or "--force" for the nightly job.
MODULES ?=
MUTATION_ARGS ?=
# Builds the service image and runs it as deployed; needs a Docker daemon (exit 2 without one).
image-check: $(STAMP)
	$(BIN)/python scripts/image_check.py

mutation: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,mutation]'
	$(BIN)/python scripts/mutation.py $(MUTATION_ARGS) $(MODULES)

bench: $(STAMP)
	$(BIN)/python bench/scan.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .mutation
