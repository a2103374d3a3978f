#!/usr/bin/env bash
# What a Perfetto trace (`--trace`) costs and weighs at a preset: runs of
# the same workload without and with a trace, interleaved (off, on, off,
# on, ...), then the throughput of each (median and range), the ratio of
# the medians and its chance by noise (2 / C(n+m, n) when the ranges are
# apart, readpath's verdict rule), and of the traced runs the trace's
# bytes, work items, bytes per item and events (packets) per second.
# Usage: bench/trace-cost.sh [rounds=6] [seconds=5] [--preset NAME or --set k=v ...]
# BIN= a readpath binary.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-6}; SECS=${2:-5}
shift $(( $# > 2 ? 2 : $# ))
BIN=${BIN:-target/release/readpath}
[ -x "$BIN" ] || cargo build --release
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
echo "# $(date -u) | kernel $(uname -r) | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | nproc $(nproc) | ${ROUNDS} rounds of ${SECS} s | $*"
$BIN run --duration 2s "$@" --format json >/dev/null
for r in $(seq 1 "$ROUNDS"); do
  $BIN run --duration "${SECS}s" "$@" --format json >"$TMP/off-$r.json" 2>/dev/null
  $BIN run --duration "${SECS}s" "$@" --format json --trace "$TMP/t-$r.pftrace" \
      >"$TMP/on-$r.json" 2>"$TMP/on-$r.err"
  stat -c %s "$TMP/t-$r.pftrace" >"$TMP/t-$r.size"
  python3 tests/perfetto/check_trace.py "$TMP/t-$r.pftrace" >"$TMP/t-$r.check" 2>/dev/null || echo '{}' >"$TMP/t-$r.check"
  rm -f "$TMP/t-$r.pftrace"
done
python3 - "$TMP" "$ROUNDS" "$SECS" <<'PY'
import json, sys, statistics as st
from math import comb
tmp, rounds, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
off = [json.load(open(f"{tmp}/off-{r}.json"))["throughput_mib_s"] for r in range(1, rounds + 1)]
on = [json.load(open(f"{tmp}/on-{r}.json"))["throughput_mib_s"] for r in range(1, rounds + 1)]
mo, mn = st.median(off), st.median(on)
apart = max(off) < min(on) or max(on) < min(off)
chance = 2 / comb(len(off) + len(on), len(off))
print(f"throughput MiB/s without a trace: median {mo:.1f} (range {min(off):.1f}..{max(off):.1f})")
print(f"throughput MiB/s with a trace:    median {mn:.1f} (range {min(on):.1f}..{max(on):.1f})")
verdict = f"ranges apart, chance by noise {chance*100:.2g}%" if apart else "ranges overlap: within noise"
print(f"with/without: {mn/mo:.3f} ({(mn/mo-1)*100:+.1f}%), {rounds} v {rounds} runs, {verdict}")
sizes = [int(open(f"{tmp}/t-{r}.size").read()) for r in range(1, rounds + 1)]
checks = [json.load(open(f"{tmp}/t-{r}.check")) for r in range(1, rounds + 1)]
items = [sum(p.get("items_total", 0) for p in c.get("processes", {}).values()) for c in checks]
packets = [c.get("packets", 0) for c in checks]
if all(items):
    bpi = [s / i for s, i in zip(sizes, items)]
    print(f"trace of {secs:.0f} s: median {st.median(sizes)/2**20:.1f} MiB, {st.median(items)/secs:.0f} work items/s, "
          f"{st.median(bpi):.0f} bytes per item (all events included), {st.median(packets)/secs:.0f} events/s")
    print(f"problems Perfetto's schema found: {sum(len(c.get('problems', {})) for c in checks)}")
else:
    print("no check: tests/perfetto/check_trace.py needs `pip install perfetto`")
PY
