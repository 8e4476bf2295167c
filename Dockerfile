# syntax=docker/dockerfile:1
# gpuprov's image: the API (default command), the migration (`db upgrade`) and the agent
# (`agent --root /host`) all run it. Two stages: `build` makes gpuprov's wheel and installs it
# with the hash-pinned dependencies into a virtualenv; the final stage is the slim base with that
# virtualenv, no compiler, no pip of its own, running as uid 10001.
#   docker build -t gpuprov:local .          (docs/deploy.md; tests/deploy/test_image.py checks it)
#
# The base: python:3.11-slim-bookworm (CPython 3.11.16, Debian 12), pinned to its multi-platform
# index digest; another base of the same Python minor (a mirror, a newer digest) with
# `--build-arg PYTHON_IMAGE=...`.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Wheels only, every file checked against the locks' hashes: nothing is compiled, nothing unpinned
# comes in (the build backend included: the wheel is built without build isolation).
COPY requirements-build.lock requirements.lock ./
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes --only-binary=:all: -r requirements-build.lock
COPY pyproject.toml setup.py MANIFEST.in README.md alembic.ini ./
COPY gpuprov gpuprov
COPY scanner scanner
COPY app app
COPY migrations migrations
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --no-index --wheel-dir /wheels . \
 && python -m venv --without-pip /opt/gpuprov \
 && /opt/build/bin/pip --python /opt/gpuprov/bin/python install --require-hashes --only-binary=:all: --no-deps -r requirements.lock \
 && /opt/build/bin/pip --python /opt/gpuprov/bin/python install --no-deps --no-index /wheels/gpuprov-*.whl \
 && /opt/gpuprov/bin/gpuprov --version

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="gpuprov" \
      org.opencontainers.image.description="Supply-chain provenance and inventory for GPU libraries" \
      org.opencontainers.image.licenses="Apache-2.0"
# HOME holds the agent's spool and cache; deployments mount volumes there (read-only root file
# system everywhere else).
RUN groupadd --system --gid 10001 gpuprov \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/gpuprov --create-home \
      --shell /usr/sbin/nologin gpuprov
COPY --from=build /opt/gpuprov /opt/gpuprov
ENV PATH=/opt/gpuprov/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/var/lib/gpuprov \
    XDG_CACHE_HOME=/var/lib/gpuprov/cache \
    GPUPROV_SPOOL=/var/lib/gpuprov/spool
WORKDIR /var/lib/gpuprov
USER 10001:10001
EXPOSE 8000
# Ready: the database answers and its schema is current (/readyz, 503 otherwise). The agent and the
# migration, which serve nothing, turn this off (docker-compose.yml).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/readyz', timeout=4)"]
ENTRYPOINT ["gpuprov"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "2"]
