#!/usr/bin/env bash
# Workers placement with decrypt + verify on: inline vs bound vs unbound
# (verify in the same work item), interleaved over rounds, on the same
# dataset. Extra --set arguments apply to every run.
# Usage: bench/workers.sh [rounds] [seconds] [--set k=v ...]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}; SECS=${2:-5}; shift $(( $# >= 2 ? 2 : $# ))
BIN=target/release/readpath
DATA_DIR=${DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/readpath}
[ -x "$BIN" ] || cargo build --release
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
printf "%-8s %5s %10s %10s %10s %12s %14s %8s\n" mode round MiB/s p50_us p99_us queue_p99_us run_delay_us failures
for r in $(seq 1 "$ROUNDS"); do
  for mode in inline bound unbound; do
    $BIN --data-dir "$DATA_DIR" run --duration "${SECS}s" --format json \
      --set pipeline.decrypt=true --set pipeline.verity=true \
      --set workers.mode=$mode --set workers.verify_mode=same "$@" >"$TMP/o.json"
    python3 - "$TMP/o.json" "$mode" "$r" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
q = j["stages_us"]["queue"]["p99"]
print(f'{sys.argv[2]:<8} {sys.argv[3]:>5} {j["throughput_mib_s"]:>10.1f} {j["latency_us"]["p50"]:>10.1f} {j["latency_us"]["p99"]:>10.1f} {q:>12.1f} {j["run_delay_us_total"]:>14.0f} {j["verity_failures"]:>8}')
PY
  done
done
