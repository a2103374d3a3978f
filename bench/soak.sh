#!/usr/bin/env bash
# The soak: a long run (default 10 minutes, 1 s intervals) with its
# interval log and recording, then what must hold over it: RSS flat after
# the first minute, every interval's reads equal to its latency histogram's
# count and to the summary's total (nothing lost, nothing counted twice),
# no verity failure or I/O error, the recording reading back.
# Usage: bench/soak.sh [duration, e.g. 10m] [--set k=v ...]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-10m}; shift $(( $# >= 1 ? 1 : 0 ))
BIN=target/release/readpath
DATA_DIR=${DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/readpath}
[ -x "$BIN" ] || cargo build --release
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
"$BIN" --data-dir "$DATA_DIR" run --duration "$DUR" --interval 1s --format json \
  --interval-log "$TMP/intervals.jsonl" --record "$TMP/rec.jsonl" "$@" >"$TMP/summary.json"
"$BIN" plot "$TMP/rec.jsonl" --format csv --out - >/dev/null
python3 - "$TMP/intervals.jsonl" "$TMP/summary.json" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
summ = json.load(open(sys.argv[2]))
mib = lambda b: b / 2**20
live = recs[:-1]  # the last record is taken as the run stops and frees its buffers
after1 = [r for r in live if r["t_s"] >= 60] or live
rss = [r["rss_bytes"] for r in after1]
print(f"intervals {len(recs)}, {summ['duration_s']:.0f} s")
for at in (60, 300, len(live) - 1):
    r = min(live, key=lambda r: abs(r["t_s"] - at))
    print(f"rss at {r['t_s']:.0f} s: {mib(r['rss_bytes']):.2f} MiB")
print(f"rss from 1 min on: min {mib(min(rss)):.2f} max {mib(max(rss)):.2f} MiB (growth {mib(max(rss) - min(rss)):.2f} MiB)")
bad = [r["seq"] for r in recs if r["reads"] != sum(n for _, n in r["latency_hist"]) and r["reads"] > 0]
total = sum(r["reads"] for r in recs)
fails = sum(r["counters"]["verity_failures"] + r["counters"]["io_errors"] for r in recs)
print(f"reads: sum of intervals {total}, summary {summ['reads']} ({'equal' if total == summ['reads'] else 'DIFFERENT'})")
print(f"intervals whose reads != their histogram count: {len(bad)}")
print(f"verity failures + I/O errors: {fails}")
ok = total == summ["reads"] and not bad and fails == 0 and max(rss) - min(rss) < 4 * 2**20
print("soak:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
