#!/usr/bin/env bash
# Miss-path throughput as readers are added, for bound and unbound workers:
# the max-throughput preset with every read a miss on the memory device
# (no device time, no device CPU: bench/paths.sh's miss path), one reader
# count after another, interleaved per round (bound, unbound at each count),
# against readpath's own crypto limit per core x the CPUs the run may use.
# A configuration should not get slower as readers are added until the CPUs
# are saturated.
# Usage: bench/scaling.sh [rounds=2] [seconds=4] [readers="1 2 4 ... 2xCPUs"]
# (on a 16-CPU machine: READERS="1 2 4 8 16 32"); BIN= a readpath binary.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}; SECS=${2:-4}
NCPU=$(nproc)
BIN=${BIN:-target/release/readpath}
[ -x "$BIN" ] || cargo build --release
if [ -n "${3:-}" ]; then READERS="$3"; else
  READERS=""; n=1; while [ "$n" -le $((2 * NCPU)) ]; do READERS="$READERS $n"; n=$((n * 2)); done
fi
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
echo "# $(date -u) | kernel $(uname -r) | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | nproc $NCPU | readers:$READERS"
$BIN bench crypto --format json --rounds 3 >"$TMP/crypto.json"
BASE=(--preset max-throughput --set workers.verify_mode=same --set workers.max_active=0
      --set cache.device=memory --set cache.size=16M)
$BIN run --duration 2s "${BASE[@]}" --format json >/dev/null
for r in $(seq 1 "$ROUNDS"); do
  for n in $READERS; do
    for mode in bound unbound; do
      $BIN run --duration "${SECS}s" "${BASE[@]}" --set workers.mode=$mode \
          --set workload.readers="$n" --format json >"$TMP/$mode-$n-$r.json"
    done
  done
done
python3 - "$TMP" "$ROUNDS" "$NCPU" "$READERS" <<'PY'
import json, sys, statistics as st
tmp, rounds, ncpu, readers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
c = {r["name"]: r for r in json.load(open(f"{tmp}/crypto.json"))["results"]}
core = 1 / (1 / c["aes-256-xts"]["bytes_per_s"] + 1 / c["sha256-2x"]["bytes_per_s"])
print(f"readpath's own crypto limit: {core/1e9:.2f} GB/s per core x {ncpu} = {core*ncpu/1e9:.2f} GB/s")
print(f"{'readers':>7} {'bound GB/s':>11} {'of limit':>9} {'cpu%':>6} {'unbound GB/s':>13} {'of limit':>9} {'cpu%':>6} {'rdelay ms/s b/u':>16}")
for n in readers:
    row = []
    for mode in ("bound", "unbound"):
        js = [json.load(open(f"{tmp}/{mode}-{n}-{r}.json")) for r in range(1, rounds + 1)]
        bps = st.median(j["bytes"] / j["duration_s"] for j in js)
        cpu = st.median(j["process_cpu_pct"] for j in js)
        rd = st.median(j["run_delay_ms_per_s"] for j in js)
        row.append((bps, cpu, rd))
    (b, bc, brd), (u, uc, urd) = row
    lim = core * ncpu
    print(f"{n:>7} {b/1e9:>11.3f} {b/lim:>9.3f} {bc:>6.0f} {u/1e9:>13.3f} {u/lim:>9.3f} {uc:>6.0f} {brd:>7.0f}/{urd:<7.0f}")
print("of limit: the median over rounds against the limit x all CPUs; cpu% the whole process")
PY
