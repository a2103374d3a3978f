#!/usr/bin/env bash
# The full pipeline against the CPU's limit, and what measuring costs.
#
# 1. Per-core limits from `readpath bench crypto` (AES-256-XTS and SHA-256 on
#    4 KiB units, CPU time): the pipeline's per-core limit is
#    1 / (1/aes + 1/sha) bytes/s, times the online CPUs (the issue's limit,
#    with openssl-class one-stream SHA-256). Where the CPU has the SHA
#    extensions, verification hashes two blocks at once (as fs-verity does
#    since Linux 6.18), so the same formula with sha256-2x is printed too:
#    the pipeline's fraction of readpath's own crypto speed.
# 2. The full pipeline at the CPU's limit: every read a miss on a device
#    that costs no CPU (`cache.device = memory`, a 16 MiB cache: the miss
#    path of bench/paths.sh; until 2026-12-05 this ran from the disk, and
#    measured the disk), decrypt + verify in one work item on the unbound
#    queue, one worker per CPU, 128 KiB sequential reads at QD32 by one
#    reader per CPU, run with latency recording on and off (`--no-latency`:
#    no timestamps, no histograms), interleaved.
# Prints the pipeline's throughput as a fraction of the limit, and the
# recording-off / recording-on ratio (the cost of measuring).
# Usage: bench/pipeline.sh [rounds=3] [seconds=10] [--set k=v ...]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}; SECS=${2:-10}; shift $(( $# >= 2 ? 2 : $# ))
BIN=target/release/readpath
[ -x "$BIN" ] || cargo build --release
NCPU=$(nproc)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
echo "# $(date -u) | kernel $(uname -r) | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | nproc $NCPU"
$BIN bench crypto --format json --rounds 3 >"$TMP/crypto.json"
SETS=(--preset max-throughput --set workers.mode=unbound --set workers.verify_mode=same
      --set workers.max_active=0 --set workload.readers="$NCPU"
      --set cache.device=memory --set cache.size=16M "$@")
# Warm the page cache (and the dataset) first.
$BIN run --duration 2s "${SETS[@]}" --format json >/dev/null
for r in $(seq 1 "$ROUNDS"); do
  for mode in on off; do
    extra=(); [ $mode = off ] && extra=(--no-latency)
    $BIN run --duration "${SECS}s" "${SETS[@]}" "${extra[@]}" --format json >"$TMP/$mode-$r.json"
  done
done
python3 - "$TMP" "$ROUNDS" "$NCPU" <<'PY'
import json, sys, statistics as st
tmp, rounds, ncpu = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = {r["name"]: r for r in json.load(open(f"{tmp}/crypto.json"))["results"]}
aes, sha = c["aes-256-xts"]["bytes_per_s"], c["sha256"]["bytes_per_s"]
core = 1 / (1 / aes + 1 / sha)
limit = core * ncpu
print(f"per core: aes-256-xts {aes/1e9:.2f} GB/s, sha256 {sha/1e9:.2f} GB/s -> pipeline {core/1e9:.2f} GB/s; x {ncpu} CPUs = {limit/1e9:.2f} GB/s (the issue's limit)")
limit2 = None
if "sha256-2x" in c:
    sha2x = c["sha256-2x"]["bytes_per_s"]
    limit2 = ncpu / (1 / aes + 1 / sha2x)
    print(f"with 2-way interleaved sha256 ({sha2x/1e9:.2f} GB/s, what verification runs here): {limit2/1e9:.2f} GB/s (readpath's own crypto limit)")
print(f"{'round':>5} {'recording':>9} {'GB/s':>8} {'of limit':>9} {'of own':>7} {'process cpu%':>13}")
on, off, ratios = [], [], []
for r in range(1, rounds + 1):
    row = {}
    for mode in ("on", "off"):
        j = json.load(open(f"{tmp}/{mode}-{r}.json"))
        bps = j["bytes"] / j["duration_s"]
        row[mode] = bps
        (on if mode == "on" else off).append(bps)
        own = f"{bps/limit2:.3f}" if limit2 else "-"
        print(f"{r:>5} {mode:>9} {bps/1e9:>8.3f} {bps/limit:>9.3f} {own:>7} {j['process_cpu_pct']:>13.1f}")
    ratios.append(row["on"] / row["off"])
print(f"median: recording on {st.median(on)/1e9:.3f} GB/s = {st.median(on)/limit:.3f}x of the limit; "
      f"off {st.median(off)/1e9:.3f} GB/s = {st.median(off)/limit:.3f}x")
if limit2:
    print(f"against readpath's own crypto limit: on {st.median(on)/limit2:.3f}x, off {st.median(off)/limit2:.3f}x")
print(f"cost of measuring: on/off = {st.median(ratios):.3f} (median of per-round ratios {', '.join(f'{x:.3f}' for x in ratios)})")
PY
