#!/usr/bin/env bash
# Regenerates the dashboard screenshots under docs/img/ (the README shows them): runs the browser
# tests (tests/browser: Debian's chromium through Playwright, the real service on PostgreSQL)
# with their screenshots written to a scratch directory, then keeps the pages the docs show.
set -euo pipefail
cd "$(dirname "$0")/.."
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
bash scripts/system-deps.sh
shots="$(mktemp -d)"
trap 'rm -rf "$shots"' EXIT
GPUPROV_SCREENSHOTS="$shots" .venv/bin/pytest tests/browser -q -p no:cacheprovider
mkdir -p docs/img
for name in overview asset-tampered libraries drift-parity compliance-control decision \
    policy-diff; do
  cp "$shots/$name.png" "docs/img/dashboard-$name.png"
done
echo "docs/img: dashboard screenshots updated"
