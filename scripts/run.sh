#!/usr/bin/env bash
# `make run`: start the service on SQLite, scan this machine and a demo image, push both.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/.venv/bin
OUT=build/run
RUN=.gpuprov-run
mkdir -p "$OUT" "$RUN"
chmod 700 "$RUN"

# 1. The service, on the embedded SQLite default.
export GPUPROV_DATABASE_URL="sqlite:///$PWD/$RUN/gpuprov.db"
export GPUPROV_SPOOL="$PWD/$RUN/spool"
PORT="${GPUPROV_PORT:-8000}"
export GPUPROV_SERVER="http://127.0.0.1:$PORT"
"$BIN/gpuprov" db upgrade
if [ -f "$RUN/server.pid" ]; then
  kill "$(cat "$RUN/server.pid")" 2>/dev/null || true
  sleep 1
fi
nohup "$BIN/gpuprov" serve --host 127.0.0.1 --port "$PORT" >"$RUN/server.log" 2>&1 &
echo $! >"$RUN/server.pid"
for _ in $(seq 100); do
  curl -fsS "$GPUPROV_SERVER/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "$GPUPROV_SERVER/readyz" >/dev/null || {
  echo "service did not start; see $RUN/server.log" >&2
  exit 1
}
umask 077
"$BIN/gpuprov" token create --name "run-admin-$$" --scope admin >"$RUN/admin.token"
"$BIN/gpuprov" token create --name "run-agent-$$" --scope report:write >"$RUN/agent.token"
chmod 600 "$RUN"/*.token
umask 022

# 2. Scan this machine (library directories only, so it takes seconds) and a demo image
#    built on the fly from this machine's CUDA runtime, then push both reports.
rm -rf build/demo-oci
"$BIN/python" scripts/demo_image.py build/demo-oci >&2
includes=()
for d in /usr/lib /usr/lib64 /usr/local /opt; do
  [ -e "$d" ] && includes+=(--include "$d")
done
echo "== host scan of / (library directories) ==" >&2
"$BIN/gpuprov" scan / "${includes[@]}" --quiet --format table
"$BIN/gpuprov" scan / "${includes[@]}" --quiet --format cyclonedx -o "$OUT/host.cdx.json"
echo "== demo image oci:build/demo-oci:demo ==" >&2
"$BIN/gpuprov" scan oci:build/demo-oci:demo --quiet --format table
"$BIN/gpuprov" scan oci:build/demo-oci:demo --quiet --format cyclonedx -o "$OUT/demo-image.cdx.json"
"$BIN/gpuprov" push "$OUT/host.cdx.json" --token-file "$RUN/agent.token" --label env=demo
"$BIN/gpuprov" push "$OUT/demo-image.cdx.json" --token-file "$RUN/agent.token" --label env=demo

cat >&2 <<MSG

Reports:      $OUT/host.cdx.json, $OUT/demo-image.cdx.json (CycloneDX 1.6)
Service:      $GPUPROV_SERVER/api/v1   (OpenAPI: $GPUPROV_SERVER/docs, log: $RUN/server.log)
Admin token:  $PWD/$RUN/admin.token
Agent token:  $PWD/$RUN/agent.token (mode 0600)
Try:          curl -H "Authorization: Bearer \$(cat $RUN/admin.token)" '$GPUPROV_SERVER/api/v1/where-used?family=cudart'
Stop:         kill \$(cat $RUN/server.pid)
MSG
