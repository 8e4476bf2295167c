#!/usr/bin/env bash
# `make run`: start the service on SQLite, scan this machine and a demo image (once each: the
# table is printed, the CycloneDX report pushed and saved as the service stored it), gate the
# demo image's report under docs/examples/demo-policy.yaml (offline, then in the service, so
# the dashboard has a decision and compliance to show), and print the dashboard's URL with the
# token to log in, and commands that work as printed. `make stop` (run.sh stop) stops the service.
#
# GPUPROV_PORT: the port to use (fails when taken by anything but the previous run's service,
# before anything is changed: that service keeps running); unset: 8000, or a free port when 8000
# is taken. Each run revokes the tokens the previous run made (by their secrets, kept in the
# run directory), so only the last run's admin and agent tokens work. GPUPROV_RUN_DIR: where the run keeps everything (default: .gpuprov-run for the state,
# build/run for the reports). GPUPROV_RUN_INCLUDE: the host directories to scan.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/.venv/bin
if [ -n "${GPUPROV_RUN_DIR:-}" ]; then
  mkdir -p "$GPUPROV_RUN_DIR"
  RUN=$(cd "$GPUPROV_RUN_DIR" && pwd)
  OUT=$RUN/reports
  DEMO=$RUN/demo-oci
else
  RUN=$ROOT/.gpuprov-run
  OUT=$ROOT/build/run
  DEMO=$ROOT/build/demo-oci
fi

# The previous run's service: the pid it recorded, if that process is still a gpuprov serve.
previous_service() {
  [ -f "$RUN/server.pid" ] || return 0
  local old
  old=$(cat "$RUN/server.pid")
  if [ -r "/proc/$old/cmdline" ] && tr '\0' ' ' <"/proc/$old/cmdline" | grep -q "gpuprov serve"; then
    echo "$old"
  fi
}
# It stops and gives its port back; its workers, if any, stop with it (uvicorn's supervisor
# ends them on SIGTERM).
stop_service() {
  local old
  old=$(previous_service)
  if [ -n "$old" ]; then
    kill "$old" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
    echo "stopped the service (pid $old)" >&2
  fi
  rm -f "$RUN/server.pid"
}
if [ "${1:-}" = stop ]; then
  [ -f "$RUN/server.pid" ] || echo "no service of make run is running (no $RUN/server.pid)" >&2
  stop_service
  exit 0
fi

# 0. The port first: when it cannot be had, nothing has changed (the previous run's service,
#    its database and tokens are as they were). A port the previous service holds is usable:
#    it is stopped below.
OLD=$(previous_service)
if [ -n "${GPUPROV_PORT:-}" ]; then
  PORT=$("$BIN/python" scripts/run_port.py choose --required "$GPUPROV_PORT" ${OLD:+--ours "$OLD"})
else
  PORT=$("$BIN/python" scripts/run_port.py choose --preferred 8000 ${OLD:+--ours "$OLD"})
fi
mkdir -p "$OUT" "$RUN"
chmod 700 "$RUN"

# 1. The service, on the embedded SQLite default, for this run's database only.
export GPUPROV_DATABASE_URL="sqlite:///$RUN/gpuprov.db"
export GPUPROV_SPOOL="$RUN/spool"
"$BIN/gpuprov" db upgrade
stop_service
export GPUPROV_SERVER="http://127.0.0.1:$PORT"
nohup "$BIN/gpuprov" serve --host 127.0.0.1 --port "$PORT" >"$RUN/server.log" 2>&1 &
SERVER_PID=$!
echo "$SERVER_PID" >"$RUN/server.pid"
# Nothing is sent to the port until /proc shows that this pid is the one listening on it.
if ! "$BIN/python" scripts/run_port.py wait "$SERVER_PID" "$PORT" "$RUN/server.log"; then
  kill "$SERVER_PID" 2>/dev/null || true
  rm -f "$RUN/server.pid"
  exit 1
fi

umask 077
# The previous run's tokens, known by the secrets it kept here (a name is no proof: anyone can
# name a token run-admin-N), are revoked before this run's are made, so none is left behind.
for kind in admin agent; do
  [ -s "$RUN/$kind.token" ] || continue
  if said=$("$BIN/gpuprov" token revoke --secret-file "$RUN/$kind.token" 2>&1); then
    echo "make run: the previous run's $kind token is revoked ($said)" >&2
  fi
done
"$BIN/gpuprov" token create --name "run-admin-$$" --scope admin >"$RUN/admin.token"
"$BIN/gpuprov" token create --name "run-agent-$$" --scope report:write >"$RUN/agent.token"
umask 022

# 2. Scan this machine (library directories only, so it takes seconds) and a demo image built on
#    the fly from this machine's CUDA runtime. Each is scanned once: the table goes to the
#    terminal and the CycloneDX report to the service, which gives it back for the files.
rm -rf "$DEMO"
"$BIN/python" scripts/demo_image.py "$DEMO" >&2
includes=()
for d in ${GPUPROV_RUN_INCLUDE:-/usr/lib /usr/lib64 /usr/local /opt}; do
  [ -e "$d" ] && includes+=(--include "$d")
done
scan_push_save() {  # TARGET FILE [scan options...]: scan once, push, save the stored report
  local target=$1 file=$2 asset
  shift 2
  if ! "$BIN/gpuprov" scan "$target" "$@" --quiet --format table --push \
    --token-file "$RUN/agent.token" --label env=demo 2>"$RUN/push.err"; then
    cat "$RUN/push.err" >&2
    echo "make run: scanning or pushing $target failed (above)" >&2
    exit 1
  fi
  cat "$RUN/push.err" >&2
  asset=$(sed -n 's|^delivered: .*(/api/v1/assets/\([0-9][0-9]*\))$|\1|p' "$RUN/push.err")
  [ -n "$asset" ] || { echo "make run: the push did not name the stored asset" >&2; exit 1; }
  curl -fsS -H "Authorization: Bearer $(cat "$RUN/admin.token")" \
    "$GPUPROV_SERVER/api/v1/assets/$asset/sbom" -o "$file"
}
echo "== host scan of / (library directories) ==" >&2
scan_push_save / "$OUT/host.cdx.json" "${includes[@]}"
echo "== demo image oci:$DEMO:demo ==" >&2
scan_push_save "oci:$DEMO:demo" "$OUT/demo-image.cdx.json"
rm -f "$RUN/push.err"

# 3. May the demo image be promoted? Its report, gated offline under the demo policy. A deny
#    (exit 1) is an answer to print; only an error (exit 2) stops the run.
echo "== gate: demo image under docs/examples/demo-policy.yaml ==" >&2
gate=0
"$BIN/gpuprov" gate --bom "$OUT/demo-image.cdx.json" \
  --policy-file "$ROOT/docs/examples/demo-policy.yaml" || gate=$?
if [ "$gate" -ge 2 ]; then
  echo "make run: gating the demo image failed (above)" >&2
  exit 1
fi
# The same policy stored in the service and the same question asked there (by the image's
# digest: its stored scan), so the dashboard shows the decision and the fleet's compliance.
admin=(-H "Authorization: Bearer $(cat "$RUN/admin.token")")
curl -fsS -o /dev/null -X PUT "${admin[@]}" -H 'Content-Type: application/yaml' \
  --data-binary @"$ROOT/docs/examples/demo-policy.yaml" "$GPUPROV_SERVER/api/v1/policies/demo"
digest=$("$BIN/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' \
  "$DEMO/index.json")
curl -fsS -o /dev/null "${admin[@]}" -H 'Content-Type: application/json' \
  -d "{\"policy\": \"demo\", \"image\": \"$digest\"}" "$GPUPROV_SERVER/api/v1/gate"

q() { printf '%q' "$1"; }
# `make stop` finds this run only where make run keeps it by default.
stop_make="make stop"
[ -z "${GPUPROV_RUN_DIR:-}" ] || stop_make="GPUPROV_RUN_DIR=$(q "$RUN") make stop"
cat >&2 <<MSG

Reports:      $OUT/host.cdx.json, $OUT/demo-image.cdx.json (CycloneDX 1.6)
Dashboard:    $GPUPROV_SERVER/   (log in with the admin token: paste the contents of $RUN/admin.token)
Service:      $GPUPROV_SERVER/api/v1   (OpenAPI: $GPUPROV_SERVER/docs, log: $RUN/server.log)
Admin token:  $RUN/admin.token
Agent token:  $RUN/agent.token (mode 0600)

To use this run's service and database from a shell:
  . $(q "$BIN/activate")
  export GPUPROV_DATABASE_URL=$(q "$GPUPROV_DATABASE_URL") GPUPROV_SERVER=$GPUPROV_SERVER GPUPROV_SPOOL=$(q "$GPUPROV_SPOOL")
Then, for example:
  curl -H "Authorization: Bearer \$(cat $(q "$RUN/admin.token"))" '$GPUPROV_SERVER/api/v1/where-used?family=cudart'
  gpuprov token list
  gpuprov push $(q "$OUT/host.cdx.json") --token-file $(q "$RUN/agent.token")
Stop (the service and its workers; \`$stop_make\` in $(q "$ROOT") does the same):
  kill \$(cat $(q "$RUN/server.pid"))
MSG
