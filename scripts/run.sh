#!/usr/bin/env bash
# `make run`: scan this machine's library directories and a demo image built on the fly.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
OUT=build/run
mkdir -p "$OUT"
rm -rf build/demo-oci
$BIN/python scripts/demo_image.py build/demo-oci >&2

includes=()
for d in /usr/lib /usr/lib64 /usr/local /opt /var/lib/dpkg /var/lib/rpm /etc; do
  [ -e "$d" ] && includes+=(--include "$d")
done
echo "== host scan of / (library directories only) ==" >&2
$BIN/gpuprov scan / "${includes[@]}" --format table
$BIN/gpuprov scan / "${includes[@]}" --quiet --format cyclonedx -o "$OUT/host.cdx.json"
echo "== demo image oci:build/demo-oci:demo ==" >&2
$BIN/gpuprov scan oci:build/demo-oci:demo --format table
$BIN/gpuprov scan oci:build/demo-oci:demo --quiet --format cyclonedx -o "$OUT/demo-image.cdx.json"
echo >&2
echo "CycloneDX reports: $OUT/host.cdx.json and $OUT/demo-image.cdx.json" >&2
