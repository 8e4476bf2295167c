#!/usr/bin/env bash
# Installs the Debian packages the test suite runs for real, only those that are missing.
set -euo pipefail
need=()
command -v rpmbuild >/dev/null 2>&1 || need+=(rpm)
command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
command -v umoci >/dev/null 2>&1 || need+=(umoci)
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# tests/deploy/test_compose.py: a Compose implementation checks docker-compose.yml (no daemon)
docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
# the dashboard's browser tests drive Debian's chromium headless (Playwright, no browser download)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v ctr >/dev/null 2>&1 || need+=(containerd)
# the single sign-on tests run a real OpenID Provider (npm oidc-provider) under node
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: missing ${need[*]}; install them with your package manager (needs root)" >&2
  exit 1
fi
echo "system-deps: installing ${need[*]}" >&2
# another apt (unattended upgrades, a parallel set-up) may hold the dpkg lock: wait for it
# rather than fail the whole run
lock_wait=(-o DPkg::Lock::Timeout=600)
apt-get "${lock_wait[@]}" update -qq
DEBIAN_FRONTEND=noninteractive apt-get "${lock_wait[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null
